package image

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Format is an output format of Build.
type Format string

// The output formats.
const (
	// FormatRaw is a GPT disk image to flash with dd or boot in QEMU.
	FormatRaw Format = "raw"
	// FormatOCI is an OCI image: the upgrade artifact and the container
	// form factor.
	FormatOCI Format = "oci"
)

// ErrSizeTooSmall is returned (wrapped) when Config.Size cannot hold the
// partitions; the message names the minimum.
var ErrSizeTooSmall = errors.New("disk size too small")

// Config is the input of Build. Paths are host paths.
type Config struct {
	// Kernel is the x86 bzImage to boot.
	Kernel string
	// Modules is the kernel's module directory, /lib/modules/<release>;
	// its base name must be the kernel's release.
	Modules string
	// Drivers names the modules the initramfs carries, with their
	// dependencies; nil means DefaultDrivers.
	Drivers []string
	// Etcd is the static etcd server binary, installed as /usr/bin/etcd.
	// Empty means the init's own etcd: /usr/bin/etcd is a link to /init,
	// which runs etcd when started under that name (init/runetcd.go).
	// Give one for another etcd version than the init was built with.
	Etcd string
	// Init is the static etcdbox init, installed as /init.
	Init string
	// Bootloader is systemd-boot's EFI binary (raw format only).
	Bootloader string
	// ToolsRoot is the root e2fsprogs, fsck.fat, /etc/mke2fs.conf and their shared
	// libraries are taken from; empty means the host ("/").
	ToolsRoot string
	// Cmdline holds extra kernel command-line arguments for the boot entry.
	Cmdline string
	// Seed is an optional seed file baked in as /etc/etcdbox/seed.yaml.
	Seed string
	// Size is the raw disk size in bytes; 0 means DefaultSize.
	Size int64
	// Format is the output format; empty means FormatRaw.
	Format Format
	// Output is the file (raw; OCI when it ends in ".tar") or directory
	// (OCI image layout) to write. Optional for OCI when Push is set.
	Output string
	// Push is an image reference to push an OCI image to.
	Push string
	// SourceDateEpoch is the time stamped on every file, in seconds since
	// 1970; Build does not read the environment (see EpochFromEnv).
	SourceDateEpoch int64
	// Version is recorded in /etc/etcdbox/release; empty means "dev".
	Version string
	// Compression is how hard the initrd is compressed; empty means
	// CompressionSmall.
	Compression Compression
	// Zstd is the zstd program CompressionSmall compresses with: empty
	// means the one on PATH, when there is one that works, else the
	// built-in encoder; ZstdNone means the built-in encoder; anything
	// else names the program, which must work.
	Zstd string
	// CacheDir is where the zstd program's frames of the initrd's members
	// are kept from one build to the next (see memberCache); empty means
	// no cache.
	CacheDir string
}

// Result describes what Build wrote.
type Result struct {
	// Initrd describes the initramfs.
	Initrd InitrdInfo
	// Digest is the OCI manifest digest ("sha256:..."), empty for raw.
	Digest string
}

// EpochFromEnv returns SOURCE_DATE_EPOCH, or 0 when it is unset.
func EpochFromEnv() (int64, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want a non-negative number of seconds", s)
	}
	return v, nil
}

// check fills in defaults and validates cfg before anything is written;
// output says whether the output side (format, size, destination) is
// checked too.
func (cfg Config) check(output bool) (Config, error) {
	if cfg.Drivers == nil {
		cfg.Drivers = DefaultDrivers
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Format == "" {
		cfg.Format = FormatRaw
	}
	if cfg.Size == 0 {
		cfg.Size = DefaultSize
	}
	c, err := cfg.Compression.check()
	if err != nil {
		return cfg, err
	}
	cfg.Compression = c
	if cfg.SourceDateEpoch < 0 {
		return cfg, fmt.Errorf("source date epoch %d is negative", cfg.SourceDateEpoch)
	}
	if strings.ContainsAny(cfg.Cmdline, "\n\r") {
		return cfg, fmt.Errorf("cmdline %q: must be one line", cfg.Cmdline)
	}
	if n := len(bootOptions(cfg.Cmdline)); n > MaxCmdline {
		return cfg, fmt.Errorf("cmdline: the kernel command line would be %d bytes, over x86's %d (the kernel cuts the rest off, and a seed on it would not parse); gzip the seed (etcdbox seed -o seed.cmdline), or put it on a seed volume or in the image (--seed)", n, MaxCmdline)
	}
	if err := cfg.checkInputs(); err != nil {
		return cfg, err
	}
	if !output {
		return cfg, nil
	}
	switch cfg.Format {
	case FormatRaw, FormatQCOW2, FormatVHD, FormatGCE, FormatVMDK:
		if cfg.Push != "" {
			return cfg, fmt.Errorf("push %s: only the oci format can be pushed", cfg.Push)
		}
		// Azure takes VHDs of whole MiB, GCE disks of whole GiB.
		if u := cfg.Format.sizeUnit(); cfg.Size%u != 0 {
			cfg.Size += u - cfg.Size%u
		}
		if cfg.Bootloader == "" {
			return cfg, errors.New("bootloader: no path given")
		}
		if _, err := os.Stat(cfg.Bootloader); err != nil {
			return cfg, fmt.Errorf("bootloader %s: %w", cfg.Bootloader, err)
		}
		if cfg.Size < MinSize || cfg.Size%sector != 0 {
			return cfg, fmt.Errorf("%w: %d bytes; the minimum is %d bytes (%d MiB), in whole %d-byte sectors",
				ErrSizeTooSmall, cfg.Size, int64(MinSize), MinSize>>20, sector)
		}
	case FormatOCI:
		if cfg.Push != "" {
			if _, err := name.ParseReference(cfg.Push); err != nil {
				return cfg, fmt.Errorf("push %s: %w", cfg.Push, err)
			}
		}
	default:
		return cfg, fmt.Errorf("unknown format %q (want one of %s)", cfg.Format, FormatNames())
	}
	if cfg.Output == "" && cfg.Push == "" {
		return cfg, errors.New("output: no path given")
	}
	if cfg.Output != "" {
		// Fail before the slow part when the output cannot be written.
		layoutDir := cfg.Format == FormatOCI && !strings.HasSuffix(cfg.Output, ".tar")
		if err := checkOutput(cfg.Output, layoutDir); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// etcdBinary is the file etcd comes from: Etcd, or the init that carries it.
func (cfg Config) etcdBinary() string {
	if cfg.Etcd != "" {
		return cfg.Etcd
	}
	return cfg.Init
}

// checkInputs reports an input file that is missing, and modules that
// are not the kernel's.
func (cfg Config) checkInputs() error {
	for _, in := range []struct{ what, path string }{
		{"kernel", cfg.Kernel}, {"modules", cfg.Modules}, {"etcd", cfg.Etcd}, {"init", cfg.Init}, {"seed", cfg.Seed},
	} {
		if (in.what == "seed" || in.what == "etcd") && in.path == "" {
			continue // no seed baked in; no etcd: the init's own
		}
		if in.path == "" {
			return fmt.Errorf("%s: no path given", in.what)
		}
		if _, err := os.Stat(in.path); err != nil {
			return fmt.Errorf("%s %s: %w", in.what, in.path, err)
		}
	}
	kver, err := kernelVersion(cfg.Kernel)
	if err != nil {
		return fmt.Errorf("kernel %s: %w", cfg.Kernel, err)
	}
	if base := filepath.Base(cfg.Modules); base != kver {
		return fmt.Errorf("modules %s are for %s, but kernel %s is %s", cfg.Modules, base, cfg.Kernel, kver)
	}
	return nil
}

// Build writes a bootable image of cfg in cfg.Format. Output appears only
// when complete: a failed Build leaves nothing at cfg.Output.
func Build(ctx context.Context, cfg Config) (*Result, error) {
	cfg, err := cfg.check(true)
	if err != nil {
		return nil, err
	}
	t, mods, err := rootTree(cfg)
	if err != nil {
		return nil, err
	}
	var initrd bytes.Buffer
	info, err := writeInitrd(ctx, &initrd, t, mods, cfg)
	if err != nil {
		return nil, err
	}
	res := &Result{Initrd: info}
	switch cfg.Format {
	case FormatRaw:
		err = writeRaw(ctx, cfg, initrd.Bytes())
	case FormatOCI:
		res.Digest, err = writeOCI(ctx, cfg, t, initrd.Bytes())
	default:
		err = writeConverted(ctx, cfg, initrd.Bytes())
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

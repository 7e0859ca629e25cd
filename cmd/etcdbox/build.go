package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/spf13/cobra"

	"github.com/etcdbox/etcdbox/image"
	"github.com/etcdbox/etcdbox/imagesig"
	"github.com/etcdbox/etcdbox/seed"
)

func init() { commands = append(commands, newBuildCommand) }

// buildFlags are the flags of `etcdbox build`; an empty path means the
// default that defaultInputs finds.
type buildFlags struct {
	output, format, kernel, modules, etcd, init, bootloader string
	cmdline, size, seed, push, version, toolsRoot           string
	sign, compression, zstd, cacheDir                       string
	force                                                   bool
	drivers                                                 []string
}

func newBuildCommand() *cobra.Command {
	var f buildFlags
	cmd := &cobra.Command{
		Use:   "build -o FILE",
		Short: "Build a bootable disk image or an OCI image of an etcd node",
		Long: `Build turns a kernel, the etcdbox init and upstream etcd into a bootable
GPT disk (--format raw, the default) or an OCI image (--format oci: a
tarball when -o ends in .tar, else an OCI image layout directory).

The same disk also comes in the forms clouds and hypervisors import:
qcow2 (QEMU, libvirt, OpenStack), vhd (fixed, whole MiB, for Azure), gce
(disk.raw in a .tar.gz, whole GiB) and vmdk (stream-optimized, for
vSphere and OVA). qcow2 and vmdk are written with the host's qemu-img.

The initrd is compressed, by default, with the host's zstd program at
level 19 (a tenth smaller than the built-in encoder's best; install the
zstd package); without one, with the built-in encoder, and the build says
so. The program takes about 15 s over /init on two cores, so its frames
of /init and of the modules and tools are kept in --cache-dir, by the
hash of what they hold, and a build from the same binaries reuses them.
The member holding the seed and the image's release is never kept.

The image boots only through UEFI: register it as such (README "Cloud
images").

-o - writes the image to standard output (OCI as a tarball). -o DEVICE
flashes a raw disk onto a block device in place (as root), as dd would,
but safely: the device must not be mounted or otherwise in use, must be
as large as the image, and must look blank (zeros in its first MiB)
unless --force is given. The image is built first, written with every
byte, synced, and read back to compare. The node grows its partitions to
the whole device at first boot.

Inputs default to the cache hack/deps.sh fills ($ETCDBOX_CACHE/sysroot or
.cache/sysroot), else the host: the newest /boot/vmlinuz-* with its
/lib/modules, and systemd-boot from the systemd-boot-efi package. etcd and
init default to the files next to the etcdbox binary. SOURCE_DATE_EPOCH
sets every time stamp; equal inputs give byte-identical images.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.run(cmd) },
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.output, "output", "o", "", "image file, OCI layout directory / .tar, - for standard output, or a block device to flash")
	fl.BoolVar(&f.force, "force", false, "with -o DEVICE: overwrite a device that is not blank")
	fl.StringVar(&f.format, "format", string(image.FormatRaw), "output format: "+image.FormatNames())
	fl.StringVar(&f.kernel, "kernel", "", "kernel bzImage (default: newest cached or host /boot/vmlinuz-*)")
	fl.StringVar(&f.modules, "modules", "", "module directory /lib/modules/<release> (default: the kernel's)")
	fl.StringVar(&f.etcd, "etcd", "", "static etcd server binary, for another etcd version than the init's (default: the init's own etcd; /usr/bin/etcd links to /init)")
	fl.StringVar(&f.init, "init", "", "static etcdbox init binary (default: init next to etcdbox)")
	fl.StringVar(&f.bootloader, "bootloader", "", "systemd-boot EFI binary (default: cached or host systemd-bootx64.efi)")
	fl.StringVar(&f.cmdline, "cmdline", "", "extra kernel command-line arguments")
	fl.StringSliceVar(&f.drivers, "driver", nil, "a kernel module the initrd carries beyond the default set, with its dependencies: repeat it or separate names with commas (e.g. --driver igb,iTCO_wdt,lpc_ich for a server's NIC and watchdog; README \"Drivers\")")
	fl.StringVar(&f.size, "size", "1G", "disk size (bytes, or with K, M, G suffix; rounded up to whole MiB for vhd, GiB for gce)")
	fl.StringVar(&f.seed, "seed", "", "seed YAML to bake into the image")
	fl.StringVar(&f.push, "push", "", "push the OCI image to this reference")
	fl.StringVar(&f.sign, "sign", "", "sign the pushed image with this private key (PEM; see etcdbox sign)")
	fl.StringVar(&f.version, "image-version", "dev", "the image's version, recorded in /etc/etcdbox/release")
	fl.StringVar(&f.version, "version", "dev", "the image's version (deprecated: use --image-version)")
	_ = fl.MarkDeprecated("version", "use --image-version")
	fl.StringVar(&f.toolsRoot, "tools-root", "/", "root to take e2fsprogs and their libraries from")
	fl.StringVar(&f.compression, "compression", string(image.CompressionSmall),
		"initrd compression: small (zstd level 19 with the zstd program, else the built-in encoder's best) or fast (zstd's default, a fifth of a second, a fifth larger)")
	fl.StringVar(&f.zstd, "zstd", "", "zstd program for --compression small (default: zstd on PATH, when it works; none: the built-in encoder)")
	fl.StringVar(&f.cacheDir, "cache-dir", "", "where compressed initrd members are kept between builds (default: etcdbox/initrd in the user's cache directory, ~/.cache or $XDG_CACHE_HOME; none: nowhere)")
	return cmd
}

// run builds the image the flags describe, and pushes and signs it when
// asked.
func (f buildFlags) run(cmd *cobra.Command) error {
	cfg, err := f.config(cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	res, err := buildTo(cmd.Context(), cfg, f.force, cmd.OutOrStdout(), cmd.ErrOrStderr())
	if errors.Is(err, image.ErrSizeTooSmall) {
		return fmt.Errorf("--size %s: %w", f.size, err)
	}
	if err != nil {
		return err
	}
	// With -o -, standard output is the image: the report goes
	// to standard error.
	out := cmd.OutOrStdout()
	if cfg.Output == "-" {
		out = cmd.ErrOrStderr()
	}
	if cfg.Output != "" && cfg.Output != "-" {
		fmt.Fprintf(out, "wrote %s (%s)\n", cfg.Output, cfg.Format)
	}
	if res.Digest != "" {
		fmt.Fprintf(out, "digest %s\n", res.Digest)
	}
	if cfg.Push != "" {
		fmt.Fprintf(out, "pushed %s\n", cfg.Push)
	}
	if f.sign != "" {
		r, err := name.ParseReference(cfg.Push)
		if err != nil {
			return err
		}
		d, err := signImage(cmd.Context(), r.Context().Digest(res.Digest).String(), f.sign, false)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "signed %s (signature at %s)\n", d, imagesig.Tag(d))
	}
	fmt.Fprintf(out, "initrd %d bytes (%d uncompressed), %d modules%s, %s%s\n",
		res.Initrd.Size, res.Initrd.Uncompressed, len(res.Initrd.Modules), driversNote(f.drivers), res.Initrd.Compressor, cachedNote(res.Initrd.Cached))
	for _, w := range res.Initrd.Warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
	}
	return nil
}

// moduleNameRE is what a kernel module's name may hold.
var moduleNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// extraDrivers returns the image's driver set with the --driver names
// added, or nil (the default set) when there are none. A name that is not
// a module name is refused here; one the kernel's modules do not have is
// refused by the build, which knows the modules directory.
func extraDrivers(names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	out := slices.Clone(image.DefaultDrivers)
	for _, n := range names {
		if !moduleNameRE.MatchString(n) {
			return nil, fmt.Errorf("--driver %q: not a kernel module's name (letters, digits, _ and -, as modprobe takes it, without .ko)", n)
		}
		out = append(out, n)
	}
	return out, nil
}

// driversNote names the drivers --driver added, if any.
func driversNote(drivers []string) string {
	if len(drivers) == 0 {
		return ""
	}
	return " (the default set and " + strings.Join(drivers, ", ") + ")"
}

// cachedNote says how many of the initrd's members came from the cache.
func cachedNote(cached []bool) string {
	n := 0
	for _, c := range cached {
		if c {
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d of %d members from the cache)", n, len(cached))
}

// cacheDir is the cache directory --cache-dir names: "" the default,
// "none" none.
func cacheDir(flag string) string {
	switch flag {
	case "":
		return defaultCacheDir()
	case "none":
		return ""
	}
	return flag
}

// defaultCacheDir is --cache-dir's default: etcdbox's directory in the
// user's cache (XDG_CACHE_HOME or ~/.cache), empty when there is none.
func defaultCacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "etcdbox", "initrd")
}

// config turns the flags into an image.Config, filling in defaults; it
// writes warnings to warn.
func (f buildFlags) config(warn io.Writer) (image.Config, error) {
	if f.sign != "" && f.push == "" {
		return image.Config{}, usageError{errors.New("--sign signs the pushed image: it needs --push")}
	}
	if !slices.Contains(image.Formats, image.Format(f.format)) {
		return image.Config{}, usageError{fmt.Errorf("--format %q: unknown; want one of %s", f.format, image.FormatNames())}
	}
	switch image.Compression(f.compression) {
	case image.CompressionSmall, image.CompressionFast:
	default:
		return image.Config{}, usageError{fmt.Errorf("--compression %q: unknown; want %s or %s", f.compression, image.CompressionSmall, image.CompressionFast)}
	}
	size, err := parseSize(f.size)
	if err != nil {
		return image.Config{}, fmt.Errorf("--size %s: %w", f.size, err)
	}
	drivers, err := extraDrivers(f.drivers)
	if err != nil {
		return image.Config{}, usageError{err}
	}
	epoch, err := image.EpochFromEnv()
	if err != nil {
		return image.Config{}, err
	}
	// A seed is checked with the node's own parser before it is baked in:
	// a node that boots a bad seed stops and waits for an operator.
	oci := f.format == string(image.FormatOCI) || f.push != ""
	if f.seed != "" {
		data, err := os.ReadFile(f.seed)
		if err != nil {
			return image.Config{}, fmt.Errorf("--seed: %w", err)
		}
		if err := checkBakedSeed("--seed "+f.seed, data, oci, "anyone who can read this disk image", warn); err != nil {
			return image.Config{}, err
		}
	}
	// So is one on the kernel command line, which the image's boot entry
	// (raw) or its boot/cmdline (OCI) carries.
	if data, ok, err := seed.FromCmdline(f.cmdline); err != nil {
		return image.Config{}, fmt.Errorf("--cmdline: %w", err)
	} else if ok {
		// The kernel prints its command line on the console, and clouds
		// keep console output.
		if err := checkBakedSeed("--cmdline "+seed.CmdlineKey+"=", data, oci,
			"the kernel prints it on the console at every boot, and clouds keep console output, so anyone who can read that", warn); err != nil {
			return image.Config{}, err
		}
	}
	cfg := image.Config{
		Kernel: f.kernel, Modules: f.modules, Etcd: f.etcd, Init: f.init, Bootloader: f.bootloader,
		ToolsRoot: f.toolsRoot, Cmdline: f.cmdline, Seed: f.seed, Size: size,
		Format: image.Format(f.format), Output: f.output, Push: f.push,
		SourceDateEpoch: epoch, Version: f.version, Compression: image.Compression(f.compression),
		Zstd: f.zstd, CacheDir: cacheDir(f.cacheDir), Drivers: drivers,
	}
	if cfg.Output == "" && cfg.Push == "" {
		return cfg, errors.New("-o/--output: no output given")
	}
	return cfg, defaultInputs(&cfg)
}

// sysroots lists where default inputs are looked for, in order: the
// dependency cache ($ETCDBOX_CACHE, ./.cache, or the .cache of the
// checkout the etcdbox binary was built in), then the host.
func sysroots() []string {
	var roots []string
	if c := os.Getenv("ETCDBOX_CACHE"); c != "" {
		roots = append(roots, filepath.Join(c, "sysroot"))
	}
	roots = append(roots, filepath.Join(".cache", "sysroot"))
	if exe, err := os.Executable(); err == nil {
		roots = append(roots, filepath.Join(filepath.Dir(exe), "..", ".cache", "sysroot"))
	}
	return append(roots, "/")
}

// defaultInputs fills in the inputs the flags left empty.
func defaultInputs(cfg *image.Config) error {
	roots := sysroots()
	switch {
	case cfg.Kernel == "":
		for _, r := range roots {
			if k, m, err := image.FindKernel(r); err == nil {
				cfg.Kernel = k
				if cfg.Modules == "" {
					cfg.Modules = m
				}
				break
			}
		}
		if cfg.Kernel == "" {
			return fmt.Errorf("--kernel: no kernel found under %s; run hack/deps.sh or give --kernel", strings.Join(roots, ", "))
		}
	case cfg.Modules == "":
		// .../boot/vmlinuz-<release> -> .../lib/modules/<release>
		base := filepath.Base(cfg.Kernel)
		if !strings.HasPrefix(base, "vmlinuz-") {
			return fmt.Errorf("--modules: cannot derive it from --kernel %s; give --modules", cfg.Kernel)
		}
		root := filepath.Dir(filepath.Dir(cfg.Kernel))
		cfg.Modules = filepath.Join(root, "lib", "modules", strings.TrimPrefix(base, "vmlinuz-"))
	}
	if cfg.Bootloader == "" && cfg.Format != image.FormatOCI {
		for _, r := range roots {
			if p := image.BootloaderPath(r); fileExists(p) {
				cfg.Bootloader = p
				break
			}
		}
		if cfg.Bootloader == "" {
			return errors.New("--bootloader: systemd-bootx64.efi not found; install systemd-boot-efi, run hack/deps.sh, or give --bootloader")
		}
	}
	if cfg.Init == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("--init: locate etcdbox binary: %w", err)
		}
		cfg.Init = filepath.Join(filepath.Dir(exe), "init")
		if !fileExists(cfg.Init) {
			return fmt.Errorf("--init: %s does not exist; run make build or give --init", cfg.Init)
		}
	}
	return nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// parseSize parses "1073741824", "512M", "1G" or "1GiB" (binary units).
func parseSize(s string) (int64, error) {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(strings.TrimSpace(s)), "B"), "I")
	shift := 0
	if t != "" {
		switch t[len(t)-1] {
		case 'K':
			shift = 10
		case 'M':
			shift = 20
		case 'G':
			shift = 30
		case 'T':
			shift = 40
		}
	}
	if shift > 0 {
		t = t[:len(t)-1]
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)>>shift {
		return 0, fmt.Errorf("want a positive size such as 1G or 600M, got %q", s)
	}
	return n << shift, nil
}

// checkBakedSeed parses a seed that goes into an image (what names where
// it came from, readers who can read it there) and refuses or warns when
// it holds a CA key: the node CA's signs the leaves of every node, the
// root's (older seeds) every certificate of the cluster. An OCI image is
// made to be pushed and pulled, so it never carries one; a disk image
// for one machine may, with a warning.
func checkBakedSeed(what string, data []byte, oci bool, readers string, warn io.Writer) error {
	seed, err := seed.Parse(data)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	key, desc := "", ""
	switch {
	case seed.PKI.NodeCAKey != "":
		key, desc = "pki.nodeCAKey", "the cluster's node CA key"
	case seed.PKI.CAKey != "":
		key, desc = "pki.caKey", "the cluster's CA key"
	default:
		return nil
	}
	if oci {
		return fmt.Errorf("%s holds %s, %s: an OCI image goes to registries, so it must not carry it; give nodes the seed through a cidata volume or cloud metadata, or bake it into a raw disk image for one machine", what, key, desc)
	}
	fmt.Fprintf(warn, "warning: %s holds %s: %s can issue certificates of the cluster; prefer a cidata volume or cloud metadata\n", what, key, readers)
	return nil
}

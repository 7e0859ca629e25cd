package image

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"
)

// diskTools are the programs init runs on its disk, with the package
// that has them: e2fsprogs to create, check and grow the DATA filesystem,
// dosfstools' fsck.fat to repair the ESP after a power cut. They come from
// cfg.ToolsRoot with their shared libraries.
var diskTools = []struct{ name, pkg string }{
	{"mke2fs", "e2fsprogs"}, {"e2fsck", "e2fsprogs"}, {"resize2fs", "e2fsprogs"},
	{"fsck.fat", "dosfstools"},
}

// rootTree assembles the root filesystem of a node, laid out as in the
// "Initramfs layout" contract. It is the initramfs and also the root of
// the OCI image. It returns the tree and the module files it carries.
func rootTree(cfg Config) (*tree, []string, error) {
	t := newTree()
	for _, d := range []string{"dev", "proc", "sys", "run", "etc", "var/lib/etcdbox", "boot/efi", "usr/bin", "usr/sbin"} {
		if err := t.dir(d, 0o755); err != nil {
			return nil, nil, err
		}
	}
	if err := t.dir("tmp", fs.ModeSticky|0o777); err != nil {
		return nil, nil, err
	}
	// The kernel opens /dev/console for PID 1 before init can mount
	// devtmpfs, so these two nodes must exist in the archive itself.
	if err := t.charDev("dev/console", 5, 1, 0o600); err != nil {
		return nil, nil, err
	}
	if err := t.charDev("dev/null", 1, 3, 0o666); err != nil {
		return nil, nil, err
	}
	// e2fsprogs refuse to resize a filesystem when they cannot tell
	// whether it is mounted; init mounts /proc, this makes it their mtab.
	if err := t.symlink("etc/mtab", "../proc/self/mounts"); err != nil {
		return nil, nil, err
	}
	bins := []struct{ what, src, dst string }{{"init", cfg.Init, "init"}}
	if cfg.Etcd != "" {
		bins = append(bins, struct{ what, src, dst string }{"etcd", cfg.Etcd, "usr/bin/etcd"})
	}
	for _, b := range bins {
		if err := checkStatic(b.src); err != nil {
			return nil, nil, fmt.Errorf("%s %s: %w", b.what, b.src, err)
		}
		if err := t.file(b.dst, b.src, 0o755); err != nil {
			return nil, nil, fmt.Errorf("%s %s: %w", b.what, b.src, err)
		}
	}
	if cfg.Etcd == "" {
		if err := checkCarriesEtcd(cfg.Init); err != nil {
			return nil, nil, err
		}
		if err := t.symlink("usr/bin/etcd", etcdLink); err != nil {
			return nil, nil, err
		}
	}
	if err := addE2fsprogs(t, cfg.ToolsRoot); err != nil {
		return nil, nil, err
	}
	mods, err := addModules(t, cfg.Modules, cfg.Drivers)
	if err != nil {
		return nil, nil, err
	}
	if cfg.Seed != "" {
		if err := t.file(seedFile, cfg.Seed, 0o600); err != nil {
			return nil, nil, fmt.Errorf("seed %s: %w", cfg.Seed, err)
		}
	}
	release := fmt.Sprintf("version=%s\netcd=%s\nkernel=%s\nbuilt=%d\n",
		cfg.Version, etcdVersion(cfg.etcdBinary()), filepath.Base(cfg.Modules), cfg.SourceDateEpoch)
	if err := t.bytes(releaseFile, []byte(release), 0o644); err != nil {
		return nil, nil, err
	}
	return t, mods, nil
}

// etcdLink is /usr/bin/etcd in an image whose init carries etcd: a
// relative symlink, so that it holds in the container form's root too.
// The init runs it as etcd by the name it is started under
// (init/runetcd.go).
const etcdLink = "../../init"

// The image's own files in its root (ownFiles).
const (
	releaseFile = "etc/etcdbox/release"
	seedFile    = "etc/etcdbox/seed.yaml"
)

// carriesEtcdMark is the mark an init that is also etcd has in its
// read-only data (init/runetcd.go, carriesEtcd). Change both together.
const carriesEtcdMark = "etcdbox/init carries etcd"

// checkCarriesEtcd accepts an init binary that is also etcd: one built
// from this project's init since it links etcd's entry point. Any other
// (an older init, another program) would be started as etcd and fail at
// every boot, so the build stops and says to give an etcd binary.
func checkCarriesEtcd(file string) error {
	f, err := elf.Open(file)
	if err != nil {
		return fmt.Errorf("init %s: %w", file, err)
	}
	defer f.Close()
	if sec := f.Section(".rodata"); sec != nil {
		data, err := sec.Data()
		if err != nil {
			return fmt.Errorf("init %s: read .rodata: %w", file, err)
		}
		if bytes.Contains(data, []byte(carriesEtcdMark)) {
			return nil
		}
	}
	return fmt.Errorf("etcd: no etcd binary given, and init %s does not carry etcd (not built from this etcdbox's init); give an etcd binary", file)
}

// checkStatic accepts an amd64 ELF executable without an interpreter:
// init and etcd run before anything could provide their libraries.
func checkStatic(file string) error {
	interp, _, _, err := elfDeps(file)
	if err != nil {
		return err
	}
	if interp != "" {
		return fmt.Errorf("dynamically linked (interpreter %s); build it with CGO_ENABLED=0", interp)
	}
	return nil
}

// addE2fsprogs adds the diskTools at /usr/sbin, the libraries and loader
// they need, and /etc/mke2fs.conf.
func addE2fsprogs(t *tree, root string) error {
	if root == "" {
		root = "/"
	}
	var bins []string
	for _, tool := range diskTools {
		name := tool.name
		found := ""
		for _, dir := range []string{"/usr/sbin", "/sbin"} {
			if h, err := resolveIn(root, path.Join(dir, name)); err == nil {
				found = path.Join(dir, name)
				if err := t.file("usr/sbin/"+name, h, 0o755); err != nil {
					return fmt.Errorf("e2fsprogs: %w", err)
				}
				break
			}
		}
		if found == "" {
			return fmt.Errorf("e2fsprogs: %s not found in /usr/sbin or /sbin under %s (install %s)", name, root, tool.pkg)
		}
		bins = append(bins, found)
	}
	libs, err := sharedLibs(root, bins)
	if err != nil {
		return fmt.Errorf("e2fsprogs: %w", err)
	}
	if err := addLibs(t, libs); err != nil {
		return fmt.Errorf("e2fsprogs: %w", err)
	}
	conf, err := resolveIn(root, "/etc/mke2fs.conf")
	if err == nil {
		err = t.file("etc/mke2fs.conf", conf, 0o644)
	}
	if err != nil {
		return fmt.Errorf("e2fsprogs: /etc/mke2fs.conf under %s: %w", root, err)
	}
	return nil
}

// addLibs adds the shared libraries (destination in the image -> file on
// the host). Two destinations that are one host file (the dynamic loader is
// both /lib64/ld-linux-x86-64.so.2, the path the programs name, and the
// file in /lib/x86_64-linux-gnu that libc's own dependencies name) are
// stored once: the first in path order is the file, the others relative
// symlinks to it, as on the host. A copy would cost 215 KB of every node's
// RAM.
func addLibs(t *tree, libs map[string]string) error {
	stored := map[string]string{} // host file -> its destination
	for _, dest := range slices.Sorted(maps.Keys(libs)) {
		host := libs[dest]
		if first, ok := stored[host]; ok {
			rel, err := filepath.Rel(path.Dir(path.Join("/", dest)), path.Join("/", first))
			if err != nil {
				return err
			}
			if err := t.symlink(dest, filepath.ToSlash(rel)); err != nil {
				return err
			}
			continue
		}
		stored[host] = dest
		if err := t.file(dest, host, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// addModules adds the module files of the driver set to
// /lib/modules/<release>/ with the metadata files filtered to match.
func addModules(t *tree, dir string, drivers []string) ([]string, error) {
	ix, err := loadModules(dir)
	if err != nil {
		return nil, fmt.Errorf("modules %s: %w", dir, err)
	}
	mods, err := ix.resolve(drivers)
	if err != nil {
		return nil, err
	}
	base := path.Join("lib/modules", filepath.Base(dir))
	for _, m := range mods {
		if err := t.file(path.Join(base, m), filepath.Join(dir, m), 0o644); err != nil {
			return nil, fmt.Errorf("modules %s: %w", dir, err)
		}
	}
	for name, data := range ix.metadata(mods) {
		if err := t.bytes(path.Join(base, name), data, 0o644); err != nil {
			return nil, err
		}
	}
	return mods, nil
}

// etcdVersion reads the version of the etcd server module from the Go
// build information of the binary, "unknown" when it has none.
func etcdVersion(file string) string {
	const mod = "go.etcd.io/etcd/server/v3"
	bi, err := buildinfo.ReadFile(file)
	if err != nil {
		return "unknown"
	}
	if bi.Main.Path == mod && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == mod {
			return d.Version
		}
	}
	return "unknown"
}

// InitrdInfo describes an initramfs Build wrote.
type InitrdInfo struct {
	// Size is the length of the compressed initrd.
	Size int64
	// Uncompressed is the length of the cpio archives inside it.
	Uncompressed int64
	// Members are the compressed lengths of its members, in order: each
	// is a zstd frame holding one whole newc archive (cpioParts).
	Members []int64
	// Modules lists the kernel module files it carries, relative to the
	// modules directory.
	Modules []string
	// Compressor names what compressed it, and with CompressionSmall
	// without a zstd program, why the built-in encoder did.
	Compressor string
	// Cached says, for each member, whether its frame came from
	// Config.CacheDir.
	Cached []bool
	// Warnings are what went wrong without failing the build: a cache
	// that could not be written.
	Warnings []string
}

// WriteInitrd writes the zstd-compressed newc initramfs of cfg to w, as
// cfg.Compression says (see Compression). The kernel's CONFIG_RD_ZSTD
// unpacks it.
func WriteInitrd(ctx context.Context, cfg Config, w io.Writer) (InitrdInfo, error) {
	cfg, err := cfg.check(false)
	if err != nil {
		return InitrdInfo{}, err
	}
	t, mods, err := rootTree(cfg)
	if err != nil {
		return InitrdInfo{}, err
	}
	return writeInitrd(ctx, w, t, mods, cfg)
}

func writeInitrd(ctx context.Context, w io.Writer, t *tree, mods []string, cfg Config) (InitrdInfo, error) {
	comp, err := newInitrdCompressor(ctx, cfg)
	if err != nil {
		return InitrdInfo{}, err
	}
	parts := cpioParts(t)
	type member struct {
		z      bytes.Buffer
		size   int64 // of the archive inside
		cached bool
		warn   error
		err    error
	}
	members := make([]member, len(parts))
	var wg sync.WaitGroup
	ino := uint32(0)
	for i, p := range parts {
		first := ino + 1
		ino += uint32(len(p.nodes))
		m := &members[i]
		wg.Go(func() {
			m.size, m.cached, m.warn, m.err = comp.member(ctx, &m.z, p, first, cfg.SourceDateEpoch)
		})
	}
	wg.Wait()
	info := InitrdInfo{Modules: mods, Compressor: comp.name(slices.ContainsFunc(parts, func(p cpioPart) bool { return p.wide }))}
	for _, m := range members {
		if m.err != nil {
			return InitrdInfo{}, fmt.Errorf("write initrd: %w", m.err)
		}
		if _, err := w.Write(m.z.Bytes()); err != nil {
			return InitrdInfo{}, fmt.Errorf("write initrd: %w", err)
		}
		info.Members = append(info.Members, int64(m.z.Len()))
		info.Cached = append(info.Cached, m.cached)
		if m.warn != nil {
			info.Warnings = append(info.Warnings, m.warn.Error())
		}
		info.Size += int64(m.z.Len())
		info.Uncompressed += m.size
	}
	return info, nil
}

// goBinaries are the initramfs's Go programs: /init and, in an image given
// a separate etcd, etcd. They share most of their code (the standard
// library, gRPC, protobuf, etcd's API and client), so they go in one
// compressed member, side by side, where one compression window holds
// both: 14.5 MiB against 17.1 MiB with modules and libraries between them.
var goBinaries = []string{"init", "usr/bin/etcd"}

// ownFiles are the files of the image itself rather than of its parts:
// its release, which names its version and time, and the seed baked into
// it, which may hold secrets. They go in a member of their own, last,
// which is never cached (memberCache).
var ownFiles = []string{releaseFile, seedFile}

// A cpioPart is the entries of one initrd member, in path order.
type cpioPart struct {
	nodes []*node
	// keep says whether its frame may be cached: it holds nothing of
	// the image's own (ownFiles).
	keep bool
	// wide says its files share code further apart than level 19's
	// window: /init and a separate etcd (zstdArgs).
	wide bool
}

// cpioParts splits t's entries, in path order, into the initrd's members:
// everything else, then the Go binaries, then ownFiles. Each is a whole
// newc archive, compressed on its own and at the same time as the others:
// /init is two thirds of the bytes, so on two cores the build takes about
// as long as /init alone takes to compress (2.0-2.2 s against 2.6-2.7 s
// for one stream of the same parts, and 343 bytes more, measured on the
// host). The kernel unpacks the members in turn (init/initramfs.c: each
// compressed member must end on an archive's trailer, and the next
// starts after it), as it does an early microcode archive before the
// main one. The first member holds every directory, so each entry of
// the others has its directory already. The first two depend only on
// the binaries, modules and tools, so their frames can be cached from
// one build to the next; the image's own files would change them with
// every version or seed.
func cpioParts(t *tree) []cpioPart {
	var rest, bins, own []*node
	for _, n := range t.sorted() {
		switch {
		case slices.Contains(goBinaries, n.path) && n.mode.IsRegular():
			bins = append(bins, n)
		case slices.Contains(ownFiles, n.path) && n.mode.IsRegular():
			own = append(own, n)
		default:
			rest = append(rest, n)
		}
	}
	parts := []cpioPart{{nodes: rest, keep: true}}
	if len(bins) > 0 {
		parts = append(parts, cpioPart{nodes: bins, keep: true, wide: len(bins) > 1})
	}
	if len(own) > 0 {
		parts = append(parts, cpioPart{nodes: own})
	}
	return parts
}

// fileBytes reads a whole input file, naming it in the error.
func fileBytes(what, file string) ([]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, file, err)
	}
	return b, nil
}

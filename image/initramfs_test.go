package image

import (
	"bufio"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/version"
)

var unpacked struct {
	once sync.Once
	dir  string
	info InitrdInfo
	err  error
}

// unpackedInitrd writes the initrd of testConfig and unpacks it with the
// host's zstd and cpio, as the kernel would.
func unpackedInitrd(t *testing.T) (string, InitrdInfo) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds an initramfs; runs without -short")
	}
	cfg := testConfig(t)
	unpacked.once.Do(func() {
		gz := filepath.Join(scratch, "initrd")
		f, err := os.Create(gz)
		if err != nil {
			unpacked.err = err
			return
		}
		unpacked.info, unpacked.err = WriteInitrd(context.Background(), cfg, f)
		f.Close()
		if unpacked.err != nil {
			return
		}
		unpacked.dir = filepath.Join(scratch, "initrd.d")
		if unpacked.err = os.Mkdir(unpacked.dir, 0o755); unpacked.err != nil {
			return
		}
		// cpio stops at an archive's trailer: one cpio per member, as
		// the kernel unpacks one member after the other.
		var off int64
		for _, n := range unpacked.info.Members {
			cmd := exec.Command("sh", "-c", "tail -c +$(($2 + 1)) \"$1\" | head -c $3 | zstd -dcq | cpio -idm --quiet --no-absolute-filenames",
				"sh", gz, strconv.FormatInt(off, 10), strconv.FormatInt(n, 10))
			cmd.Dir = unpacked.dir
			if out, err := cmd.CombinedOutput(); err != nil {
				unpacked.err = &exec.ExitError{ProcessState: cmd.ProcessState, Stderr: out}
				return
			}
			off += n
		}
	})
	require.NoError(t, unpacked.err, "write and unpack the initrd")
	return unpacked.dir, unpacked.info
}

// initrdBytes returns the initrd WriteInitrd made of testConfig.
func initrdBytes(t *testing.T) []byte {
	t.Helper()
	unpackedInitrd(t)
	b, err := os.ReadFile(filepath.Join(scratch, "initrd"))
	require.NoError(t, err)
	return b
}

func TestInitramfsLayout(t *testing.T) {
	root, info := unpackedInitrd(t)
	cfg := testConfig(t)
	for _, d := range []string{"dev", "proc", "sys", "run", "tmp", "etc", "var/lib/etcdbox", "boot/efi"} {
		fi, err := os.Stat(filepath.Join(root, d))
		if assert.NoError(t, err, "/%s", d) {
			assert.True(t, fi.IsDir(), "/%s is a directory", d)
		}
	}
	fi, err := os.Stat(filepath.Join(root, "tmp"))
	require.NoError(t, err)
	assert.Equal(t, fs.ModeDir|fs.ModeSticky|0o777, fi.Mode(), "/tmp mode")

	for _, dev := range []struct {
		path         string
		major, minor uint64
	}{{"dev/console", 5, 1}, {"dev/null", 1, 3}} {
		fi, err := os.Lstat(filepath.Join(root, dev.path))
		if assert.NoError(t, err) {
			assert.NotZero(t, fi.Mode()&fs.ModeCharDevice, "/%s is a character device", dev.path)
			rdev := fi.Sys().(*syscall.Stat_t).Rdev
			assert.Equal(t, [2]uint64{dev.major, dev.minor}, [2]uint64{uint64(rdev) >> 8, uint64(rdev) & 0xff}, "/%s numbers", dev.path)
		}
	}

	for _, f := range []struct{ inRoot, src string }{
		{"init", cfg.Init}, {"etc/mke2fs.conf", "/etc/mke2fs.conf"},
	} {
		assert.Equal(t, contentDigest(t, f.src), contentDigest(t, filepath.Join(root, f.inRoot)), "/%s differs from %s", f.inRoot, f.src)
	}
	fi, err = os.Stat(filepath.Join(root, "init"))
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o755), fi.Mode(), "/init mode")
	// No etcd given: /usr/bin/etcd is the init, which runs etcd under
	// that name (TestInitramfsEtcdIsTheInit runs it).
	target, err := os.Readlink(filepath.Join(root, "usr/bin/etcd"))
	require.NoError(t, err, "/usr/bin/etcd is a symlink")
	assert.Equal(t, "../../init", target)

	release, err := os.ReadFile(filepath.Join(root, "etc/etcdbox/release"))
	require.NoError(t, err)
	assert.Equal(t, "version=test\netcd=v"+version.Version+"\nkernel="+filepath.Base(cfg.Modules)+"\nbuilt=1700000000\n", string(release))
	_, err = os.Stat(filepath.Join(root, "etc/etcdbox/seed.yaml"))
	assert.True(t, os.IsNotExist(err), "no seed.yaml without a seed")

	// The loader is where PT_INTERP says, and stored once: libc names it
	// in /lib/x86_64-linux-gnu too, and one path links to the other.
	fi, err = os.Stat(filepath.Join(root, "lib64/ld-linux-x86-64.so.2"))
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular(), "/lib64/ld-linux-x86-64.so.2 resolves to a regular file in the root")
	if other, err := os.Stat(filepath.Join(root, "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")); err == nil {
		assert.True(t, os.SameFile(fi, other), "the loader is stored twice")
	}
	assert.NotEmpty(t, info.Modules)
	assert.Greater(t, info.Uncompressed, info.Size, "the initrd is compressed")
}

// chroot runs a program inside the unpacked initramfs.
func chroot(t *testing.T, root string, args ...string) string {
	t.Helper()
	out, err := exec.Command("chroot", append([]string{root}, args...)...).CombinedOutput()
	require.NoError(t, err, "chroot %s: %s", strings.Join(args, " "), out)
	return string(out)
}

// TestInitramfsEtcdIsTheInit runs /usr/bin/etcd inside the initramfs: the
// link to /init starts etcd, the version go.mod pins, and the release
// file names that version.
func TestInitramfsEtcdIsTheInit(t *testing.T) {
	root, _ := unpackedInitrd(t)
	out := chroot(t, root, "/usr/bin/etcd", "--version")
	assert.Contains(t, out, "etcd Version: "+version.Version+"\n")
	release, err := os.ReadFile(filepath.Join(root, "etc/etcdbox/release"))
	require.NoError(t, err)
	assert.Contains(t, string(release), "\netcd=v"+version.Version+"\n")
}

// TestRootTreeSeparateEtcd builds the tree with an etcd binary of another
// version: it is /usr/bin/etcd, a regular file, and the release names its
// version, not the init's.
func TestRootTreeSeparateEtcd(t *testing.T) {
	prev, bin := testenv.PreviousEtcd(t)
	cfg := testConfig(t)
	cfg.Etcd = bin
	tr, _, err := rootTree(cfg)
	require.NoError(t, err)
	n := tr.nodes["usr/bin/etcd"]
	require.NotNil(t, n, "/usr/bin/etcd")
	assert.True(t, n.mode.IsRegular(), "/usr/bin/etcd is a regular file, mode %v", n.mode)
	assert.Equal(t, bin, n.src)
	rel := tr.nodes["etc/etcdbox/release"]
	require.NotNil(t, rel)
	assert.Contains(t, string(rel.data), "\netcd=v"+strings.TrimPrefix(prev, "v")+"\n")
}

// TestInitramfsE2fsprogs runs what init runs on DATA, inside the
// initramfs: only its own libraries are there.
func TestInitramfsE2fsprogs(t *testing.T) {
	root, _ := unpackedInitrd(t)
	// Stand in for the mounted /proc that /etc/mtab points at.
	require.NoError(t, os.MkdirAll(filepath.Join(root, "proc/self"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "proc/self/mounts"), nil, 0o644))
	t.Cleanup(func() {
		os.RemoveAll(filepath.Join(root, "proc/self"))
		os.Remove(filepath.Join(root, "scratch.img"))
	})

	chroot(t, root, "/usr/sbin/mke2fs", "-q", "-F", "-t", "ext4", "/scratch.img", "64M")
	chroot(t, root, "/usr/sbin/e2fsck", "-fn", "/scratch.img")
	require.NoError(t, os.Truncate(filepath.Join(root, "scratch.img"), 128<<20))
	chroot(t, root, "/usr/sbin/e2fsck", "-fp", "/scratch.img")
	chroot(t, root, "/usr/sbin/resize2fs", "/scratch.img", "128M")
	chroot(t, root, "/usr/sbin/e2fsck", "-fn", "/scratch.img")

	// The host's dumpe2fs confirms the new size.
	out, err := exec.Command("dumpe2fs", "-h", filepath.Join(root, "scratch.img")).Output()
	require.NoError(t, err)
	var blocks, size string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		switch k {
		case "Block count":
			blocks = strings.TrimSpace(v)
		case "Block size":
			size = strings.TrimSpace(v)
		}
	}
	assert.Contains(t, []string{"131072/1024", "32768/4096"}, blocks+"/"+size, "block count/size after resize2fs")
}

// TestInitramfsModules checks the modules in the initramfs against their
// modules.dep, and that modules.dep against what the host's depmod
// computes from the module files themselves.
func TestInitramfsModules(t *testing.T) {
	root, info := unpackedInitrd(t)
	cfg := testConfig(t)
	kver := filepath.Base(cfg.Modules)
	mdir := filepath.Join(root, "lib/modules", kver)

	deps := map[string][]string{}
	b, err := os.ReadFile(filepath.Join(mdir, "modules.dep"))
	require.NoError(t, err)
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		mod, rest, ok := strings.Cut(l, ":")
		require.True(t, ok, "modules.dep line %q", l)
		deps[mod] = strings.Fields(rest)
	}
	var files []string
	require.NoError(t, filepath.WalkDir(filepath.Join(mdir, "kernel"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(mdir, p)
			files = append(files, rel)
		}
		return err
	}))
	assert.ElementsMatch(t, info.Modules, files, "module files")
	assert.ElementsMatch(t, files, keys2(deps), "modules.dep lists exactly the module files")
	for mod, ds := range deps {
		for _, d := range ds {
			_, err := os.Stat(filepath.Join(mdir, d))
			assert.NoError(t, err, "%s needs %s", mod, d)
		}
	}

	builtin, err := os.ReadFile(filepath.Join(mdir, "modules.builtin"))
	require.NoError(t, err)
	for _, drv := range DefaultDrivers {
		found := strings.Contains(string(builtin), "/"+drv+".ko")
		for _, f := range files {
			found = found || moduleName(f) == drv
		}
		assert.True(t, found, "driver %s is in the initramfs", drv)
	}
	alias, err := os.ReadFile(filepath.Join(mdir, "modules.alias"))
	require.NoError(t, err)
	assert.Contains(t, string(alias), " virtio_blk\n")
	for _, l := range strings.Split(strings.TrimSpace(string(alias)), "\n") {
		f := strings.Fields(l)
		name := f[len(f)-1]
		ok := false
		for _, m := range files {
			ok = ok || moduleName(m) == name
		}
		assert.True(t, ok, "modules.alias names %s, which is not there", name)
	}

	// depmod -n prints the modules.dep it computes from the symbols of
	// the module files; dependencies missing from the tree would be
	// missing from its lines too.
	out, err := exec.Command("depmod", "-b", root, "-n", kver).Output()
	require.NoError(t, err, "depmod")
	computed := map[string][]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if mod, rest, ok := strings.Cut(l, ":"); ok && strings.HasPrefix(mod, "kernel/") {
			computed[mod] = strings.Fields(rest)
		}
	}
	require.Len(t, computed, len(deps), "depmod lines")
	for mod, ds := range deps {
		assert.ElementsMatch(t, computed[mod], ds, "depmod's dependencies of %s", mod)
	}
}

func keys2(m map[string][]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestInitramfsSeed(t *testing.T) {
	cfg := testConfig(t)
	cfg.Seed = filepath.Join(t.TempDir(), "seed.yaml")
	require.NoError(t, os.WriteFile(cfg.Seed, []byte("cluster: demo\n"), 0o644))
	tr, _, err := rootTree(cfg)
	require.NoError(t, err)
	n := tr.nodes["etc/etcdbox/seed.yaml"]
	require.NotNil(t, n, "seed.yaml in the tree")
	assert.Equal(t, cfg.Seed, n.src)
	assert.Equal(t, fs.FileMode(0o600), n.mode, "the seed may hold keys")
}

// TestInitramfsFsckFat runs what init runs on the ESP before mounting it,
// inside the initramfs: fsck.fat repairs a FAT32 left dirty (as by a power
// cut) and then finds it clean.
func TestInitramfsFsckFat(t *testing.T) {
	root, _ := unpackedInitrd(t)
	img := filepath.Join(root, "scratch-esp.img")
	t.Cleanup(func() { os.Remove(img) })
	out, err := exec.Command("mkfs.fat", "-F", "32", "-C", img, "65536").CombinedOutput()
	require.NoError(t, err, "mkfs.fat: %s", out)
	chroot(t, root, "/usr/sbin/fsck.fat", "-n", "/scratch-esp.img")

	markDirty(t, img)
	out, err = exec.Command("chroot", root, "/usr/sbin/fsck.fat", "-a", "-w", "/scratch-esp.img").CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "fsck.fat -a on a dirty volume: %s", out)
	assert.Equal(t, 1, ee.ExitCode(), "errors found and repaired: %s", out)
	assert.Contains(t, string(out), "Dirty bit")
	chroot(t, root, "/usr/sbin/fsck.fat", "-n", "/scratch-esp.img")
}

// markDirty sets the dirty bit of a FAT32 boot sector, as Linux does while
// a volume is mounted.
func markDirty(t *testing.T, img string) {
	t.Helper()
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, 0x41)
	require.NoError(t, err)
	b[0] |= 1
	_, err = f.WriteAt(b, 0x41)
	require.NoError(t, err)
}

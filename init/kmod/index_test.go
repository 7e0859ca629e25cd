package kmod

import (
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// driverSet is the image's default driver set (CONTRACTS.md).
var driverSet = strings.Fields(`virtio_pci virtio_blk virtio_net virtio_scsi
	virtio_console nvme ahci sd_mod ena gve hv_vmbus hv_storvsc hv_netvsc
	vmxnet3 vmw_pvscsi e1000 e1000e ext4 vfat nls_cp437 nls_iso8859_1
	nls_ascii i6300esb button evdev efivarfs crc32c_generic`)

var (
	realOnce sync.Once
	realIx   *Index
	realErr  error
)

// realIndex parses the cached Debian kernel's modules directory once.
func realIndex(t *testing.T) (*Index, string) {
	t.Helper()
	_, dir := testenv.Kernel(t)
	realOnce.Do(func() { realIx, realErr = ReadIndex(dir) })
	require.NoError(t, realErr)
	return realIx, dir
}

func TestOrderReal(t *testing.T) {
	ix, _ := realIndex(t)
	for _, tt := range []struct {
		name string
		mod  string
		want []string
	}{
		// modules.dep: "ext4.ko: crc16.ko mbcache.ko jbd2.ko", loaded last
		// first, after the crypto-crc32c soft dependency of jbd2 and ext4.
		{"ext4", "ext4", []string{"crc32c_intel", "crc32c_generic", "jbd2", "mbcache", "crc16", "ext4"}},
		{"virtio_blk", "virtio_blk", []string{"virtio_ring", "virtio", "virtio_blk"}},
		{"virtio-blk spelled with a dash", "virtio-blk", []string{"virtio_ring", "virtio", "virtio_blk"}},
		{"virtio_pci", "virtio_pci", []string{"virtio_ring", "virtio", "virtio_pci_modern_dev", "virtio_pci_legacy_dev", "virtio_pci"}},
		{"virtio_net", "virtio_net", []string{"virtio_ring", "virtio", "failover", "net_failover", "virtio_net"}},
		{"no deps", "crc16", []string{"crc16"}},
		{"builtin", "amd-uncore", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ix.Order(tt.mod)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got, "Order(%q)", tt.mod)
		})
	}

	t.Run("ext4 deps before ext4", func(t *testing.T) {
		got, err := ix.Order("ext4")
		require.NoError(t, err)
		e := slices.Index(got, "ext4")
		for _, d := range []string{"crc16", "mbcache", "jbd2"} {
			assert.Less(t, slices.Index(got, d), e, "%s loads before ext4 in %v", d, got)
			assert.GreaterOrEqual(t, slices.Index(got, d), 0)
		}
	})

	t.Run("missing module", func(t *testing.T) {
		_, err := ix.Order("no_such_module")
		assert.ErrorContains(t, err, "no_such_module")
	})
}

// TestOrderEveryModule checks the order rule on the whole real
// modules.dep: every hard dependency of every module comes before it.
func TestOrderEveryModule(t *testing.T) {
	ix, _ := realIndex(t)
	require.Greater(t, len(ix.modules), 1000)
	for name, m := range ix.modules {
		got, err := ix.Order(name)
		require.NoError(t, err, name)
		pos := map[string]int{}
		for i, n := range got {
			_, dup := pos[n]
			require.False(t, dup, "Order(%s) repeats %s: %v", name, n, got)
			pos[n] = i
		}
		if len(ix.softdeps[name].post) == 0 {
			require.Equal(t, name, got[len(got)-1], "Order(%s) ends with it: %v", name, got)
		}
		for _, d := range m.deps {
			for _, dd := range ix.modules[d].deps {
				require.Less(t, pos[dd], pos[d], "Order(%s): %s must precede %s: %v", name, dd, d, got)
			}
			require.Less(t, pos[d], pos[name], "Order(%s): %s must precede it: %v", name, d, got)
		}
	}
}

// TestOrderMatchesModprobe compares Order with kmod's own
// `modprobe --show-depends` for the image's driver set.
func TestOrderMatchesModprobe(t *testing.T) {
	ix, dir := realIndex(t)
	modprobe := testenv.File(t, "/usr/sbin/modprobe", "install kmod")
	root := filepath.Dir(filepath.Dir(filepath.Dir(dir)))
	kver := filepath.Base(dir)
	noConfig := t.TempDir() // keep the host's /etc/modprobe.d out of it
	for _, mod := range driverSet {
		t.Run(mod, func(t *testing.T) {
			out, err := exec.Command(modprobe, "-C", noConfig, "-d", root, "-S", kver, "--show-depends", mod).CombinedOutput()
			require.NoError(t, err, "%s", out)
			// modprobe prints a module again when a later soft dependency
			// needs it; only its first appearance inserts anything.
			var want []string
			for _, line := range strings.Split(string(out), "\n") {
				if f := strings.Fields(line); len(f) >= 2 && f[0] == "insmod" && !slices.Contains(want, NameOf(f[1])) {
					want = append(want, NameOf(f[1]))
				}
			}
			got, err := ix.Order(mod)
			require.NoError(t, err)
			assert.Equal(t, want, got, "Order(%q)", mod)
		})
	}
}

func TestMatchReal(t *testing.T) {
	ix, dir := realIndex(t)
	modprobe := testenv.File(t, "/usr/sbin/modprobe", "install kmod")
	root := filepath.Dir(filepath.Dir(filepath.Dir(dir)))
	noConfig := t.TempDir()
	for _, tt := range []struct {
		name, modalias string
		want           []string
	}{
		// virtio-pci binds every PCI device of vendor 1af4 ...
		{"virtio pci block device", "pci:v00001AF4d00001001sv00001AF4sd00000002bc01sc00i00", []string{"virtio_pci"}},
		// ... and creates virtio devices that virtio_blk and friends bind.
		{"virtio block", "virtio:d00000002v00001AF4", []string{"virtio_blk"}},
		{"virtio net", "virtio:d00000001v00001AF4", []string{"virtio_net"}},
		{"virtio scsi", "virtio:d00000008v00001AF4", []string{"virtio_scsi"}},
		{"scsi disk, dash normalised", "scsi:t-0x00", []string{"sd_mod"}},
		{"nvme by class", "pci:v00008086d00005845sv00001AF4sd00001100bc01sc08i02", []string{"nvme"}},
		{"ahci by class", "pci:v00008086d00002922sv00001AF4sd00001100bc01sc06i01", []string{"ahci"}},
		{"i6300esb watchdog", "pci:v00008086d000025ABsv00001AF4sd00001100bc08sc80i00", []string{"i6300esb"}},
		{"acpi power button", "acpi:PNP0C0C:", []string{"button"}},
		{"alias name", "crypto-crc32c", []string{"crc32c_intel", "crc32c_generic"}},
		{"fs alias", "fs-vfat", []string{"vfat"}},
		{"nothing", "pci:v0000FFFFd0000FFFFsv00000000sd00000000bc12sc34i56", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := ix.Match(tt.modalias)
			assert.Equal(t, tt.want, got, "Match(%q)", tt.modalias)

			// kmod agrees (as a set: it walks its binary trie, not the file).
			out, _ := exec.Command(modprobe, "-C", noConfig, "-d", root, "-S", filepath.Base(dir), "-R", tt.modalias).Output()
			kmod := dedupe(strings.Fields(string(out)))
			assert.ElementsMatch(t, kmod, got, "modprobe -R %s", tt.modalias)
		})
	}
}

func dedupe(s []string) []string {
	sort.Strings(s)
	return slices.Compact(s)
}

func TestResolveAndBuiltin(t *testing.T) {
	ix, _ := realIndex(t)
	assert.True(t, ix.Builtin("amd_uncore"), "amd-uncore.ko is in modules.builtin")
	assert.True(t, ix.Builtin("amd-uncore"))
	assert.False(t, ix.Builtin("ext4"))
	assert.Equal(t, []string{"amd_uncore"}, ix.Resolve("amd-uncore"))
	assert.Equal(t, []string{"crc32c_intel", "crc32c_generic"}, ix.Resolve("crypto-crc32c"))
	assert.Equal(t, filepath.Join(ix.dir, "kernel/fs/ext4/ext4.ko"), ix.Path("ext4"))
	assert.Empty(t, ix.Path("amd_uncore"))
}

package slot

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/image"
	"github.com/etcdbox/etcdbox/internal/testenv"
)

// espStart is the ESP's offset in the builder's disk (CONTRACTS "Disk").
const espStart = 1 << 20

// extractESP copies the ESP partition of the raw disk into a file of its
// own, leaving holes where the partition is zero.
func extractESP(t *testing.T, disk string) string {
	t.Helper()
	in, err := os.Open(disk)
	require.NoError(t, err)
	defer in.Close()
	esp := filepath.Join(t.TempDir(), "esp.img")
	out, err := os.Create(esp)
	require.NoError(t, err)
	defer out.Close()
	require.NoError(t, out.Truncate(espSize))
	buf, zero := make([]byte, 1<<20), make([]byte, 1<<20)
	for off := int64(0); off < espSize; off += int64(len(buf)) {
		_, err := in.ReadAt(buf, espStart+off)
		require.NoError(t, err)
		if !bytes.Equal(buf, zero) {
			_, err = out.WriteAt(buf, off)
			require.NoError(t, err)
		}
	}
	require.NoError(t, out.Close())
	return esp
}

// TestBuilderESP runs the state machine on the ESP of a disk the builder
// made, with its real kernel and initrd, and checks the result with
// fsck.vfat.
func TestBuilderESP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a full image; runs without -short (make test)")
	}
	vmlinuz, modules := testenv.Kernel(t)
	// The builder only copies /init; any static binary stands in until
	// bin/init is built.
	initBin := filepath.Join(testenv.Root(t), "bin", "init")
	if _, err := os.Stat(initBin); err != nil {
		initBin = testenv.Bin(t, "etcdctl")
	}
	disk := filepath.Join(t.TempDir(), "disk.img")
	_, err := image.Build(context.Background(), image.Config{
		Kernel:          vmlinuz,
		Modules:         modules,
		Etcd:            testenv.Bin(t, "etcd"),
		Init:            initBin,
		Bootloader:      testenv.Bootloader(t),
		Cmdline:         "etcdbox.debug=1",
		SourceDateEpoch: 1700000000,
		Version:         "slot-test",
		Compression:     image.CompressionFast,
		Output:          disk,
	})
	require.NoError(t, err, "build")
	esp := extractESP(t, disk)
	fsck(t, esp)
	fsys := &fatFS{image: esp, size: espSize}

	entry, err := fsys.ReadFile("loader/entries/etcdbox-a.conf")
	require.NoError(t, err)
	assert.Equal(t, builderEntry, string(entry), "the builder's entry is the one Stage would write for a")
	f, err := os.Open(vmlinuz)
	require.NoError(t, err)
	defer f.Close()
	kernel, err := io.ReadAll(f)
	require.NoError(t, err)
	initrd, err := fsys.ReadFile("etcdbox/a/initrd")
	require.NoError(t, err)
	t.Logf("kernel %d bytes, initrd %d bytes", len(kernel), len(initrd))

	// The new "release": the same kernel, an initrd that differs.
	stateMachine(t, fsys, kernel, append(initrd, "trailing bytes of a newer release"...))
	fsck(t, esp)
}

package qemu

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sparseImage writes an 8 MiB raw image with data at its start and at
// 5 MiB and holes elsewhere.
func sparseImage(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "base.raw")
	f, err := os.Create(p)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteAt([]byte("boot sector"), 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("data"), 5<<20)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(8<<20))
	return p
}

func TestCopySparse(t *testing.T) {
	src := sparseImage(t)
	dst := filepath.Join(t.TempDir(), "disk.raw")
	require.NoError(t, CopySparse(dst, src))
	want, err := os.ReadFile(src)
	require.NoError(t, err)
	got, err := os.ReadFile(dst)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	fi, err := os.Stat(dst)
	require.NoError(t, err)
	blocks := fi.Sys().(*syscall.Stat_t).Blocks * 512
	assert.LessOrEqual(t, blocks, int64(3<<20), "copy allocates %d bytes of 8 MiB", blocks)
}

func TestPrepareDisk(t *testing.T) {
	ctx := context.Background()
	base := sparseImage(t)
	for _, tt := range []struct {
		name    string
		overlay bool
		want    disk
	}{
		{"overlay", true, disk{"disk.qcow2", "qcow2"}},
		{"copy", false, disk{"disk.raw", "raw"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{Dir: t.TempDir(), Image: base, Overlay: tt.overlay}
			d, err := prepareDisk(ctx, c)
			require.NoError(t, err)
			assert.Equal(t, tt.want, d)
			size, err := virtualSize(ctx, c.Dir, d)
			require.NoError(t, err)
			assert.Equal(t, int64(8<<20), size)

			// A grown disk stays grown; the disk is reused, never remade.
			c.DiskSize = 16 << 20
			_, err = prepareDisk(ctx, c)
			require.NoError(t, err)
			c.DiskSize = 0
			_, err = prepareDisk(ctx, c)
			require.NoError(t, err)
			size, err = virtualSize(ctx, c.Dir, d)
			require.NoError(t, err)
			assert.Equal(t, int64(16<<20), size)

			c.DiskSize = 4 << 20
			_, err = prepareDisk(ctx, c)
			assert.ErrorContains(t, err, "never shrink")
		})
	}
}

func TestPrepareDiskQcow2Base(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	_, err := qemuImg(ctx, dir, "convert", "-O", "qcow2", sparseImage(t), "base.qcow2")
	require.NoError(t, err)
	f, err := imageFormat(filepath.Join(dir, "base.qcow2"))
	require.NoError(t, err)
	assert.Equal(t, "qcow2", f)
	for _, overlay := range []bool{true, false} {
		d, err := prepareDisk(ctx, Config{Dir: t.TempDir(), Image: filepath.Join(dir, "base.qcow2"), Overlay: overlay})
		require.NoError(t, err)
		assert.Equal(t, disk{"disk.qcow2", "qcow2"}, d)
	}
}

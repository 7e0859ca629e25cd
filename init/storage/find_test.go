package storage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeBlock is a sysfs with /sys/devices/... and /sys/class/block links,
// laid out as the kernel does.
type fakeBlock struct{ root string }

func newFakeBlock(t *testing.T) fakeBlock {
	t.Helper()
	fb := fakeBlock{t.TempDir()}
	require.NoError(t, os.MkdirAll(fb.classBlock(), 0o755))
	return fb
}

func (fb fakeBlock) classBlock() string { return filepath.Join(fb.root, "class", "block") }

// disk adds a disk under a device path such as
// "pci0000:00/0000:00:02.0/virtio1".
func (fb fakeBlock) disk(t *testing.T, devPath, name string) {
	t.Helper()
	dir := filepath.Join(fb.root, "devices", devPath, "block", name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "uevent"),
		fmt.Appendf(nil, "MAJOR=254\nMINOR=0\nDEVNAME=%s\nDEVTYPE=disk\nDISKSEQ=9\n", name), 0o444))
	require.NoError(t, os.Symlink(dir, filepath.Join(fb.classBlock(), name)))
}

// part adds partition num of disk with a GPT partition name.
func (fb fakeBlock) part(t *testing.T, devPath, disk, name string, num int, partName string) {
	t.Helper()
	dir := filepath.Join(fb.root, "devices", devPath, "block", disk, name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "uevent"),
		fmt.Appendf(nil, "MAJOR=254\nMINOR=%d\nDEVNAME=%s\nDEVTYPE=partition\nDISKSEQ=9\nPARTN=%d\nPARTNAME=%s\n", num, name, num, partName), 0o444))
	// Relative links, like the real ones.
	rel, err := filepath.Rel(fb.classBlock(), dir)
	require.NoError(t, err)
	require.NoError(t, os.Symlink(rel, filepath.Join(fb.classBlock(), name)))
}

const virtio1 = "pci0000:00/0000:00:02.0/virtio1"

func TestFindByLabel(t *testing.T) {
	type part struct {
		dev, disk, name string
		num             int
		label           string
	}
	for _, tt := range []struct {
		name     string
		disks    []string // disk names, each on its own device path
		parts    []part
		label    string
		wantDev  string
		wantDisk string
		wantNum  int
		wantErr  string
	}{
		{
			name:  "virtio",
			disks: []string{"vda"},
			parts: []part{{"vda1", "vda", "vda1", 1, ESPLabel}, {"vda2", "vda", "vda2", 2, DataLabel}},
			label: DataLabel, wantDev: "/dev/vda2", wantDisk: "/dev/vda", wantNum: 2,
		},
		{
			name:  "esp",
			disks: []string{"vda"},
			parts: []part{{"vda1", "vda", "vda1", 1, ESPLabel}, {"vda2", "vda", "vda2", 2, DataLabel}},
			label: ESPLabel, wantDev: "/dev/vda1", wantDisk: "/dev/vda", wantNum: 1,
		},
		{
			name:  "nvme names do not end in the disk name plus digits",
			disks: []string{"nvme0n1"},
			parts: []part{{"nvme0n1p1", "nvme0n1", "nvme0n1p1", 1, ESPLabel}, {"nvme0n1p2", "nvme0n1", "nvme0n1p2", 2, DataLabel}},
			label: DataLabel, wantDev: "/dev/nvme0n1p2", wantDisk: "/dev/nvme0n1", wantNum: 2,
		},
		{
			name:  "label is exact",
			disks: []string{"sda"},
			parts: []part{{"sda2", "sda", "sda2", 2, "ETCDBOX-DATA-OLD"}, {"sda3", "sda", "sda3", 3, DataLabel}},
			label: DataLabel, wantDev: "/dev/sda3", wantDisk: "/dev/sda", wantNum: 3,
		},
		{
			name:    "missing",
			disks:   []string{"vda"},
			parts:   []part{{"vda1", "vda", "vda1", 1, ESPLabel}},
			label:   DataLabel,
			wantErr: `no partition named "ETCDBOX-DATA"`,
		},
		{
			name:    "two etcdbox disks",
			disks:   []string{"vda", "vdb"},
			parts:   []part{{"vda2", "vda", "vda2", 2, DataLabel}, {"vdb2", "vdb", "vdb2", 2, DataLabel}},
			label:   DataLabel,
			wantErr: `found 2: /dev/vda2, /dev/vdb2`,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fb := newFakeBlock(t)
			for i, d := range tt.disks {
				fb.disk(t, fmt.Sprintf("%s/%d", virtio1, i), d)
			}
			for _, p := range tt.parts {
				i := 0
				for j, d := range tt.disks {
					if d == p.disk {
						i = j
					}
				}
				fb.part(t, fmt.Sprintf("%s/%d", virtio1, i), p.disk, p.dev, p.num, p.label)
			}
			dev, disk, num, err := FindByLabel(fb.classBlock(), tt.label)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantDev, dev, "dev")
			assert.Equal(t, tt.wantDisk, disk, "disk")
			assert.Equal(t, tt.wantNum, num, "partNum")
		})
	}
}

func TestWaitForLabel(t *testing.T) {
	t.Run("appears later", func(t *testing.T) {
		fb := newFakeBlock(t)
		fb.disk(t, virtio1, "vda")
		fb.part(t, virtio1, "vda", "vda2", 2, DataLabel)
		// Hide the partition, and let it appear a little later.
		link := filepath.Join(fb.classBlock(), "vda2")
		target, err := os.Readlink(link)
		require.NoError(t, err)
		require.NoError(t, os.Remove(link))
		done := make(chan error)
		go func() {
			time.Sleep(150 * time.Millisecond)
			done <- os.Symlink(target, link)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		dev, disk, num, err := WaitForLabel(ctx, fb.classBlock(), DataLabel)
		require.NoError(t, <-done)
		require.NoError(t, err)
		assert.Equal(t, []any{"/dev/vda2", "/dev/vda", 2}, []any{dev, disk, num})
	})
	t.Run("deadline", func(t *testing.T) {
		fb := newFakeBlock(t)
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Millisecond)
		defer cancel()
		_, _, _, err := WaitForLabel(ctx, fb.classBlock(), DataLabel)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorContains(t, err, `no partition named "ETCDBOX-DATA"`)
	})
	t.Run("ambiguity fails at once", func(t *testing.T) {
		fb := newFakeBlock(t)
		fb.disk(t, virtio1+"/0", "vda")
		fb.disk(t, virtio1+"/1", "vdb")
		fb.part(t, virtio1+"/0", "vda", "vda2", 2, DataLabel)
		fb.part(t, virtio1+"/1", "vdb", "vdb2", 2, DataLabel)
		start := time.Now()
		_, _, _, err := WaitForLabel(context.Background(), fb.classBlock(), DataLabel)
		assert.ErrorContains(t, err, "found 2")
		assert.Less(t, time.Since(start), time.Second)
	})
}

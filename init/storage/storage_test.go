package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// node simulates a node's disk without loop devices: /dev/vda is a GPT
// image file, /dev/vda2 a separate file standing for the DATA partition
// (the kernel's view of it), and the BLKPG seam resizes that file as the
// kernel would resize the partition. The e2fsprogs are the real ones.
type node struct {
	t       *testing.T
	devDir  string
	sys     fakeBlock
	resizes []string
	mounts  []string
	tools   []string
}

func newNode(t *testing.T, data []byte) *node {
	t.Helper()
	n := &node{t: t, devDir: t.TempDir(), sys: newFakeBlock(t)}
	require.NoError(t, os.Rename(newImage(t, 4, 8), n.disk()))
	require.NoError(t, os.WriteFile(n.part(), data, 0o644))
	require.NoError(t, os.Truncate(n.part(), 8*mib))
	n.sys.disk(t, virtio1, "vda")
	n.sys.part(t, virtio1, "vda", "vda1", 1, ESPLabel)
	n.sys.part(t, virtio1, "vda", "vda2", 2, DataLabel)
	return n
}

func (n *node) disk() string { return filepath.Join(n.devDir, "vda") }
func (n *node) part() string { return filepath.Join(n.devDir, "vda2") }

func (n *node) options() Options {
	hostTools(n.t)
	return Options{
		SysBlock: n.sys.classBlock(),
		DevDir:   n.devDir,
		Target:   "/var/lib/etcdbox",
		Wait:     time.Second,
		Tools: &Tools{Run: func(name string, args ...string) ([]byte, int, error) {
			n.tools = append(n.tools, filepath.Base(name))
			return execRun(name, args...)
		}},
		ResizePartition: func(disk *os.File, num int, start, length int64) error {
			n.resizes = append(n.resizes, fmt.Sprintf("%s %d %d+%d", filepath.Base(disk.Name()), num, start/mib, length/mib))
			return os.Truncate(n.part(), length)
		},
		Mount: func(dev, target, fstype, options string) error {
			n.mounts = append(n.mounts, strings.Join([]string{filepath.Base(dev), target, fstype, options}, " "))
			return nil
		},
		Logf: n.t.Logf,
	}
}

// boot runs PrepareData and returns the report and error, resetting the
// recorded calls first.
func (n *node) boot() (Report, error) {
	n.resizes, n.mounts, n.tools = nil, nil, nil
	return PrepareData(context.Background(), n.options())
}

func (n *node) fsUUID() []byte {
	f, err := os.Open(n.part())
	require.NoError(n.t, err)
	defer f.Close()
	b := make([]byte, 16)
	_, err = f.ReadAt(b, 1024+0x68)
	require.NoError(n.t, err)
	return b
}

func (n *node) fsckClean() {
	out, err := runTool(n.t, filepath.Join(DefaultToolDir, "e2fsck"), "-fn", n.part())
	assert.NoError(n.t, err, "e2fsck -fn: %s", out)
}

const mountLine = "vda2 /var/lib/etcdbox ext4 nodev,nosuid,noatime"

// TestPrepareDataLifecycle follows one node: first boot on an enlarged
// disk, reboots, two disk enlargements, and a grow a power cut
// interrupted.
func TestPrepareDataLifecycle(t *testing.T) {
	n := newNode(t, nil)
	var uuid []byte

	t.Run("first boot formats the placeholder after growing it", func(t *testing.T) {
		require.NoError(t, os.Truncate(n.disk(), 64*mib))
		rep, err := n.boot()
		require.NoError(t, err)
		assert.Equal(t, Blank, rep.State)
		assert.True(t, rep.Formatted)
		assert.True(t, rep.PartitionGrown)
		assert.False(t, rep.FSGrown, "mke2fs ran on the grown partition")
		assert.Equal(t, filepath.Join(n.devDir, "vda2"), rep.Dev)
		assert.Equal(t, filepath.Join(n.devDir, "vda"), rep.Disk)
		assert.Equal(t, 2, rep.PartNum)
		assert.Equal(t, 58*mib, rep.PartitionBytes)
		assert.Equal(t, 58*mib, rep.FSBytes)
		assert.Equal(t, []string{"vda 2 5+58"}, n.resizes)
		assert.Equal(t, []string{"mke2fs", "e2fsck"}, n.tools)
		assert.Equal(t, []string{mountLine}, n.mounts)
		st := checkGPT(t, n.disk())
		assert.Equal(t, uint64(63*mib/lba-1), st.parts[1].End)
		n.fsckClean()
		uuid = n.fsUUID()
	})

	t.Run("reboot checks and mounts only", func(t *testing.T) {
		rep, err := n.boot()
		require.NoError(t, err)
		assert.Equal(t, Ext4, rep.State)
		assert.False(t, rep.Formatted || rep.PartitionGrown || rep.FSGrown, "%+v", rep)
		assert.Empty(t, n.resizes)
		assert.Equal(t, []string{"e2fsck"}, n.tools)
		assert.Equal(t, []string{mountLine}, n.mounts)
		assert.Equal(t, uuid, n.fsUUID(), "same filesystem")
	})

	for _, size := range []int64{128 * mib, 300 * mib} {
		t.Run(fmt.Sprintf("disk enlarged to %d MiB", size/mib), func(t *testing.T) {
			require.NoError(t, os.Truncate(n.disk(), size))
			rep, err := n.boot()
			require.NoError(t, err)
			want := size - mib - 5*mib
			assert.False(t, rep.Formatted)
			assert.True(t, rep.PartitionGrown)
			assert.True(t, rep.FSGrown)
			assert.Equal(t, want, rep.PartitionBytes)
			assert.Equal(t, want, rep.FSBytes)
			assert.Less(t, rep.FSBytesBefore, rep.FSBytes)
			assert.Equal(t, []string{fmt.Sprintf("vda 2 5+%d", want/mib)}, n.resizes)
			// mounted first, then grown online
			assert.Equal(t, []string{"e2fsck", "resize2fs"}, n.tools)
			assert.Equal(t, []string{mountLine}, n.mounts)
			assert.Equal(t, uuid, n.fsUUID(), "same filesystem")
			checkGPT(t, n.disk())
			n.fsckClean()
		})
	}

	t.Run("power cut after the GPT grew, before the kernel heard", func(t *testing.T) {
		require.NoError(t, os.Truncate(n.disk(), 400*mib))
		r, err := growFile(t, n.disk(), DataLabel)
		require.NoError(t, err)
		require.True(t, r.Grown)
		rep, err := n.boot()
		require.NoError(t, err)
		assert.True(t, rep.PartitionGrown)
		assert.True(t, rep.FSGrown)
		assert.Equal(t, []string{"vda 2 5+394"}, n.resizes)
		assert.Equal(t, []string{"e2fsck", "resize2fs"}, n.tools)
		assert.Equal(t, 394*mib, rep.FSBytes)
	})

	t.Run("power cut after the partition grew, before resize2fs", func(t *testing.T) {
		require.NoError(t, os.Truncate(n.disk(), 500*mib))
		r, err := growFile(t, n.disk(), DataLabel)
		require.NoError(t, err)
		require.NoError(t, os.Truncate(n.part(), r.Size)) // the kernel knew
		rep, err := n.boot()
		require.NoError(t, err)
		assert.False(t, rep.PartitionGrown)
		assert.True(t, rep.FSGrown)
		assert.Empty(t, n.resizes)
		assert.Equal(t, []string{"e2fsck", "resize2fs"}, n.tools)
		assert.Equal(t, 494*mib, rep.FSBytes)
		n.fsckClean()
	})
}

func TestPrepareDataRefuses(t *testing.T) {
	for _, tt := range []struct {
		name      string
		data      []byte
		damage    []string // debugfs requests on a fresh ext4 in DATA
		wantErr   error
		wantMsg   string
		wantTools []string
	}{
		{
			name:    "unknown data is never formatted",
			data:    append([]byte("XFSB"), bytes.Repeat([]byte{7}, 4096)...),
			wantErr: ErrUnknownData,
			wantMsg: "neither ext4 nor a blank placeholder",
		},
		{
			name:      "damage preen cannot fix is reported, not mounted",
			damage:    []string{"sif <2> mode 0100644", "ssv state 2"},
			wantErr:   ErrNeedsRepair,
			wantMsg:   "Root inode is not a directory",
			wantTools: []string{"e2fsck"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t, tt.data)
			if tt.damage != nil {
				out, err := runTool(t, filepath.Join(DefaultToolDir, "mke2fs"), "-q", "-F", "-t", "ext4", n.part())
				require.NoError(t, err, "%s", out)
				debugfs := testenv.File(t, filepath.Join(DefaultToolDir, "debugfs"), "install e2fsprogs")
				for _, req := range tt.damage {
					out, err := runTool(t, debugfs, "-w", "-R", req, n.part())
					require.NoError(t, err, "%s", out)
				}
			}
			require.NoError(t, os.Truncate(n.disk(), 64*mib)) // a grown disk must stay untouched too
			disk, part, uuid := fileSum(t, n.disk()), fileSum(t, n.part()), n.fsUUID()

			rep, err := n.boot()
			require.ErrorIs(t, err, tt.wantErr)
			assert.ErrorContains(t, err, tt.wantMsg)
			assert.ErrorContains(t, err, n.part(), "the error names the device")
			assert.Equal(t, tt.wantTools, n.tools, "no mke2fs, ever")
			assert.Empty(t, n.mounts)
			assert.Empty(t, n.resizes)
			assert.False(t, rep.Formatted)
			assert.Equal(t, disk, fileSum(t, n.disk()), "GPT untouched")
			if tt.damage == nil {
				assert.Equal(t, part, fileSum(t, n.part()), "DATA untouched")
			} else { // e2fsck -p itself may write what it could fix
				assert.Equal(t, uuid, n.fsUUID(), "DATA not reformatted")
			}
		})
	}

	t.Run("no DATA partition", func(t *testing.T) {
		n := newNode(t, nil)
		o := n.options()
		o.Wait = 100 * time.Millisecond
		o.Label = "ETCDBOX-OTHER"
		_, err := PrepareData(context.Background(), o)
		assert.ErrorContains(t, err, `wait for partition "ETCDBOX-OTHER"`)
	})

	t.Run("DATA on another disk than asked", func(t *testing.T) {
		n := newNode(t, nil)
		o := n.options()
		o.Wait = 100 * time.Millisecond
		o.Disk = "/dev/vdb"
		_, err := PrepareData(context.Background(), o)
		assert.ErrorContains(t, err, `no partition named "ETCDBOX-DATA"`)
		assert.Empty(t, n.tools)
	})
}

// TestPrepareDataGrowIsOptional: a node whose partition or filesystem
// cannot grow still boots with DATA at its old size.
func TestPrepareDataGrowIsOptional(t *testing.T) {
	for _, tt := range []struct {
		name       string
		failBLKPG  bool
		failResize bool
		wantTools  []string
		wantErr    string
	}{
		{name: "BLKPG fails", failBLKPG: true, wantTools: []string{"e2fsck"}, wantErr: "BLKPG says no"},
		{name: "resize2fs fails", failResize: true, wantTools: []string{"e2fsck", "resize2fs"}, wantErr: "resize2fs "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t, nil)
			_, err := n.boot() // first boot at the built size
			require.NoError(t, err)
			require.NoError(t, os.Truncate(n.disk(), 64*mib))

			o := n.options()
			if tt.failBLKPG {
				o.ResizePartition = func(*os.File, int, int64, int64) error { return errors.New("BLKPG says no") }
			}
			if tt.failResize {
				run := o.Tools.Run
				o.Tools.Run = func(name string, args ...string) ([]byte, int, error) {
					if filepath.Base(name) == "resize2fs" {
						n.tools = append(n.tools, "resize2fs")
						return []byte("resize2fs: Permission denied"), 1, nil
					}
					return run(name, args...)
				}
			}
			n.resizes, n.mounts, n.tools = nil, nil, nil
			rep, err := PrepareData(context.Background(), o)
			require.NoError(t, err)
			assert.ErrorContains(t, rep.GrowErr, tt.wantErr)
			assert.Equal(t, []string{mountLine}, n.mounts, "DATA is mounted anyway")
			assert.Equal(t, tt.wantTools, n.tools)
			assert.False(t, rep.FSGrown)
			assert.Equal(t, 8*mib, rep.FSBytes, "DATA keeps its size")
		})
	}
}

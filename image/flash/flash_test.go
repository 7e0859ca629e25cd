//go:build linux

package flash

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/internal/testenv"
)

// scratch writes a file of size bytes: random when junk, else a sparse
// file of zeros.
func scratch(t *testing.T, size int64, junk bool) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "disk")
	if junk {
		b := make([]byte, size)
		_, _ = rand.Read(b)
		require.NoError(t, os.WriteFile(p, b, 0o600))
	} else {
		require.NoError(t, os.WriteFile(p, nil, 0o600))
		require.NoError(t, os.Truncate(p, size))
	}
	return p
}

// TestWriteLoopDevice flashes an image onto a loop device that holds
// old data: refused without Force, then written, and the device holds
// the image byte for byte, with its zeros, and the rest untouched.
func TestWriteLoopDevice(t *testing.T) {
	backing := scratch(t, 48<<20, true)
	dev := testenv.Loop(t, backing)
	old, err := os.ReadFile(backing)
	require.NoError(t, err)

	img := make([]byte, 40<<20)
	_, _ = rand.Read(img[:8<<20]) // the rest zeros, as an image's DATA placeholder
	imgPath := filepath.Join(t.TempDir(), "img.raw")
	require.NoError(t, os.WriteFile(imgPath, img, 0o600))

	_, err = Write(context.Background(), imgPath, dev, Options{})
	require.ErrorIs(t, err, ErrNotBlank)
	assert.Contains(t, err.Error(), "data in its first MiB; --force overwrites it")
	now, err := os.ReadFile(backing)
	require.NoError(t, err)
	require.True(t, bytes.Equal(old, now), "a refused flash changed the device")

	var progress bytes.Buffer
	n, err := Write(context.Background(), imgPath, dev, Options{Force: true, Progress: &progress})
	require.NoError(t, err)
	assert.Equal(t, int64(len(img)), n)
	assert.Contains(t, progress.String(), "flash "+dev+": wrote 40 MiB of 40 MiB (100%)")
	assert.Contains(t, progress.String(), "flash "+dev+": verified 40 MiB of 40 MiB (100%)")
	now, err = os.ReadFile(backing)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(img, now[:len(img)]), "the device does not hold the image")
	assert.True(t, bytes.Equal(old[len(img):], now[len(img):]), "bytes past the image changed")
	assert.Equal(t, os.FileMode(0), mustStat(t, dev).Mode()&os.ModeType&^(os.ModeDevice), "the device node is still a block device")
}

func mustStat(t *testing.T, p string) os.FileInfo {
	t.Helper()
	fi, err := os.Stat(p)
	require.NoError(t, err)
	require.NotZero(t, fi.Mode()&os.ModeDevice, "%s is no longer a device", p)
	return fi
}

// TestRefusesMountedDevice mounts a filesystem on a loop device: Check
// and Write name the mount point, and the device keeps its filesystem,
// even with Force.
func TestRefusesMountedDevice(t *testing.T) {
	backing := scratch(t, 32<<20, false)
	dev := testenv.Loop(t, backing)
	out, err := exec.Command("mkfs.ext4", "-q", "-F", dev).CombinedOutput()
	require.NoError(t, err, "mkfs.ext4: %s", out)
	mnt := filepath.Join(t.TempDir(), "a mount")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	require.NoError(t, syscall.Mount(dev, mnt, "ext4", 0, ""))
	t.Cleanup(func() { _ = syscall.Unmount(mnt, 0) })
	imgPath := filepath.Join(t.TempDir(), "img.raw")
	require.NoError(t, os.WriteFile(imgPath, make([]byte, 4<<20), 0o600))
	for _, force := range []bool{false, true} {
		err = Check(dev, 4<<20, Options{Force: force})
		require.Error(t, err)
		assert.Contains(t, err.Error(), dev+" is mounted on "+mnt+"; unmount it first")
		_, err = Write(context.Background(), imgPath, dev, Options{Force: force})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "is mounted on")
	}
	// Mounting writes to the filesystem itself, so the bytes are not
	// compared: the image's zeros would have wiped the superblock, and
	// the filesystem checks clean.
	require.NoError(t, syscall.Unmount(mnt, 0))
	out, err = exec.Command("e2fsck", "-fn", dev).CombinedOutput()
	require.NoError(t, err, "the refused flash harmed the filesystem: %s", out)

	// Unmounted, it is not blank: an ext4 filesystem.
	err = Check(dev, 4<<20, Options{})
	require.ErrorIs(t, err, ErrNotBlank)
	assert.Contains(t, err.Error(), "it holds an ext2/3/4 filesystem")
}

// TestRefusesMountedPartition: a device none of whose own bytes are
// mounted, but whose partition is (losetup -P, as a USB stick with a
// mounted filesystem shows up), is refused naming the partition, and the
// partition keeps its filesystem.
func TestRefusesMountedPartition(t *testing.T) {
	backing := scratch(t, 48<<20, false)
	d, err := diskfs.Open(backing)
	require.NoError(t, err)
	require.NoError(t, d.Partition(&gpt.Table{
		LogicalSectorSize: 512, PhysicalSectorSize: 512, ProtectiveMBR: true,
		Partitions: []*gpt.Partition{{Index: 1, Start: 2048, End: 2048 + 32768 - 1, Type: gpt.LinuxFilesystem, Name: "data"}},
	}))
	require.NoError(t, d.Close())
	dev := testenv.LoopPartitions(t, backing)
	part := dev + "p1"
	waitFor(t, part)
	out, err := exec.Command("mkfs.ext4", "-q", "-F", part).CombinedOutput()
	require.NoError(t, err, "mkfs.ext4: %s", out)
	mnt := filepath.Join(t.TempDir(), "stick")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	require.NoError(t, syscall.Mount(part, mnt, "ext4", 0, ""))
	t.Cleanup(func() { _ = syscall.Unmount(mnt, 0) })
	imgPath := filepath.Join(t.TempDir(), "img.raw")
	require.NoError(t, os.WriteFile(imgPath, make([]byte, 4<<20), 0o600))
	for _, force := range []bool{false, true} {
		err = Check(dev, 4<<20, Options{Force: force})
		require.Error(t, err, "force %v", force)
		assert.Contains(t, err.Error(), part+" is mounted on "+mnt+"; unmount it first")
		_, err = Write(context.Background(), imgPath, dev, Options{Force: force})
		require.Error(t, err, "force %v", force)
		assert.Contains(t, err.Error(), part+" is mounted on")
	}
	require.NoError(t, syscall.Unmount(mnt, 0))
	out, err = exec.Command("e2fsck", "-fn", part).CombinedOutput()
	require.NoError(t, err, "the refused flash harmed the partition's filesystem: %s", out)
}

// waitFor waits for the kernel to create a device node (a partition of
// a loop device appears just after losetup -P returns).
func waitFor(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		require.True(t, time.Now().Before(deadline), "%s did not appear within 10 s", path)
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRefusesSmallDevice(t *testing.T) {
	dev := testenv.Loop(t, scratch(t, 8<<20, false))
	err := Check(dev, 16<<20, Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the device holds 8 MiB, the image needs 16 MiB")
	require.NoError(t, Check(dev, 8<<20, Options{}), "a blank device of the image's size")
}

// TestRefusesOtherFiles: Write is for block devices; a character device,
// a FIFO or a file is refused and left as it was.
func TestRefusesOtherFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))
	imgPath := filepath.Join(dir, "img.raw")
	require.NoError(t, os.WriteFile(imgPath, make([]byte, 1<<20), 0o600))
	for _, p := range []string{"/dev/null", fifo, file, filepath.Join(dir, "missing")} {
		before, _ := os.Lstat(p)
		_, err := Write(context.Background(), imgPath, p, Options{Force: true})
		require.Error(t, err, p)
		assert.Equal(t, "flash "+p+": not a block device", err.Error())
		after, _ := os.Lstat(p)
		if before != nil {
			assert.Equal(t, before.Mode(), after.Mode(), "%s changed kind", p)
		}
	}
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "x", string(b))
}

func TestContents(t *testing.T) {
	gpt := make([]byte, blankBytes)
	copy(gpt[512:], "EFI PART")
	gpt[510], gpt[511] = 0x55, 0xAA
	mbr := make([]byte, blankBytes)
	mbr[510], mbr[511] = 0x55, 0xAA
	ext := make([]byte, blankBytes)
	ext[1080], ext[1081] = 0x53, 0xEF
	fat := make([]byte, blankBytes)
	copy(fat[82:], "FAT32   ")
	junk := make([]byte, blankBytes)
	junk[blankBytes-1] = 1
	for _, tc := range []struct {
		head []byte
		want string
	}{
		{make([]byte, blankBytes), ""},
		{gpt, "a GPT partition table"},
		{mbr, "an MBR partition table or boot sector"},
		{ext, "an ext2/3/4 filesystem"},
		{fat, "a FAT filesystem"},
		{junk, "data in its first MiB"},
	} {
		assert.Equal(t, tc.want, contents(tc.head))
	}
}

func TestNotMountedParsesMountinfo(t *testing.T) {
	p := filepath.Join(t.TempDir(), "mountinfo")
	require.NoError(t, os.WriteFile(p, []byte(strings.Join([]string{
		"22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw",
		"40 22 7:1 / /mnt/my\\040disk rw,relatime shared:20 - vfat /dev/loop1p1 rw",
		"short line",
	}, "\n")), 0o644))
	require.NoError(t, notMounted(p, map[string]string{"7:0": "/dev/loop0"}))
	err := notMounted(p, map[string]string{"7:0": "/dev/loop0", "7:1": "/dev/loop0p1"})
	require.EqualError(t, err, "/dev/loop0p1 is mounted on /mnt/my disk; unmount it first")
	require.ErrorContains(t, notMounted(filepath.Join(t.TempDir(), "none"), nil), "check mounts")
}

package image

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteCidata(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "seed.img")
	user := []byte("cluster: demo\n")
	meta := []byte("instance-id: n1\nlocal-hostname: n1\n")
	require.NoError(t, WriteCidata(path, user, meta, 0))

	out, err := exec.Command("fsck.vfat", "-n", path).CombinedOutput()
	assert.NoError(t, err, "fsck.vfat -n: %s", out)
	if blkid, err := exec.LookPath("blkid"); err == nil {
		out, err := exec.Command(blkid, "-p", "-o", "value", "-s", "LABEL", path).CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Equal(t, "cidata\n", string(out))
	}

	d, err := diskfs.Open(path, diskfs.WithOpenMode(diskfs.ReadOnly))
	require.NoError(t, err)
	fs, err := d.GetFilesystem(0)
	require.NoError(t, err)
	for name, want := range map[string][]byte{"/user-data": user, "/meta-data": meta} {
		f, err := fs.OpenFile(name, os.O_RDONLY)
		require.NoError(t, err, name)
		got := make([]byte, len(want)+10)
		n, _ := f.Read(got)
		assert.Equal(t, string(want), string(got[:n]), name)
	}

	again := filepath.Join(dir, "again.img")
	require.NoError(t, WriteCidata(again, user, meta, 0))
	a, _ := os.ReadFile(path)
	b, _ := os.ReadFile(again)
	assert.True(t, string(a) == string(b), "two cidata volumes from the same input differ")
}

// TestWriteConfigDrive: an OpenStack config drive, labelled config-2,
// with the user data and meta_data.json under openstack/latest, clean
// for fsck.vfat, and private (it holds the seed).
func TestWriteConfigDrive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config-2.img")
	user := []byte("cluster: demo\n")
	meta := []byte(`{"uuid": "i-1", "name": "n1"}`)
	require.NoError(t, WriteConfigDrive(path, user, meta, 0))

	out, err := exec.Command("fsck.vfat", "-n", path).CombinedOutput()
	assert.NoError(t, err, "fsck.vfat -n: %s", out)
	if blkid, err := exec.LookPath("blkid"); err == nil {
		out, err := exec.Command(blkid, "-p", "-o", "value", "-s", "LABEL", path).CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Equal(t, "config-2\n", string(out))
	}
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	d, err := diskfs.Open(path, diskfs.WithOpenMode(diskfs.ReadOnly))
	require.NoError(t, err)
	fs, err := d.GetFilesystem(0)
	require.NoError(t, err)
	for name, want := range map[string][]byte{"/openstack/latest/user_data": user, "/openstack/latest/meta_data.json": meta} {
		f, err := fs.OpenFile(name, os.O_RDONLY)
		require.NoError(t, err, name)
		got := make([]byte, len(want)+10)
		n, _ := f.Read(got)
		assert.Equal(t, string(want), string(got[:n]), name)
	}
}

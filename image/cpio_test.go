package image

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sampleTree returns a small tree; reverse adds the entries in the
// opposite order.
func sampleTree(t *testing.T, reverse bool) *tree {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src")
	require.NoError(t, os.WriteFile(src, []byte("from a file\n"), 0o600))
	steps := []func(*tree) error{
		func(tr *tree) error { return tr.bytes("etc/hello", []byte("hello\n"), 0o644) },
		func(tr *tree) error { return tr.file("usr/bin/tool", src, 0o755) },
		func(tr *tree) error { return tr.symlink("etc/link", "hello") },
		func(tr *tree) error { return tr.dir("tmp", fs.ModeSticky|0o777) },
		func(tr *tree) error { return tr.charDev("dev/null", 1, 3, 0o666) },
		func(tr *tree) error { return tr.bytes("odd", []byte("abc"), 0o600) },
	}
	tr := newTree()
	for i := range steps {
		if reverse {
			i = len(steps) - 1 - i
		}
		require.NoError(t, steps[i](tr))
	}
	return tr
}

// newcHeader is a parsed newc header.
type newcHeader struct {
	name                                string
	ino, mode, uid, gid, nlink, mtime   uint32
	size, rmajor, rminor, namesize, chk uint32
}

// parseNewc reads every header of a newc archive, independently of the
// writer.
func parseNewc(t *testing.T, b []byte) []newcHeader {
	t.Helper()
	var out []newcHeader
	for off := 0; ; {
		require.GreaterOrEqual(t, len(b)-off, 110, "truncated header at %d", off)
		require.Equal(t, "070701", string(b[off:off+6]), "magic at %d", off)
		f := make([]uint32, 13)
		for i := range f {
			v, err := strconv.ParseUint(string(b[off+6+8*i:off+14+8*i]), 16, 32)
			require.NoError(t, err)
			f[i] = uint32(v)
		}
		h := newcHeader{ino: f[0], mode: f[1], uid: f[2], gid: f[3], nlink: f[4], mtime: f[5], size: f[6],
			rmajor: f[9], rminor: f[10], namesize: f[11], chk: f[12]}
		h.name = string(b[off+110 : off+110+int(h.namesize)-1])
		off += (110 + int(h.namesize) + 3) &^ 3
		off += (int(h.size) + 3) &^ 3
		if h.name == cpioTrailer {
			require.Equal(t, len(b), off, "bytes after the trailer")
			return out
		}
		out = append(out, h)
	}
}

func TestWriteCPIOHeaders(t *testing.T) {
	var buf bytes.Buffer
	n, err := writeCPIO(context.Background(), &buf, sampleTree(t, false).sorted(), testEpoch)
	require.NoError(t, err)
	assert.Equal(t, int64(buf.Len()), n, "returned size")
	hs := parseNewc(t, buf.Bytes())
	var names []string
	for i, h := range hs {
		names = append(names, h.name)
		assert.Equal(t, uint32(i+1), h.ino, "%s: inode", h.name)
		assert.Zero(t, h.uid, "%s: uid", h.name)
		assert.Zero(t, h.gid, "%s: gid", h.name)
		assert.Equal(t, uint32(testEpoch), h.mtime, "%s: mtime", h.name)
	}
	assert.Equal(t, []string{"dev", "dev/null", "etc", "etc/hello", "etc/link", "odd", "tmp", "usr", "usr/bin", "usr/bin/tool"}, names)
	byName := map[string]newcHeader{}
	for _, h := range hs {
		byName[h.name] = h
	}
	assert.Equal(t, uint32(0o020666), byName["dev/null"].mode)
	assert.Equal(t, [2]uint32{1, 3}, [2]uint32{byName["dev/null"].rmajor, byName["dev/null"].rminor})
	assert.Equal(t, uint32(0o041777), byName["tmp"].mode)
	assert.Equal(t, uint32(0o120777), byName["etc/link"].mode)
	assert.Equal(t, uint32(0o100755), byName["usr/bin/tool"].mode)
	assert.Equal(t, uint32(2), byName["etc"].nlink)
}

func TestWriteCPIOOrderIndependent(t *testing.T) {
	var a, b bytes.Buffer
	_, err := writeCPIO(context.Background(), &a, sampleTree(t, false).sorted(), testEpoch)
	require.NoError(t, err)
	_, err = writeCPIO(context.Background(), &b, sampleTree(t, true).sorted(), testEpoch)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(a.Bytes(), b.Bytes()), "archives of the same tree differ by insertion order")
}

// TestWriteCPIOUnpacks unpacks the archive with the host's cpio.
func TestWriteCPIOUnpacks(t *testing.T) {
	var buf bytes.Buffer
	_, err := writeCPIO(context.Background(), &buf, sampleTree(t, false).sorted(), testEpoch)
	require.NoError(t, err)
	dir := t.TempDir()
	cmd := exec.Command("cpio", "-idm", "--quiet", "--no-absolute-filenames")
	cmd.Dir, cmd.Stdin = dir, &buf
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "cpio: %s", out)

	got, err := os.ReadFile(filepath.Join(dir, "usr/bin/tool"))
	require.NoError(t, err)
	assert.Equal(t, "from a file\n", string(got))
	got, err = os.ReadFile(filepath.Join(dir, "odd"))
	require.NoError(t, err)
	assert.Equal(t, "abc", string(got))
	target, err := os.Readlink(filepath.Join(dir, "etc/link"))
	require.NoError(t, err)
	assert.Equal(t, "hello", target)
	fi, err := os.Stat(filepath.Join(dir, "etc/hello"))
	require.NoError(t, err)
	assert.Equal(t, int64(testEpoch), fi.ModTime().Unix(), "mtime")
	assert.Equal(t, fs.FileMode(0o644), fi.Mode().Perm())
	fi, err = os.Stat(filepath.Join(dir, "tmp"))
	require.NoError(t, err)
	assert.NotZero(t, fi.Mode()&fs.ModeSticky, "/tmp sticky bit")
	fi, err = os.Lstat(filepath.Join(dir, "dev/null"))
	require.NoError(t, err)
	require.NotZero(t, fi.Mode()&fs.ModeCharDevice, "/dev/null is a character device")
	rdev := fi.Sys().(*syscall.Stat_t).Rdev
	assert.Equal(t, uint64(1<<8|3), rdev, "/dev/null rdev")
}

func TestTreeConflict(t *testing.T) {
	tr := newTree()
	require.NoError(t, tr.bytes("etc/x", []byte("a"), 0o644))
	require.NoError(t, tr.bytes("etc/x", []byte("a"), 0o644), "identical entries may be added twice")
	err := tr.bytes("etc/x", []byte("b"), 0o644)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/etc/x")
	assert.Error(t, tr.dir("etc/x/y", 0o755), "a file cannot become a directory")
}

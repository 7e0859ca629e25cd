package image

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSharedLibsOfMke2fs(t *testing.T) {
	libs, err := sharedLibs("/", []string{"/usr/sbin/mke2fs"})
	require.NoError(t, err)
	for _, want := range []string{
		"/lib64/ld-linux-x86-64.so.2",
		"/lib/x86_64-linux-gnu/libext2fs.so.2",
		"/lib/x86_64-linux-gnu/libcom_err.so.2",
		"/lib/x86_64-linux-gnu/libc.so.6",
	} {
		host, ok := libs[want]
		if assert.True(t, ok, "sharedLibs(mke2fs) lacks %s: %v", want, libs) {
			fi, err := os.Lstat(host)
			require.NoError(t, err)
			assert.True(t, fi.Mode().IsRegular(), "%s -> %s is not a regular file", want, host)
		}
	}
}

// TestResolveInSysroot checks that absolute symlinks in a sysroot resolve
// inside it, the way the loader in a chroot would see them.
func TestResolveInSysroot(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "usr/lib/x86_64-linux-gnu"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "usr/lib/x86_64-linux-gnu/libz.so.1.3"), []byte("z"), 0o644))
	require.NoError(t, os.Symlink("usr/lib", filepath.Join(root, "lib")))
	require.NoError(t, os.Symlink("/usr/lib/x86_64-linux-gnu/libz.so.1.3", filepath.Join(root, "usr/lib/x86_64-linux-gnu/libz.so.1")))
	require.NoError(t, os.Symlink("../../../../../etc/passwd", filepath.Join(root, "usr/lib/x86_64-linux-gnu/escape")))

	for _, tc := range []struct {
		name, in, want string
	}{
		{"merged usr and absolute link", "/lib/x86_64-linux-gnu/libz.so.1", "usr/lib/x86_64-linux-gnu/libz.so.1.3"},
		{"plain", "/usr/lib/x86_64-linux-gnu/libz.so.1.3", "usr/lib/x86_64-linux-gnu/libz.so.1.3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveIn(root, tc.in)
			require.NoError(t, err)
			assert.Equal(t, filepath.Join(root, tc.want), got, "resolveIn(%s)", tc.in)
		})
	}
	got, err := resolveIn(root, "/usr/lib/x86_64-linux-gnu/escape")
	if err == nil {
		assert.True(t, strings.HasPrefix(got, root), "resolveIn escaped the root: %s", got)
	}
}

func TestSharedLibsMissing(t *testing.T) {
	// A root holding mke2fs but none of its libraries.
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "usr/sbin"), 0o755))
	data, err := os.ReadFile("/usr/sbin/mke2fs")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "usr/sbin/mke2fs"), data, 0o755))
	_, err = sharedLibs(root, []string{"/usr/sbin/mke2fs"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "mke2fs")
}

// TestAddLibsOneCopy: two library paths that are one host file (the
// loader under /lib64 and under /lib/x86_64-linux-gnu) become one file and
// a relative symlink that resolves to it; other libraries stay files.
func TestAddLibsOneCopy(t *testing.T) {
	dir := t.TempDir()
	ld, libc := filepath.Join(dir, "ld.so"), filepath.Join(dir, "libc.so.6")
	require.NoError(t, os.WriteFile(ld, []byte("loader"), 0o755))
	require.NoError(t, os.WriteFile(libc, []byte("libc"), 0o755))
	tr := newTree()
	require.NoError(t, addLibs(tr, map[string]string{
		"/lib64/ld-linux-x86-64.so.2":                ld,
		"/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2": ld,
		"/lib/x86_64-linux-gnu/libc.so.6":            libc,
	}))
	file := tr.nodes["lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"]
	require.NotNil(t, file)
	assert.True(t, file.mode.IsRegular())
	assert.Equal(t, ld, file.src)
	link := tr.nodes["lib64/ld-linux-x86-64.so.2"]
	require.NotNil(t, link)
	require.Equal(t, os.ModeSymlink, link.mode.Type(), "the second path is a link, not a second copy")
	assert.Equal(t, "../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", link.target)
	assert.Equal(t, file.path, path.Join(path.Dir(link.path), link.target), "the link resolves to the file")
	assert.True(t, tr.nodes["lib/x86_64-linux-gnu/libc.so.6"].mode.IsRegular())
}

package image

import (
	"os"
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

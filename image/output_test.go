package image

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPendingFile(t *testing.T) {
	dir := t.TempDir()
	final := filepath.Join(dir, "disk.img")

	f, p, err := pendingFile(final)
	require.NoError(t, err)
	_, err = f.WriteString("half")
	require.NoError(t, err)
	f.Close()
	p.abort()
	assertEmptyDir(t, dir)

	require.NoError(t, os.WriteFile(final, []byte("old"), 0o644))
	f, p, err = pendingFile(final)
	require.NoError(t, err)
	_, err = f.WriteString("new")
	require.NoError(t, err)
	f.Close()
	require.NoError(t, p.commit())
	got, err := os.ReadFile(final)
	require.NoError(t, err)
	assert.Equal(t, "new", string(got))
	fi, err := os.Stat(final)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
	entries, _ := os.ReadDir(dir)
	assert.Len(t, entries, 1, "only the output remains")
}

func TestPendingDir(t *testing.T) {
	dir := t.TempDir()
	final := filepath.Join(dir, "layout")

	// An unrelated non-empty directory is never replaced.
	require.NoError(t, os.MkdirAll(final, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(final, "precious"), []byte("x"), 0o644))
	_, err := pendingDir(final)
	require.ErrorContains(t, err, final)
	_, err = os.Stat(filepath.Join(final, "precious"))
	require.NoError(t, err)

	// A previous layout is replaced as a whole.
	require.NoError(t, os.WriteFile(filepath.Join(final, "oci-layout"), []byte("{}"), 0o644))
	p, err := pendingDir(final)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(p.tmp, "index.json"), []byte("{}"), 0o644))
	require.NoError(t, p.commit())
	entries, err := os.ReadDir(final)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, "index.json", entries[0].Name())
	entries, _ = os.ReadDir(dir)
	assert.Len(t, entries, 1, "no temporary directories remain")
}

// assertEmptyDir fails when dir holds anything: a failed build must not
// leave partial output or temporary files behind.
func assertEmptyDir(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Empty(t, names, "leftovers in %s", dir)
}

// TestOutputRefusesSpecialFiles: -o naming a device node, a FIFO or a
// socket is refused, and the node is left as it was (a rename would have
// replaced it with a regular file).
func TestOutputRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, path := range []string{"/dev/null", fifo} {
		before, err := os.Lstat(path)
		require.NoError(t, err)
		_, _, err = pendingFile(path)
		require.Error(t, err, path)
		assert.Contains(t, err.Error(), "not a regular file")
		assert.Contains(t, err.Error(), path)
		after, err := os.Lstat(path)
		require.NoError(t, err)
		assert.Equal(t, before.Mode(), after.Mode(), "%s changed", path)
	}
	require.Error(t, WriteCidata(fifo, []byte("cluster: x\n"), []byte("instance-id: x\n"), 0))
}

// TestSecretOutputsArePrivate: a seed volume is committed with mode 0600.
func TestSecretOutputsArePrivate(t *testing.T) {
	out := filepath.Join(t.TempDir(), "seed.img")
	require.NoError(t, WriteCidata(out, []byte("cluster: x\n"), []byte("instance-id: x\n"), 0))
	fi, err := os.Stat(out)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

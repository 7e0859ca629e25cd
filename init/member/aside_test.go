package member

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMoveAside(t *testing.T) {
	root := t.TempDir()
	data, state := filepath.Join(root, "etcd"), filepath.Join(root, "state")
	require.NoError(t, os.MkdirAll(filepath.Join(data, "member", "wal"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(data, "member", "wal", "0.wal"), []byte("log"), 0o600))

	dst, err := MoveAside(data, state)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(filepath.Base(dst), "removed-"), dst)
	assert.Equal(t, state, filepath.Dir(dst))
	got, err := os.ReadFile(filepath.Join(dst, "member", "wal", "0.wal"))
	require.NoError(t, err)
	assert.Equal(t, "log", string(got), "moved data")
	left, err := os.ReadDir(data)
	require.NoError(t, err, "the data dir stays (it may be a mount point)")
	assert.Empty(t, left)

	// A second removal in the same second gets its own directory.
	require.NoError(t, os.MkdirAll(filepath.Join(data, "member"), 0o700))
	dst2, err := MoveAside(data, state)
	require.NoError(t, err)
	assert.NotEqual(t, dst, dst2)
	_, err = os.Stat(filepath.Join(dst, "member", "wal", "0.wal"))
	assert.NoError(t, err, "the first move was kept")

	// Nothing to move: no error, no directory.
	for _, d := range []string{data, filepath.Join(root, "missing")} {
		dst, err := MoveAside(d, state)
		assert.NoError(t, err)
		assert.Empty(t, dst)
	}
	entries, err := os.ReadDir(state)
	require.NoError(t, err)
	assert.Len(t, entries, 2)
}

func TestRemovedWatch(t *testing.T) {
	line := `{"level":"warn","msg":"server error","error":"` + RemovedMessage + `"}` + "\n"
	for split := 0; split <= len(line); split += 7 {
		w := NewRemovedWatch()
		_, _ = w.Write([]byte(`{"level":"info","msg":"ready"}` + "\n"))
		assert.False(t, w.Seen())
		_, _ = w.Write([]byte(line[:split]))
		_, _ = w.Write([]byte(line[split:]))
		assert.True(t, w.Seen(), "split at %d", split)
		<-w.Removed()
	}
	w := NewRemovedWatch()
	for _, b := range []byte(strings.Repeat("x", 100) + RemovedMessage[:20]) {
		_, _ = w.Write([]byte{b})
	}
	assert.False(t, w.Seen())
}

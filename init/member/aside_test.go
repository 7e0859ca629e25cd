package member

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

func TestMoveAsidePrunes(t *testing.T) {
	root := t.TempDir()
	data, state := filepath.Join(root, "etcd"), filepath.Join(root, "state")
	clock := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	a := Aside{Keep: 3, Now: func() time.Time { clock = clock.Add(time.Second); return clock }}
	var made []string
	for i := range 5 {
		require.NoError(t, os.MkdirAll(filepath.Join(data, "member"), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(data, "member", "n"), []byte{byte(i)}, 0o600))
		dst, err := a.Move(data, state)
		require.NoError(t, err)
		made = append(made, filepath.Base(dst))
	}
	entries, err := os.ReadDir(state)
	require.NoError(t, err)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	assert.Equal(t, made[2:], left, "the 3 newest copies are kept")
	got, err := os.ReadFile(filepath.Join(state, made[4], "member", "n"))
	require.NoError(t, err)
	assert.Equal(t, []byte{4}, got)
}

func TestRemovedCopiesOrder(t *testing.T) {
	state := t.TempDir()
	for _, d := range []string{"removed-20250101T000002Z", "removed-20250101T000001Z-10", "removed-20250101T000001Z",
		"removed-20250101T000001Z-2", "member", "removed-x-y"} {
		require.NoError(t, os.Mkdir(filepath.Join(state, d), 0o700))
	}
	got, err := removedCopies(state)
	require.NoError(t, err)
	for i := range got {
		got[i] = filepath.Base(got[i])
	}
	assert.Equal(t, []string{"removed-20250101T000001Z", "removed-20250101T000001Z-2", "removed-20250101T000001Z-10", "removed-20250101T000002Z"}, got)
}

func TestMoveAsideNoSpace(t *testing.T) {
	mk := func(t *testing.T, copies int) (data, state string) {
		root := t.TempDir()
		data, state = filepath.Join(root, "etcd"), filepath.Join(root, "state")
		require.NoError(t, os.MkdirAll(filepath.Join(data, "member", "snap"), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(data, "member", "snap", "db"), make([]byte, 1000), 0o600))
		for i := range copies {
			dir := filepath.Join(state, fmt.Sprintf("removed-2025010%dT000000Z", i+1))
			require.NoError(t, os.MkdirAll(dir, 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "db"), make([]byte, 300), 0o600))
		}
		return data, state
	}
	free := func(n uint64) func(string) (uint64, error) { return func(string) (uint64, error) { return n, nil } }
	tests := []struct {
		name     string
		copies   int
		free     uint64
		wantErr  string
		wantLeft int // removed-* copies afterwards
	}{
		{name: "room", free: 1000, wantLeft: 1},
		{name: "no room", free: 999, wantErr: "about 1000 bytes, 999 bytes are free", wantLeft: 0},
		{name: "room once pruned", copies: 3, free: 700, wantLeft: 3},
		{name: "no room even pruned", copies: 3, free: 699, wantErr: "699 bytes are free on", wantLeft: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, state := mk(t, tt.copies)
			dst, err := Aside{Keep: 3, Free: free(tt.free)}.Move(data, state)
			copies, lerr := removedCopies(state)
			require.NoError(t, lerr)
			assert.Len(t, copies, tt.wantLeft)
			if tt.wantErr == "" {
				require.NoError(t, err)
				assert.FileExists(t, filepath.Join(dst, "member", "snap", "db"))
				return
			}
			require.ErrorIs(t, err, ErrNoSpace)
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.Empty(t, dst)
			assert.FileExists(t, filepath.Join(data, "member", "snap", "db"), "the data stays")
		})
	}
}

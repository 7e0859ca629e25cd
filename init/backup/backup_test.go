package backup

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"github.com/etcdbox/etcdbox/internal/etcdtest"
	"github.com/etcdbox/etcdbox/pki"
)

// etcdSnapshot returns a snapshot stream of a real etcd member holding
// keys keys, as the node's backups read it.
func etcdSnapshot(t *testing.T, keys int) []byte {
	t.Helper()
	pkiDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(pkiDir, false))
	c := etcdtest.Start(t, pkiDir, "n1")
	cli := c.Client(t)
	for i := range keys {
		_, err := cli.Put(t.Context(), fmt.Sprintf("/k/%03d", i), fmt.Sprint("v", i))
		require.NoError(t, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	rc, err := cli.Snapshot(ctx)
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return b
}

// TestSaveVerifiesAndKeepsTheNewest: each snapshot is verified before it
// is kept, its record says what upstream etcdutl's snapshot status says
// of it, and only the newest keep stay, with their records.
func TestSaveVerifiesAndKeepsTheNewest(t *testing.T) {
	const keep = 3
	snap := etcdSnapshot(t, 20)
	dir := filepath.Join(t.TempDir(), "backups")
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var last Snapshot
	for i := range keep + 2 {
		var err error
		last, err = Save(dir, bytes.NewReader(snap), "n1", start.Add(time.Duration(i)*time.Second), keep)
		require.NoError(t, err)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "etcd-crashed.db.tmp"), nil, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "etcd-20200101T000000.000000000Z.db.json"), []byte("{}"), 0o600))
	require.NoError(t, Prune(dir, keep))

	up, err := snapshot.NewV3(zap.NewNop()).Status(last.Path)
	require.NoError(t, err)
	assert.Equal(t, up.Revision, last.Revision, "revision, as etcdutl reads it")
	assert.Equal(t, up.TotalKey, last.Keys, "keys, as etcdutl counts them")
	assert.Equal(t, up.Hash, last.Hash, "hash, as etcdutl computes it")
	assert.GreaterOrEqual(t, last.Revision, int64(21))
	assert.Len(t, last.SHA256, 64)

	list, err := List(dir)
	require.NoError(t, err)
	require.Len(t, list, keep)
	assert.Equal(t, last, list[keep-1], "the record reads back")
	assert.Equal(t, "etcd-20300102T030409.000000000Z.db", list[keep-1].Name)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, ents, 2*keep, "each snapshot and its record, nothing else")

	f, s, err := Open(dir, last.Name)
	require.NoError(t, err)
	b, err := io.ReadAll(f)
	f.Close()
	require.NoError(t, err)
	assert.Equal(t, snap, b)
	assert.Equal(t, last, s)
	for _, bad := range []string{"../backups/" + last.Name, "/etc/passwd", "etcd-none.db", ""} {
		_, _, err := Open(dir, bad)
		assert.ErrorIs(t, err, os.ErrNotExist, bad)
	}
}

// TestSaveRefusesBadSnapshots: a stream cut short, or one whose bytes do
// not match its SHA-256, is refused and nothing is kept.
func TestSaveRefusesBadSnapshots(t *testing.T) {
	snap := etcdSnapshot(t, 3)
	flipped := bytes.Clone(snap)
	flipped[len(flipped)/2] ^= 1
	for name, b := range map[string][]byte{
		"cut short":       snap[:len(snap)-100],
		"a changed byte":  flipped,
		"no SHA-256":      snap[:len(snap)-32],
		"not a database":  append(bytes.Repeat([]byte{7}, 4096), make([]byte, 32)...),
		"an empty stream": nil,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := Save(dir, bytes.NewReader(b), "n1", time.Now(), 3)
			require.ErrorIs(t, err, ErrBadSnapshot)
			ents, err := os.ReadDir(dir)
			require.NoError(t, err)
			assert.Empty(t, ents, "a bad snapshot left files")
		})
	}
}

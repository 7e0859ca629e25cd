package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/init/backup"
	"github.com/etcdbox/etcdbox/internal/etcdtest"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
)

// snapshotNode answers status as name and saves a snapshot of a real etcd
// member into its backups directory on POST /v1/snapshot, as a node does.
type snapshotNode struct {
	backupNode
	name    string
	corrupt bool // the kept file goes bad between save and fetch
}

func (n snapshotNode) Status(context.Context) (nodeapi.Status, error) {
	return nodeapi.Status{Name: n.name}, nil
}

func (n snapshotNode) Upgrade() nodeapi.UpgradeProgress { return nodeapi.UpgradeProgress{} }

func (n snapshotNode) Snapshot(context.Context) (nodeapi.Snapshot, error) {
	s, err := backup.Save(n.dir, bytes.NewReader(n.snap), n.name, time.Now(), 3)
	if err == nil && n.corrupt {
		bad := bytes.Clone(n.snap)
		bad[len(bad)/2] ^= 1
		err = os.WriteFile(s.Path, bad, 0o600)
	}
	return nodeapi.Snapshot{Name: s.Name, Member: s.Member, Size: s.Size, Revision: s.Revision, Keys: s.Keys, SHA256: s.SHA256}, err
}

// TestSnapshotVerb: snapshot asks the named node for a snapshot now and
// writes it verified; it never overwrites a file, and a snapshot that
// does not verify leaves no file.
func TestSnapshotVerb(t *testing.T) {
	pkiDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(pkiDir, false))
	cli := etcdtest.Start(t, pkiDir, "n1").Client(t)
	for i := range 7 {
		_, err := cli.Put(t.Context(), "/k/"+strconv.Itoa(i), "v")
		require.NoError(t, err)
	}
	rc, err := cli.Snapshot(t.Context())
	require.NoError(t, err)
	snap, err := io.ReadAll(rc)
	require.NoError(t, err)
	rc.Close()

	n1 := snapshotNode{backupNode: backupNode{dir: t.TempDir(), snap: snap}, name: "n1"}
	n2 := snapshotNode{backupNode: backupNode{dir: t.TempDir(), snap: snap}, name: "n2", corrupt: true}
	eps := "https://127.0.0.1:" + strconv.Itoa(serveNode(t, pkiDir, "n1", n1)) + ",https://127.0.0.1:" + strconv.Itoa(serveNode(t, pkiDir, "n2", n2))
	target := []string{"--endpoints", eps, "--pki", pkiDir}

	file := filepath.Join(t.TempDir(), "n1.db")
	out, _, code, err := runExit(t, append([]string{"snapshot", "n1", "-o", file}, target...)...)
	require.NoError(t, err, out)
	assert.Zero(t, code)
	assert.Regexp(t, `^wrote `+file+`: etcd-\S+\.db from n1, revision \d+, 7 keys, hash \d+, verified\n$`, out)
	got, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, snap, got)
	kept, err := backup.List(n1.dir)
	require.NoError(t, err)
	assert.Len(t, kept, 1, "the node keeps the snapshot among its backups")

	_, _, code, err = runExit(t, append([]string{"snapshot", "n1", "-o", file}, target...)...)
	assert.Equal(t, exitError, code)
	assert.ErrorContains(t, err, "-o "+file+": exists; give a new file")

	_, _, code, err = runExit(t, append([]string{"snapshot", "n2", "-o", file + ".2"}, target...)...)
	assert.Equal(t, exitError, code)
	assert.ErrorIs(t, err, backup.ErrBadSnapshot)
	assert.NoFileExists(t, file+".2")

	_, _, code, err = runExit(t, append([]string{"snapshot", "n1"}, target...)...)
	assert.Equal(t, exitUsage, code, "-o is required: %v", err)
}

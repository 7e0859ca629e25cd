package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/init/backup"
	"github.com/etcdbox/etcdbox/internal/etcdtest"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/nodeapi/server"
	"github.com/etcdbox/etcdbox/pki"
)

// backupNode is a node API backend over a real backups directory, whose
// backups are snapshots of a real etcd member.
type backupNode struct {
	server.Node // nil: any other method panics
	dir         string
	snap        []byte // what a new backup saves
}

func (n backupNode) Backups() ([]nodeapi.Snapshot, error) {
	snaps, err := backup.List(n.dir)
	out := []nodeapi.Snapshot{}
	for _, s := range snaps {
		out = append(out, nodeapi.Snapshot{Name: s.Name, Member: s.Member, Size: s.Size, Revision: s.Revision, Keys: s.Keys, Hash: s.Hash, SHA256: s.SHA256, Taken: s.Taken})
	}
	return out, err
}

func (n backupNode) OpenBackup(name string) (io.ReadCloser, nodeapi.Snapshot, error) {
	f, s, err := backup.Open(n.dir, name)
	return f, nodeapi.Snapshot{Name: s.Name, Size: s.Size, SHA256: s.SHA256}, err
}

func (n backupNode) Backup(context.Context) (nodeapi.Snapshot, error) {
	s, err := backup.Save(n.dir, bytes.NewReader(n.snap), "n9", time.Now(), 3)
	return nodeapi.Snapshot{Name: s.Name, Member: s.Member, Size: s.Size, Revision: s.Revision, Keys: s.Keys}, err
}

// TestBackupVerbs: list shows what each node keeps, get fetches one
// verified and never overwrites, a kept file that went bad is refused,
// and now asks the first node that answers.
func TestBackupVerbs(t *testing.T) {
	pkiDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(pkiDir, false))
	c := etcdtest.Start(t, pkiDir, "n1")
	cli := c.Client(t)
	for i := range 5 {
		_, err := cli.Put(t.Context(), "/k/"+strconv.Itoa(i), "v")
		require.NoError(t, err)
	}
	rc, err := cli.Snapshot(t.Context())
	require.NoError(t, err)
	snap, err := io.ReadAll(rc)
	require.NoError(t, err)
	rc.Close()

	empty, full := backupNode{dir: t.TempDir(), snap: snap}, backupNode{dir: t.TempDir(), snap: snap}
	kept, err := backup.Save(full.dir, bytes.NewReader(snap), "n1", time.Now().Add(-2*time.Hour), 3)
	require.NoError(t, err)
	eps := "https://127.0.0.1:" + strconv.Itoa(serveNode(t, pkiDir, "n1", empty)) + ",https://127.0.0.1:" + strconv.Itoa(serveNode(t, pkiDir, "n2", full))
	target := []string{"--endpoints", eps, "--pki", pkiDir}
	run := func(args ...string) (string, error) { return runCLI(t, append(args, target...)...) }

	out, err := run("backup", "list")
	require.NoError(t, err, out)
	t.Log("\n" + out)
	row := rowOf(t, out, "https://127.0.0.1:"+strings.Split(strings.Split(eps, ",")[1], ":")[2])
	assert.Equal(t, []string{kept.Name, "n1", strconv.FormatInt(kept.Revision, 10), strconv.Itoa(kept.Keys)}, row[1:5])
	assert.Equal(t, "2h", row[6])
	out, err = run("backup", "list", "-o", "json")
	require.NoError(t, err)
	var rows []backupRow
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	require.Len(t, rows, 1)
	assert.Equal(t, kept.SHA256, rows[0].SHA256)

	file := filepath.Join(t.TempDir(), "got.db")
	out, err = run("backup", "get", kept.Name, "-o", file)
	require.NoError(t, err, out)
	assert.Contains(t, out, "wrote "+file+": "+kept.Name)
	got, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, snap, got)
	_, err = run("backup", "get", kept.Name, "-o", file)
	require.ErrorContains(t, err, "exists")
	_, err = run("backup", "get", "etcd-none.db", "-o", file+".2")
	require.ErrorContains(t, err, "no node keeps etcd-none.db")

	// The kept file changes on the node's disk: get refuses it.
	bad := bytes.Clone(snap)
	bad[len(bad)/3] ^= 1
	require.NoError(t, os.WriteFile(filepath.Join(full.dir, kept.Name), bad, 0o600))
	_, err = run("backup", "get", kept.Name, "-o", file+".3")
	require.ErrorIs(t, err, backup.ErrBadSnapshot)
	assert.NoFileExists(t, file+".3")

	out, err = run("backup", "now")
	require.NoError(t, err, out)
	assert.Regexp(t, `: etcd-\S+\.db of member n9, \d+ bytes, revision \d+, 5 keys, verified`, out)
	list, err := backup.List(empty.dir)
	require.NoError(t, err)
	assert.Len(t, list, 1, "the first node that answers took it")
}

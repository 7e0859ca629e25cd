package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"github.com/etcdbox/etcdbox/init/backup"
	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/qemu/cluster"
)

// testBackups checks the cluster's scheduled backups (a minute apart, see
// upCluster): the nodes report the last one; a newer one comes within the
// interval and some slack; the node that keeps it lists it, verified; and
// fetched through the node API it verifies again, and upstream etcdutl
// reads in it the revision, keys and hash the node recorded.
func testBackups(ctx context.Context, t *testing.T, c *cluster.Cluster) {
	const interval = time.Minute
	last := func() nodeapi.BackupSchedule {
		var newest nodeapi.BackupSchedule
		for _, n := range c.Nodes() {
			st, err := nodeAPI(t, c, n).Status(ctx)
			if err != nil {
				continue
			}
			assert.Equal(t, interval, st.Backups.Interval, "%s: the seed's interval", n.Name)
			if st.Backups.LastTaken.After(newest.LastTaken) {
				newest = st.Backups
			}
		}
		return newest
	}
	before := last()
	require.False(t, before.LastTaken.IsZero(), "no backup was taken in the cluster's first minutes")
	t.Logf("last backup before: %+v", before)
	deadline := time.Now().Add(interval + 90*time.Second)
	now := before
	for !now.LastTaken.After(before.LastTaken) {
		require.True(t, time.Now().Before(deadline), "no new backup within %s of the last", interval+90*time.Second)
		time.Sleep(2 * time.Second) // polling interval, bounded by the deadline
		now = last()
	}
	gap := now.LastTaken.Sub(before.LastTaken)
	t.Logf("next backup: %s of member %s on %s, %s after the last", now.LastName, now.LastMember, now.LastNode, gap.Round(time.Second))
	assert.GreaterOrEqual(t, gap, interval-time.Second, "backups come an interval apart, not more often")

	node, ok := c.Node(now.LastNode)
	require.True(t, ok, "the holder %s is a node of the cluster", now.LastNode)
	api := nodeAPI(t, c, node)
	listed, err := api.Backups(ctx)
	require.NoError(t, err)
	var snap nodeapi.Snapshot
	for _, s := range listed {
		if s.Name == now.LastName {
			snap = s
		}
	}
	require.Equal(t, now.LastName, snap.Name, "%s lists the backup it recorded: %+v", node.Name, listed)
	assert.LessOrEqual(t, len(listed), 3, "keep 3")
	assert.Positive(t, snap.Revision)

	path := filepath.Join(t.TempDir(), snap.Name)
	f, err := os.Create(path)
	require.NoError(t, err)
	gctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	sum, err := api.GetBackup(gctx, snap.Name, f)
	cancel()
	require.NoError(t, err)
	require.NoError(t, f.Close())
	st, err := backup.Verify(path)
	require.NoError(t, err, "the fetched snapshot")
	assert.Equal(t, snap.SHA256, sum)
	assert.Equal(t, snap.SHA256, st.SHA256)
	up, err := snapshot.NewV3(zap.NewNop()).Status(path)
	require.NoError(t, err, "etcdutl snapshot status")
	assert.Equal(t, snap.Revision, up.Revision, "revision, as etcdutl reads it")
	assert.Equal(t, snap.Keys, up.TotalKey, "keys, as etcdutl counts them")
	assert.Equal(t, snap.Hash, up.Hash, "hash, as etcdutl computes it")
	t.Logf("fetched %s: %d bytes, revision %d, %d keys, hash %d", snap.Name, snap.Size, up.Revision, up.TotalKey, up.Hash)

	// The backups are pushed too: backup list --registry lists them; the
	// newest, pulled back by digest, reads with upstream etcdutl.
	repo := hostRegistry(t, c) + "/" + backupRepo
	out, err := exec.CommandContext(ctx, testenv.Bin(t, "etcdbox"), "backup", "list", "--dir", c.Dir(), "--registry", repo, "--insecure-registry", "-o", "json").Output()
	require.NoError(t, err, "backup list --registry")
	var rows []struct {
		Node string
		nodeapi.Snapshot
	}
	require.NoError(t, json.Unmarshal(out, &rows))
	var pushed nodeapi.Snapshot
	for _, r := range rows {
		if r.Node == "(pushed)" && r.Taken.After(pushed.Taken) {
			pushed = r.Snapshot
		}
	}
	require.NotEmpty(t, pushed.Name, "no pushed backup listed: %s", out)
	require.True(t, strings.HasPrefix(pushed.Name, repo+"@sha256:"), pushed.Name)
	pulled := filepath.Join(t.TempDir(), "pulled.db")
	got, err := exec.CommandContext(ctx, testenv.Bin(t, "etcdbox"), "backup", "get", pushed.Name, "-o", pulled, "--dir", c.Dir(), "--insecure-registry").CombinedOutput()
	require.NoError(t, err, "backup get %s: %s", pushed.Name, got)
	up, err = snapshot.NewV3(zap.NewNop()).Status(pulled)
	require.NoError(t, err, "etcdutl snapshot status of the pulled backup")
	assert.Equal(t, pushed.Revision, up.Revision, "revision, as etcdutl reads it")
	assert.Equal(t, pushed.Keys, up.TotalKey, "keys, as etcdutl counts them")
	t.Logf("pulled %s: revision %d, %d keys, hash %d", pushed.Name, up.Revision, up.TotalKey, up.Hash)
}

// backupRepo is the repository of the cluster registry that TestCluster's
// nodes push their backups to.
const backupRepo = "etcdbox-backups"

// hostRegistry is the host's address of c's registry.
func hostRegistry(t *testing.T, c *cluster.Cluster) string {
	t.Helper()
	addr, err := c.RegistryAddr()
	require.NoError(t, err)
	return addr
}

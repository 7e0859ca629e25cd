package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/init/backup"
	"github.com/etcdbox/etcdbox/init/recovery"
	"github.com/etcdbox/etcdbox/nodeapi"
)

// TestContainerRestore restores a 2-node container-mode cluster to a
// backup through the node API, as etcdbox restore drives it, and stops
// both inits at the points where a restore can be interrupted: fenced
// (each init restarted keeps its etcd stopped), and with the snapshot
// received (the seed restarted stays fenced). Each step is repeated
// without effect. At the end every key of the snapshot reads back, the
// keys written after it are gone, the cluster ID is new, the revision is
// DefaultBump above the snapshot's, and the whole restore repeated is a
// no-op on both nodes.
func TestContainerRestore(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "n1", "n2")
	n1, n2 := c.nodes["n1"], c.nodes["n2"]
	for _, n := range []*cnode{n1, n2} {
		c.writeSeed(n, "restore", 2, "n1", "n2")
		n.start()
	}
	cli := c.client(n1, n2)
	c.voters(cli, 2, 2*time.Minute)
	ctx := t.Context()
	for i := range 10 {
		_, err := cli.Put(ctx, fmt.Sprintf("k%d", i), strconv.Itoa(i))
		require.NoError(t, err)
	}
	api := func(n *cnode) *nodeapi.Client {
		a, err := nodeapi.NewClient("https://127.0.0.1:"+strconv.Itoa(n.apiPort), c.pkiDir)
		require.NoError(t, err)
		t.Cleanup(func() { a.Close() })
		return a
	}
	a1, a2 := api(n1), api(n2)
	waitVoter(t, a1)
	waitRecorded(t, n1, n2)
	snap, err := a1.Backup(ctx)
	require.NoError(t, err)
	_, err = cli.Put(ctx, "after", "gone")
	require.NoError(t, err)
	st, err := a1.Status(ctx)
	require.NoError(t, err)
	oldCluster := st.Member.ClusterID
	file, err := os.CreateTemp(t.TempDir(), "snap-*.db")
	require.NoError(t, err)
	_, err = a1.GetBackup(ctx, snap.Name, file)
	require.NoError(t, err)
	require.NoError(t, file.Close())
	stats, err := backup.Verify(file.Name())
	require.NoError(t, err)
	token := nodeapi.RestoreToken(stats.SHA256)

	step := func(a *nodeapi.Client, s string) nodeapi.Recovery {
		t.Helper()
		rc, err := a.Restore(ctx, nodeapi.RestoreRequest{Token: token, Step: s})
		require.NoError(t, err, "step %s", s)
		return rc
	}
	// A step before the fence is refused.
	_, err = a2.Restore(ctx, nodeapi.RestoreRequest{Token: token, Step: nodeapi.RestoreRejoin})
	assert.ErrorContains(t, err, "has not fenced this node")
	for _, a := range []*nodeapi.Client{a1, a2} {
		assert.Equal(t, nodeapi.RecoveryFenced, step(a, nodeapi.RestoreFence).Phase)
		assert.Equal(t, nodeapi.RecoveryFenced, step(a, nodeapi.RestoreFence).Phase, "a repeated fence")
	}
	assertStopped := func(n *cnode) {
		t.Helper()
		cl := c.client(n)
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := cl.Status(sctx, n.endpoint())
		assert.Error(t, err, "%s's etcd serves while fenced", n.name)
	}
	assertStopped(n1)
	assertStopped(n2)
	// The seed step needs the snapshot first.
	_, err = a1.Restore(ctx, nodeapi.RestoreRequest{Token: token, Step: nodeapi.RestoreSeed})
	assert.ErrorContains(t, err, "has not received the snapshot")

	// Interrupted while fenced: both inits restart and keep etcd stopped.
	for _, n := range []*cnode{n1, n2} {
		n.stop()
		from := len(n.log())
		n.start()
		n.waitLog(from, "restore "+token+" stopped in phase fenced: etcd stays stopped", time.Minute)
	}
	a1, a2 = api(n1), api(n2)
	waitAPI(t, a1)
	waitAPI(t, a2)
	f, err := os.Open(file.Name())
	require.NoError(t, err)
	rc, err := a1.SendRestoreSnapshot(ctx, token, f)
	f.Close()
	require.NoError(t, err)
	assert.Equal(t, nodeapi.RecoverySaved, rc.Phase)
	assert.Equal(t, stats.Revision, rc.Revision)

	// Interrupted with the snapshot received: still fenced after a restart.
	n1.stop()
	from := len(n1.log())
	n1.start()
	n1.waitLog(from, "restore "+token+" stopped in phase saved: etcd stays stopped", time.Minute)
	a1 = api(n1)
	waitAPI(t, a1)
	assertStopped(n1)

	assert.Equal(t, nodeapi.RecoveryRestored, step(a1, nodeapi.RestoreSeed).Phase)
	waitDone(t, a1)
	assert.Equal(t, nodeapi.RecoveryRestored, step(a2, nodeapi.RestoreRejoin).Phase)
	waitDone(t, a2)
	c.voters(cli, 2, 2*time.Minute)

	for i := range 10 {
		r, err := cli.Get(ctx, fmt.Sprintf("k%d", i))
		require.NoError(t, err)
		require.Len(t, r.Kvs, 1, "k%d", i)
		assert.Equal(t, strconv.Itoa(i), string(r.Kvs[0].Value))
	}
	r, err := cli.Get(ctx, "after")
	require.NoError(t, err)
	assert.Empty(t, r.Kvs, "a key written after the snapshot")
	assert.GreaterOrEqual(t, r.Header.Revision, stats.Revision+recovery.DefaultBump)
	for _, a := range []*nodeapi.Client{a1, a2} {
		st, err := a.Status(ctx)
		require.NoError(t, err)
		assert.NotEqual(t, oldCluster, st.Member.ClusterID, "a new cluster ID")
		assert.Equal(t, oldCluster, st.Recovery.From)
		assert.Equal(t, st.Member.ClusterID, st.Recovery.To)
		assert.NotEmpty(t, st.Recovery.Aside, "the old data dir is kept")
		assert.DirExists(t, st.Recovery.Aside)
		// The whole restore again: a no-op.
		rc := step(a, nodeapi.RestoreFence)
		assert.True(t, rc.NoOp, "%+v", rc)
		assert.Contains(t, rc.Message, "nothing to do")
	}
	_, err = cli.Put(ctx, "new", "1")
	assert.NoError(t, err, "the restored cluster takes writes")
}

// waitAPI waits until a's node API answers.
func waitAPI(t *testing.T, a *nodeapi.Client) {
	t.Helper()
	waitStatus(t, a, "answers", func(nodeapi.Status) bool { return true })
}

// waitVoter waits until a's node is a healthy voter.
func waitVoter(t *testing.T, a *nodeapi.Client) {
	t.Helper()
	waitStatus(t, a, "a healthy voter", func(st nodeapi.Status) bool { return st.Member.Healthy && st.Member.Role == nodeapi.RoleVoter })
}

// waitRecorded waits until each node says it is a voting member: it has
// recorded its cluster and member IDs then (Loop.Voter). etcd serves as a
// voter a moment before, and a recovery or restore begun in between finds
// no identity on the node.
func waitRecorded(t *testing.T, ns ...*cnode) {
	t.Helper()
	for _, n := range ns {
		n.waitLog(0, "membership: "+n.name+" is a voting member", time.Minute)
	}
}

// waitDone waits until a's node has finished its restore as a voter.
func waitDone(t *testing.T, a *nodeapi.Client) {
	t.Helper()
	waitStatus(t, a, "done with the restore", func(st nodeapi.Status) bool {
		return st.Member.Healthy && st.Member.Role == nodeapi.RoleVoter && st.Recovery.Phase == nodeapi.RecoveryDone
	})
}

func waitStatus(t *testing.T, a *nodeapi.Client, what string, ok func(nodeapi.Status) bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		st, err := a.Status(ctx)
		cancel()
		if err == nil && ok(st) {
			return
		}
		last = fmt.Sprintf("%+v %v", st.Recovery, err)
		time.Sleep(200 * time.Millisecond) // polling interval, bounded by the deadline
	}
	t.Fatalf("the node is not %s within 2m: %s", what, last)
}

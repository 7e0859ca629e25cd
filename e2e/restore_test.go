package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdbox/etcdbox/init/recovery"
	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/qemu/cluster"
)

// testRestore takes the 3-node cluster back to a snapshot taken under the
// writer and pushed to the cluster's registry (DESIGN §5): `etcdbox
// restore --snapshot REF --discard n1,n2,n3` pulls it by digest, fences
// every node, restores the snapshot on n1 as a new
// cluster, and the others join it. Every key of the snapshot reads back
// and the keys written after it are gone; the revision is above the one
// before the restore; a watch opened before the restore ends with a
// compaction error; every node kept its old data dir aside; and the same
// command again changes nothing.
func testRestore(ctx context.Context, t *testing.T, c *cluster.Cluster) {
	ctx, cancel := context.WithTimeout(ctx, 2*faultDeadline)
	defer cancel()
	kept := putKeys(ctx, t, c, "restore/before-", 10)
	w := startWriter(t, c)
	waitAcked(ctx, t, w, time.Now(), "the writer")
	n1, _ := c.Node("n1")
	snap, err := nodeAPI(t, c, n1).Backup(ctx)
	require.NoError(t, err)
	t.Logf("snapshot under the writer: %s of member %s, revision %d, %d keys, pushed as %s", snap.Name, snap.Member, snap.Revision, snap.Keys, snap.Pushed)
	// The restore pulls the pushed copy by digest, as the host reaches
	// the registry.
	require.NotEmpty(t, snap.Pushed, "the backup was pushed")
	ref := strings.Replace(snap.Pushed, cluster.GuestRegistry(), hostRegistry(t, c), 1)
	waitAcked(ctx, t, w, time.Now(), "the writer after the snapshot")
	stopWriter(t, w)
	gone := putKeys(ctx, t, c, "restore/after-", 5)
	oldCluster := clusterIDOf(ctx, t, c, "n1")

	// A watch opened before the restore, through the seed node.
	cl := client(t, c, "n1")
	pre := memberStatus(ctx, t, c, "n1").Header.Revision
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	wch := cl.Watch(wctx, "restore/", clientv3.WithPrefix(), clientv3.WithRev(pre+1))
	_, err = cl.Put(ctx, "restore/watched", "1")
	require.NoError(t, err)
	select {
	case wr := <-wch:
		require.NoError(t, wr.Err())
		require.NotEmpty(t, wr.Events, "the watch sees the put")
	case <-ctx.Done():
		require.FailNow(t, "the watch saw no event")
	}

	start := time.Now()
	out := restoreCmd(ctx, t, c, ref)
	t.Logf("etcdbox restore (%s):\n%s", time.Since(start).Round(time.Second), out)
	assert.Contains(t, out, "restored: every node is a voter of the new cluster")

	// The watch ends with a compaction error once the seed serves again.
	var werr error
	for werr == nil {
		select {
		case wr, ok := <-wch:
			if !ok {
				werr = fmt.Errorf("the watch channel closed without an error")
				break
			}
			werr = wr.Err()
		case <-ctx.Done():
			require.FailNow(t, "the watch opened before the restore never ended")
		}
	}
	assert.ErrorIs(t, werr, rpctypes.ErrCompacted, "the old watch is told to read again")

	require.NoError(t, c.WaitReady(ctx))
	checkOneCluster(ctx, t, c, []string{"n1", "n2", "n3"})
	newCluster := clusterIDOf(ctx, t, c, "n1")
	assert.NotEqual(t, oldCluster, newCluster, "the restored cluster has a new ID")
	requireKeys(ctx, t, c, kept)
	for k := range gone {
		r, err := cl.Get(ctx, k)
		require.NoError(t, err)
		assert.Empty(t, r.Kvs, "%s was written after the snapshot", k)
	}
	r, err := cl.Get(ctx, "restore/watched")
	require.NoError(t, err)
	assert.Empty(t, r.Kvs, "restore/watched was written after the snapshot")
	assert.GreaterOrEqual(t, memberStatus(ctx, t, c, "n1").Header.Revision, snap.Revision+recovery.DefaultBump)
	assert.Greater(t, memberStatus(ctx, t, c, "n1").Header.Revision, pre, "the revision never goes back")
	for _, n := range c.Nodes() {
		st, err := nodeAPI(t, c, n).Status(ctx)
		require.NoError(t, err)
		assert.Equal(t, nodeapi.RecoveryDone, st.Recovery.Phase, "%s: %+v", n.Name, st.Recovery)
		assert.NotEmpty(t, st.Recovery.Aside, "%s kept its old data dir aside", n.Name)
	}

	// The same command again: a no-op that says so.
	out = restoreCmd(ctx, t, c, ref)
	assert.Contains(t, out, "nothing to do", "a repeated restore")
	assert.Equal(t, newCluster, clusterIDOf(ctx, t, c, "n1"), "a repeated restore changed the cluster")
	requireKeys(ctx, t, c, kept)

	w = startWriter(t, c)
	waitAcked(ctx, t, w, time.Now(), "the writer over the restored cluster")
	stopWriter(t, w)
}

// restoreCmd runs etcdbox restore of the pushed backup ref on c.
func restoreCmd(ctx context.Context, t *testing.T, c *cluster.Cluster, ref string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, testenv.Bin(t, "etcdbox"), "restore", "--snapshot", ref, "--insecure-registry", "--discard", "n1,n2,n3", "--dir", c.Dir()).CombinedOutput()
	require.NoError(t, err, "etcdbox restore:\n%s", out)
	return string(out)
}

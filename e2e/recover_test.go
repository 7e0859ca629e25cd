package e2e

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdbox/etcdbox/init/recovery"
	"github.com/etcdbox/etcdbox/internal/kvwriter"
	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/qemu/cluster"
)

// testRecover loses the quorum for good and recovers it from the survivor
// (DESIGN §5): n1 dies under writes, and the writer goes on with n2 and
// n3, so that n3 holds every acknowledged write; n2 dies once n3 has
// applied all that n2 committed. n3 says the quorum is lost and takes no
// write; n1 gets an empty disk and cannot join. `etcdbox recover --survivor n3`
// makes n3 the one member of a new cluster holding every key, at a higher
// revision, which n1 joins as a learner and is promoted in. n2, booted
// with its old data, is refused and keeps that data; with an empty disk it
// joins too. The same recover again changes nothing, and a writer over the
// new cluster sees a linearizable history.
func testRecover(ctx context.Context, t *testing.T, c *cluster.Cluster) {
	ctx, cancel := context.WithTimeout(ctx, 3*faultDeadline)
	defer cancel()
	start := time.Now()
	oldCluster := clusterIDOf(ctx, t, c, "n3")
	// The writer goes through n2 and n3 only: its final reads must not
	// wait on n1, which dies.
	tc, err := c.TLS()
	require.NoError(t, err)
	n2node, _ := c.Node("n2")
	n3node, _ := c.Node("n3")
	w, err := kvwriter.Start([]string{n2node.Endpoint(), n3node.Endpoint()}, tc)
	require.NoError(t, err)
	waitAcked(ctx, t, w, time.Now(), "the writer")
	require.NoError(t, c.Kill(ctx, "n1"))
	killed := time.Now()
	cl3 := client(t, c, "n3")
	var downRev int64 // the revision of the write made with n1 down
	waitFor(ctx, t, "a write with n1 down", func() (bool, string) {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		r, err := cl3.Put(pctx, "recover/with-n1-down", "1")
		if err != nil {
			return false, err.Error()
		}
		downRev = r.Header.Revision
		return true, ""
	})
	waitAcked(ctx, t, w, killed, "the writer with n1 down")
	res := stopWriter(t, w)
	t.Logf("writer with n1 down: %d acknowledged puts", res.Acked)
	// n3 has applied every entry n2 knows committed: no acknowledged
	// write is n2's alone.
	var rev2 int64
	waitFor(ctx, t, "n3 to apply what n2 committed", func() (bool, string) {
		s2, s3 := memberStatus(ctx, t, c, "n2"), memberStatus(ctx, t, c, "n3")
		rev2 = s2.Header.Revision
		return s3.RaftAppliedIndex >= s2.RaftIndex, fmt.Sprintf("n3 applied %d, n2 committed %d", s3.RaftAppliedIndex, s2.RaftIndex)
	})
	before := userKeys(ctx, t, cl3, clientv3.WithSerializable())
	require.Contains(t, before, "recover/with-n1-down")
	// etcd's backend commits its writes to the database file in batches
	// (every 100 ms, later on a loaded host); till then they are in the
	// WAL alone, which etcd replays on start. The offline check of n2's
	// data below reads the file: a snapshot makes n2's backend commit
	// first, so the file holds the write made with n1 down.
	waitFor(ctx, t, "n2 to apply the write made with n1 down", func() (bool, string) {
		s2 := memberStatus(ctx, t, c, "n2")
		return s2.Header.Revision >= downRev, fmt.Sprintf("n2 at revision %d, the write at %d", s2.Header.Revision, downRev)
	})
	commitBackend(ctx, t, c, "n2")
	vm3, err := c.VM("n3")
	require.NoError(t, err)
	mark3 := vm3.Mark()
	require.NoError(t, c.Kill(ctx, "n2"))
	lostAt := time.Now()

	// The survivor says so, once the bound has passed, and takes no write.
	m, err := vm3.WaitConsole(ctx, mark3, "quorum lost: member n3")
	require.NoError(t, err, "n3 console:\n%s", vm3.ConsoleTail(40))
	t.Logf("n3, %s after n2 died: %s", time.Since(lostAt).Round(time.Second), m.Line)
	assert.Contains(t, m.Line, "silent: n1, n2")
	assert.Contains(t, m.Line, "recover with: etcdbox recover --survivor n3")
	n3, _ := c.Node("n3")
	st, err := nodeAPI(t, c, n3).Status(ctx)
	require.NoError(t, err)
	assert.True(t, st.Quorum.Lost, "status says the quorum is lost: %+v", st.Quorum)
	assert.Equal(t, []string{"n1", "n2"}, st.Quorum.Silent)
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = cl3.Put(pctx, "recover/without-quorum", "x")
	pcancel()
	require.Error(t, err, "the survivor took a write without a quorum")

	// n1 with an empty disk cannot join a cluster without a quorum: the
	// membership lock's lease needs one.
	require.NoError(t, c.Wipe(ctx, "n1"))
	// A node replaced by a cloud's new instance: its seed from Azure's
	// IMDS, after it refused a GCE server that leaves out its
	// Metadata-Flavor header (and n2's below from OpenStack's metadata
	// service).
	require.NoError(t, c.SetSeedSource("n1", "gce-noflavor,azure"))
	require.NoError(t, c.Start(ctx, "n1"))
	vm1, err := c.VM("n1")
	require.NoError(t, err)
	m, err = vm1.WaitConsole(ctx, 0, "etcdbox: membership: join: ")
	require.NoError(t, err, "n1 console:\n%s", vm1.ConsoleTail(40))
	t.Logf("n1 with an empty disk: %s", m.Line)
	assert.NotContains(t, vm1.Console(), "added as learner", "n1 joined a cluster without a quorum")

	recoverStart := time.Now()
	out := recoverCmd(ctx, t, c)
	t.Logf("etcdbox recover (%s):\n%s", time.Since(recoverStart).Round(time.Second), out)
	assert.Contains(t, out, "serves as the one voter of cluster")

	// n1 joins the new cluster as a learner and is promoted.
	cl1 := client(t, c, "n1")
	waitFor(ctx, t, "n1 a voter of the new cluster", func() (bool, string) {
		r, err := cl1.MemberList(ctx)
		if err != nil {
			return false, err.Error()
		}
		return len(r.Members) == 2 && !r.Members[0].IsLearner && !r.Members[1].IsLearner, describe(r.Members)
	})
	t.Logf("recovered with n1 a voter %s after the recover began", time.Since(recoverStart).Round(time.Second))
	assert.Contains(t, vm1.Console(), "added as learner")
	// The node logs its promotion once etcd's answer is back, which can
	// be after the member list shows it.
	_, err = vm1.WaitConsole(ctx, 0, "promoted to a voting member")
	assert.NoError(t, err, "n1 says it was promoted")
	checkOneCluster(ctx, t, c, []string{"n1", "n3"})
	newCluster := clusterIDOf(ctx, t, c, "n3")
	assert.NotEqual(t, oldCluster, newCluster, "the recovered cluster has a new ID")
	after := userKeys(ctx, t, cl1)
	assert.Equal(t, before, after, "every key the survivor held reads back")
	s3 := memberStatus(ctx, t, c, "n3")
	assert.GreaterOrEqual(t, s3.Header.Revision, rev2+recovery.DefaultBump, "the revision went up, never back")
	vm3console := vm3.Console()[mark3:]
	assert.Contains(t, vm3console, "kept the survivor's database as")
	assert.Contains(t, vm3console, "moved the old data dir to")

	// n2 comes back with its old data: refused, and the data stays.
	require.NoError(t, c.Start(ctx, "n2"))
	vm2, err := c.VM("n2")
	require.NoError(t, err)
	m, err = vm2.WaitConsole(ctx, 0, fmt.Sprintf("refused: this node's data is a member of cluster %x", oldCluster))
	require.NoError(t, err, "n2 console:\n%s", vm2.ConsoleTail(40))
	t.Logf("n2 with its old data: %s", m.Line)
	r, err := cl1.MemberList(ctx)
	require.NoError(t, err)
	assert.Len(t, r.Members, 2, "n2 joined: %s", describe(r.Members))
	require.NoError(t, c.Kill(ctx, "n2"))
	assert.NotContains(t, vm2.Console(), "etcdbox: etcd ready", "n2 served its old data")
	assert.NotContains(t, vm2.Console(), "moved the removed member's data", "n2 moved its data")
	n2, _ := c.Node("n2")
	got := hashDB(t, memberDB(t, filepath.Join(n2.Dir, "disk.qcow2")))
	// Offline, the database shows what etcd's backend last committed:
	// writes after the snapshot above, such as the backup election's as
	// n1's lease ran out, may be in the WAL alone. The write made with n1
	// down was committed.
	t.Logf("n2 offline: revision %d; the write made with n1 down: %d", got.Revision, downRev)
	assert.GreaterOrEqual(t, got.Revision, downRev, "n2 keeps its data")

	// With an empty disk, n2 joins as a learner and is promoted.
	require.NoError(t, c.Wipe(ctx, "n2"))
	require.NoError(t, c.SetSeedSource("n2", "openstack"))
	require.NoError(t, c.Start(ctx, "n2"))
	require.NoError(t, c.WaitReady(ctx, "n2"))
	// The VM that refused has exited; this is the one just started.
	vm2, err = c.VM("n2")
	require.NoError(t, err)
	checkSeedFrom(t, c, "n1", "Azure IMDS", "GCE metadata")
	checkSeedFrom(t, c, "n2", "OpenStack metadata service", "")
	// As with n1: the member list can show n2 a voter before its
	// console line is out.
	_, err = vm2.WaitConsole(ctx, 0, "promoted to a voting member")
	assert.NoError(t, err, "n2 says it was promoted")
	checkOneCluster(ctx, t, c, []string{"n1", "n2", "n3"})

	// The same command again: a no-op that says so.
	out = recoverCmd(ctx, t, c)
	assert.Contains(t, out, "nothing to do", "a repeated recover")
	assert.Equal(t, newCluster, clusterIDOf(ctx, t, c, "n3"), "a repeated recover changed the cluster")

	w = startWriter(t, c)
	waitAcked(ctx, t, w, time.Now(), "the writer over the recovered cluster")
	stopWriter(t, w)
	t.Logf("quorum loss to a whole recovered cluster: %s", time.Since(start).Round(time.Second))
}

// waitAcked waits until w has a put acknowledged after since.
func waitAcked(ctx context.Context, t *testing.T, w *kvwriter.Writer, since time.Time, what string) {
	t.Helper()
	waitFor(ctx, t, what+" to have a put acknowledged", func() (bool, string) {
		return w.LastAck().After(since), "last at " + w.LastAck().Format(time.RFC3339Nano)
	})
}

// recoverCmd runs etcdbox recover --survivor n3 on c.
func recoverCmd(ctx context.Context, t *testing.T, c *cluster.Cluster) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, testenv.Bin(t, "etcdbox"), "recover", "--survivor", "n3", "--dir", c.Dir()).CombinedOutput()
	require.NoError(t, err, "etcdbox recover:\n%s", out)
	return string(out)
}

// userKeys returns every key outside etcdbox's own (/etcdbox/), with its
// value, as cl reads them.
func userKeys(ctx context.Context, t *testing.T, cl *clientv3.Client, opts ...clientv3.OpOption) map[string]string {
	t.Helper()
	r, err := cl.Get(ctx, "", append([]clientv3.OpOption{clientv3.WithPrefix()}, opts...)...)
	require.NoError(t, err)
	kv := map[string]string{}
	for _, e := range r.Kvs {
		if !strings.HasPrefix(string(e.Key), "/etcdbox/") {
			kv[string(e.Key)] = string(e.Value)
		}
	}
	require.NotEmpty(t, kv)
	return kv
}

// commitBackend has node's etcd commit its backend's pending batch to
// the database file, by taking a snapshot (etcd commits the batch
// before it reads one) and reading it whole.
func commitBackend(ctx context.Context, t *testing.T, c *cluster.Cluster, node string) {
	t.Helper()
	cl := dial(t, c, node)
	defer cl.Close()
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rc, err := cl.Snapshot(sctx)
	require.NoError(t, err, "a snapshot of %s", node)
	defer rc.Close()
	n, err := io.Copy(io.Discard, rc)
	require.NoError(t, err, "a snapshot of %s", node)
	require.Positive(t, n, "a snapshot of %s", node)
}

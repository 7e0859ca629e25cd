package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdbox/etcdbox/internal/kvwriter"
	"github.com/etcdbox/etcdbox/qemu/cluster"
)

// What the cluster tests read and write through etcd: the writer, keys,
// members, leaders, hashes, and waiting on a condition.

// startWriter starts the porcupine writer on every node.
func startWriter(t *testing.T, c *cluster.Cluster) *kvwriter.Writer {
	t.Helper()
	tc, err := c.TLS()
	require.NoError(t, err)
	w, err := kvwriter.Start(c.Endpoints(), tc)
	require.NoError(t, err)
	return w
}

// stopWriter stops w and checks its history: every acknowledged write is
// there (porcupine finds it linearizable).
func stopWriter(t *testing.T, w *kvwriter.Writer) kvwriter.Result {
	t.Helper()
	res, err := w.Stop(30 * time.Second)
	require.NoError(t, err)
	assert.Positive(t, res.Acked, "the writer had no write acknowledged")
	switch got := res.Check(3 * time.Minute); got {
	case porcupine.Ok:
	case porcupine.Illegal:
		t.Errorf("the writer's history is not linearizable: an acknowledged write was lost, or a read saw a value no write explains")
		explainHistory(t, res)
	default:
		t.Errorf("porcupine could not check the writer's history within 3 minutes (%s): nothing is proven either way", got)
		explainHistory(t, res)
	}
	return res
}

// explainHistory keeps porcupine's picture of a history it did not find
// linearizable, and says where.
func explainHistory(t *testing.T, res kvwriter.Result) {
	t.Helper()
	f, err := os.CreateTemp("", "etcdbox-e2e-history-"+strings.ReplaceAll(t.Name(), "/", "-")+"-*.html")
	if err != nil {
		t.Logf("keep the history: %v", err)
		return
	}
	f.Close()
	if err := res.Explain(3*time.Minute, f.Name()); err != nil {
		t.Logf("keep the history: %v", err)
		return
	}
	t.Logf("porcupine's picture of the history: %s", f.Name())
}

// putKeys writes n keys under prefix and returns them.
func putKeys(ctx context.Context, t *testing.T, c *cluster.Cluster, prefix string, n int) map[string]string {
	t.Helper()
	keys := map[string]string{}
	cl := client(t, c, c.Nodes()[1].Name)
	for i := range n {
		k, v := fmt.Sprintf("%s%02d", prefix, i), fmt.Sprintf("v%d", i)
		_, err := cl.Put(ctx, k, v)
		require.NoError(t, err)
		keys[k] = v
	}
	return keys
}

// requireKeys reads keys through every node, linearizably.
func requireKeys(ctx context.Context, t *testing.T, c *cluster.Cluster, keys map[string]string) {
	t.Helper()
	for _, n := range c.Nodes() {
		cl := client(t, c, n.Name)
		for k, v := range keys {
			r, err := cl.Get(ctx, k)
			require.NoError(t, err, "get %s through %s", k, n.Name)
			require.Len(t, r.Kvs, 1, "%s through %s: the key is lost", k, n.Name)
			assert.Equal(t, v, string(r.Kvs[0].Value), "%s through %s", k, n.Name)
		}
	}
}

// assertOneLeader checks that every node runs and exactly one leads.
func assertOneLeader(ctx context.Context, t *testing.T, c *cluster.Cluster) {
	t.Helper()
	rows, err := c.Status(ctx)
	require.NoError(t, err)
	leaders := 0
	for _, r := range rows {
		assert.Equal(t, cluster.StateRunning, r.State, "%s", r.Node.Name)
		if r.Leader {
			leaders++
		}
	}
	assert.Equal(t, 1, leaders, "status: %+v", rows)
}

// memberIDs lists the members by name, through the first node that answers.
func memberIDs(ctx context.Context, t *testing.T, c *cluster.Cluster) map[string]uint64 {
	t.Helper()
	for _, n := range c.Nodes() {
		cl := dial(t, c, n.Name)
		mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ml, err := cl.MemberList(mctx)
		cancel()
		cl.Close()
		if err != nil {
			continue
		}
		ids := map[string]uint64{}
		for _, m := range ml.Members {
			ids[m.Name] = m.ID
		}
		return ids
	}
	require.FailNow(t, "no node answers a member list")
	return nil
}

// memberStatus is node's own etcd status (answered without a quorum).
func memberStatus(ctx context.Context, t *testing.T, c *cluster.Cluster, node string) *clientv3.StatusResponse {
	t.Helper()
	n, _ := c.Node(node)
	var st *clientv3.StatusResponse
	waitFor(ctx, t, node+" answers a status request", func() (bool, string) {
		sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		cl := dial(t, c, node)
		defer cl.Close()
		var err error
		st, err = cl.Status(sctx, n.Endpoint())
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	return st
}

func clusterIDOf(ctx context.Context, t *testing.T, c *cluster.Cluster, node string) uint64 {
	return memberStatus(ctx, t, c, node).Header.ClusterId
}

// hashKV is node's hash of its key-value store (etcdctl endpoint hashkv).
func hashKV(ctx context.Context, t *testing.T, c *cluster.Cluster, node string) uint32 {
	t.Helper()
	n, _ := c.Node(node)
	var h uint32
	waitFor(ctx, t, node+" answers hashkv", func() (bool, string) {
		hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		cl := dial(t, c, node)
		defer cl.Close()
		r, err := cl.HashKV(hctx, n.Endpoint(), 0)
		if err != nil {
			return false, err.Error()
		}
		h = r.Hash
		return true, ""
	})
	return h
}

// leaderOf returns the leader's name and the raft term as the running
// nodes other than skip see them ("" when none of them knows a leader).
func leaderOf(ctx context.Context, t *testing.T, c *cluster.Cluster, skip string) (string, uint64) {
	t.Helper()
	for _, n := range c.Nodes() {
		if n.Name == skip {
			continue
		}
		if name, term, ok := leaderSeenBy(ctx, t, c, n); ok {
			return name, term
		}
	}
	return "", 0
}

// leaderSeenBy asks node n for the leader, with a client of its own
// that it closes: leaderOf is polled, and clients left open until the
// test ends would load the guests.
func leaderSeenBy(ctx context.Context, t *testing.T, c *cluster.Cluster, n cluster.Node) (string, uint64, bool) {
	cl := dial(t, c, n.Name)
	defer cl.Close()
	sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st, err := cl.Status(sctx, n.Endpoint())
	if err != nil || st.Leader == 0 {
		return "", 0, false
	}
	ml, err := cl.MemberList(sctx, clientv3.WithSerializable())
	if err != nil {
		return "", 0, false
	}
	for _, m := range ml.Members {
		if m.ID == st.Leader {
			return m.Name, st.RaftTerm, true
		}
	}
	return "", 0, false
}

// waitFor polls cond until it holds or ctx ends; what names the wait in
// the failure, with cond's last word on it.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	last := ""
	for {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		select {
		case <-ctx.Done():
			require.FailNow(t, "timed out waiting: "+what, "last: %s", last)
		case <-time.After(250 * time.Millisecond): // polling interval, bounded by ctx
		}
	}
}

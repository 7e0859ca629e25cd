package member

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// selfID finds n's member ID by its name in the list cli gives.
func (n *node) selfID(ctx context.Context, cli *clientv3.Client) (uint64, error) {
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return 0, err
	}
	for _, m := range resp.Members {
		if m.Name == n.name {
			return m.ID, nil
		}
	}
	return 0, fmt.Errorf("%s is not in the member list", n.name)
}

// others returns nodes without n.
func others(n *node, nodes []*node) []*node {
	return slices.DeleteFunc(slices.Clone(nodes), func(m *node) bool { return m == n })
}

// requireOneCluster checks that every node serves the same cluster, whose
// member list is exactly the nodes, all started voters.
func requireOneCluster(ctx context.Context, t *testing.T, nodes ...*node) {
	t.Helper()
	var want []string
	for _, n := range nodes {
		want = append(want, n.name)
	}
	slices.Sort(want)
	var clusterID uint64
	for i, n := range nodes {
		st := n.status(ctx)
		if i == 0 {
			clusterID = st.Header.ClusterId
		}
		require.Equal(t, clusterID, st.Header.ClusterId, "cluster ID of %s", n.name)
		assert.False(t, st.IsLearner, "%s is a learner", n.name)
		resp, err := n.client(n).MemberList(ctx)
		require.NoError(t, err)
		var got []string
		for _, m := range resp.Members {
			got = append(got, m.Name)
			assert.False(t, m.IsLearner, "%s lists %s as a learner", n.name, m.Name)
			assert.NotEmpty(t, m.ClientURLs, "%s lists %s as unstarted", n.name, m.Name)
		}
		slices.Sort(got)
		require.Equal(t, want, got, "members as %s lists them", n.name)
	}
}

// requireReplicated writes through the first node and reads the value back
// through every node, linearizably.
func requireReplicated(ctx context.Context, t *testing.T, key string, nodes ...*node) {
	t.Helper()
	val := fmt.Sprintf("%d", time.Now().UnixNano())
	_, err := nodes[0].client(nodes[0]).Put(ctx, key, val)
	require.NoError(t, err)
	for _, n := range nodes {
		resp, err := n.client(n).Get(ctx, key)
		require.NoError(t, err, "read through %s", n.name)
		require.Len(t, resp.Kvs, 1, "read through %s", n.name)
		assert.Equal(t, val, string(resp.Kvs[0].Value), "read through %s", n.name)
	}
}

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestJoinAndPromote: one node bootstraps, a second joins as a learner and
// is promoted after etcd refused while it had not caught up.
func TestJoinAndPromote(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 60*time.Second)
	c := newTestCluster(t)
	n1, n2 := c.node("n1"), c.node("n2")
	expected := []string{"n1"}

	p := Decide(n1.facts(ctx, expected, n2))
	require.Equal(t, Bootstrap, p.Action, p.Reason)
	n1.start(initialCluster(n1), p.State)
	n1.waitReady(ctx)
	require.NoError(t, Claim(ctx, n1.client(n1), c.token))

	p = Decide(n2.facts(ctx, expected, n1))
	require.Equal(t, JoinAsLearner, p.Action, p.Reason)
	log := newLogger(t, "n2")
	peers := n2.client(n1)
	j, err := Join(ctx, peers, Request{Cluster: c.token, Name: "n2", PeerURL: n2.PeerURL(), Logf: log.Logf})
	require.NoError(t, err)
	assert.Equal(t, initialCluster(n1, n2), j.InitialCluster)
	assert.Empty(t, j.Removed)

	// Promote before the learner runs: etcd refuses until it has caught
	// up, and Promote retries.
	type result struct {
		attempts int
		err      error
	}
	done := make(chan result, 1)
	go func() {
		a, err := j.Promote(ctx)
		done <- result{a, err}
	}()
	log.waitFor(ctx, "in sync with leader")
	n2.start(j.InitialCluster, p.State)
	r := <-done
	require.NoError(t, r.err)
	assert.GreaterOrEqual(t, r.attempts, 2, "promotion attempts")
	n2.waitReady(ctx)
	assert.Equal(t, j.ID, n2.status(ctx).Header.MemberId)
	requireOneCluster(ctx, t, n1, n2)
	requireReplicated(ctx, t, "k", n1, n2)

	// The lock was released: a promotion of a voter returns at once.
	attempts, err := Promote(ctx, peers, j.ID, log.Logf)
	require.NoError(t, err)
	assert.Equal(t, 1, attempts)

	// Hostile joins change nothing.
	_, err = Join(ctx, peers, Request{Cluster: c.token, Name: "n2", PeerURL: "https://127.0.0.1:1", Logf: log.Logf})
	require.ErrorIs(t, err, ErrNameInUse, "a second node named n2")
	assert.Contains(t, err.Error(), "answers at "+n2.ClientURL())
	_, err = Join(ctx, peers, Request{Cluster: c.token, Name: "n9", PeerURL: n2.PeerURL(), Logf: log.Logf})
	require.ErrorIs(t, err, ErrNameInUse, "a node on n2's peer URL")
	_, err = Join(ctx, peers, Request{Cluster: "prod", Name: "n9", PeerURL: "https://127.0.0.1:1", Logf: log.Logf})
	require.ErrorIs(t, err, ErrOtherCluster)
	assert.Contains(t, err.Error(), `the peers run cluster "demo"`)
	f := n2.facts(ctx, expected, n1)
	f.HasData, f.Cluster = false, "prod"
	assert.Equal(t, Wait, Decide(f).Action, "a seed naming another cluster")
	requireOneCluster(ctx, t, n1, n2)
	_, err = Promote(ctx, peers, 12345, log.Logf)
	require.ErrorIs(t, err, ErrRemoved)
}

// TestOrphanLearners: learners added by a node that died before it started
// etcd are removed by the next join, whoever left them.
func TestOrphanLearners(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 60*time.Second)
	c := newTestCluster(t)
	n1, n2, n3 := c.node("n1"), c.node("n2"), c.node("n3")
	n1.start(initialCluster(n1), "new")
	n1.waitReady(ctx)

	// Another node's orphan: added, never started. etcd allows one
	// learner, so without the cleanup no node could join.
	admin := n1.client(n1)
	orphan, err := admin.MemberAddAsLearner(ctx, []string{n3.PeerURL()})
	require.NoError(t, err)
	_, err = admin.MemberAddAsLearner(ctx, []string{"https://127.0.0.1:1"})
	require.Error(t, err, "etcd allowed a second learner; the test proves nothing")

	log2 := newLogger(t, "n2")
	j, err := Join(ctx, n2.client(n1), Request{Cluster: c.token, Name: "n2", PeerURL: n2.PeerURL(), Logf: log2.Logf})
	require.NoError(t, err)
	require.Len(t, j.Removed, 1)
	assert.Equal(t, orphan.Member.ID, j.Removed[0].ID)
	assert.Contains(t, log2.all(), "removing orphan learner")
	n2.start(j.InitialCluster, "existing")
	_, err = j.Promote(ctx)
	require.NoError(t, err)
	n2.waitReady(ctx)

	// n3's own orphan: its init added it, then died before starting etcd.
	log3 := newLogger(t, "n3")
	j, err = Join(ctx, n3.client(n1, n2), Request{Cluster: c.token, Name: "n3", PeerURL: n3.PeerURL(), Logf: log3.Logf})
	require.NoError(t, err)
	j.Release()
	stale := j.ID

	p := Decide(n3.facts(ctx, []string{"n1"}, n1, n2))
	require.Equal(t, JoinAsLearner, p.Action, p.Reason)
	require.Len(t, p.Stale, 1, p.Reason)
	assert.Equal(t, stale, p.Stale[0].ID)
	j, err = Join(ctx, n3.client(n1, n2), Request{Cluster: c.token, Name: "n3", PeerURL: n3.PeerURL(), Logf: log3.Logf})
	require.NoError(t, err)
	require.Len(t, j.Removed, 1)
	assert.Equal(t, stale, j.Removed[0].ID)
	assert.NotEqual(t, stale, j.ID)
	n3.start(j.InitialCluster, "existing")
	_, err = j.Promote(ctx)
	require.NoError(t, err)
	n3.waitReady(ctx)
	requireOneCluster(ctx, t, n1, n2, n3)
}

// TestRestartWithData: a node restarts on its data, keeping its member ID
// and its keys; one whose join was cut between its start and its
// promotion restarts as a learner and promotes itself.
func TestRestartWithData(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 60*time.Second)
	c := newTestCluster(t)
	n1, n2 := c.node("n1"), c.node("n2")
	n1.start(initialCluster(n1), "new")
	n1.waitReady(ctx)

	j, err := Join(ctx, n2.client(n1), Request{Cluster: c.token, Name: "n2", PeerURL: n2.PeerURL()})
	require.NoError(t, err)
	n2.start(j.InitialCluster, "existing")
	n2.waitReady(ctx)
	j.Release() // the init died before promoting
	// A learner refuses the lock's lease: promotion goes through the peers.
	_, err = Promote(ctx, n2.client(n2), j.ID, nil)
	require.ErrorContains(t, err, "the client reaches only a learner")
	_, err = n1.client(n1).Put(ctx, "kept", "yes")
	require.NoError(t, err)
	n2.stop()

	log := newLogger(t, "n2")
	p, err := n2.boot(ctx, []*node{n1}, []*node{n1}, log)
	require.NoError(t, err)
	assert.Equal(t, Restart, p.Action)
	assert.True(t, p.Promote, p.Reason)
	assert.Equal(t, j.ID, n2.status(ctx).Header.MemberId, "member ID after restart")
	requireOneCluster(ctx, t, n1, n2)

	// The bootstrap node restarts on its data too, never anew.
	n1.stop()
	p, err = n1.boot(ctx, []*node{n1}, []*node{n2}, newLogger(t, "n1"))
	require.NoError(t, err)
	assert.Equal(t, Restart, p.Action)
	assert.False(t, p.Promote)
	requireOneCluster(ctx, t, n1, n2)
	resp, err := n2.client(n2).Get(ctx, "kept")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	assert.Equal(t, "yes", string(resp.Kvs[0].Value))
}

// TestRemovedMemberRejoins: a member removed while it was down is told so
// by etcd on restart; the node moves its data aside and joins again.
func TestRemovedMemberRejoins(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 90*time.Second)
	c := newTestCluster(t)
	n1, n2, n3 := c.node("n1"), c.node("n2"), c.node("n3")
	all := []*node{n1, n2, n3}
	_, err := n1.boot(ctx, []*node{n1}, nil, newLogger(t, "n1"))
	require.NoError(t, err)
	for _, n := range []*node{n2, n3} {
		p, err := n.boot(ctx, []*node{n1}, others(n, all), newLogger(t, n.name))
		require.NoError(t, err)
		require.Equal(t, JoinAsLearner, p.Action)
	}
	requireOneCluster(ctx, t, all...)
	requireReplicated(ctx, t, "before", all...)
	oldID := n3.status(ctx).Header.MemberId

	n3.stop()
	_, err = n1.client(n1).MemberRemove(ctx, oldID)
	require.NoError(t, err)

	// Restarting on its data, etcd learns from its peers that the member
	// is gone, says so, and exits.
	p := Decide(n3.facts(ctx, []string{"n1"}, n1, n2))
	require.Equal(t, Restart, p.Action, p.Reason)
	n3.start(initialCluster(n1, n2, n3), p.State)
	n3.mu.Lock()
	proc, watch := n3.proc, n3.watch
	n3.mu.Unlock()
	select {
	case <-watch.Removed():
	case <-ctx.Done():
		t.Fatal("etcd did not report the removal")
	}
	select {
	case <-proc.Done():
		t.Logf("removed etcd exited: %s", proc.Status())
	case <-ctx.Done():
		t.Fatal("removed etcd did not exit")
	}

	log := newLogger(t, "n3")
	p, err = n3.boot(ctx, []*node{n1}, []*node{n1, n2}, log)
	require.NoError(t, err)
	require.Equal(t, RejoinAfterRemoval, p.Action)
	assert.NotEqual(t, oldID, n3.status(ctx).Header.MemberId)
	requireOneCluster(ctx, t, all...)
	requireReplicated(ctx, t, "after", all...)

	// The old data was moved into state/, not deleted.
	moved, err := filepath.Glob(filepath.Join(n3.stateDir, "removed-*", "member", "wal", "*.wal"))
	require.NoError(t, err)
	assert.NotEmpty(t, moved, "old WAL under %s", n3.stateDir)
}

// TestConcurrentJoins: two nodes join at once; the membership lock makes
// one join (add, start, promote) finish before the other adds.
func TestConcurrentJoins(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 90*time.Second)
	c := newTestCluster(t)
	n1, n2, n3 := c.node("n1"), c.node("n2"), c.node("n3")
	all := []*node{n1, n2, n3}
	_, err := n1.boot(ctx, []*node{n1}, nil, newLogger(t, "n1"))
	require.NoError(t, err)

	logs := map[string]*logger{}
	errs := make(chan error, 2)
	for _, n := range []*node{n2, n3} {
		log := newLogger(t, n.name)
		logs[n.name] = log
		go func() {
			p, err := n.boot(ctx, []*node{n1}, others(n, all), log)
			if err == nil && p.Action != JoinAsLearner {
				err = fmt.Errorf("%s: %s, want join as learner", n.name, p.Action)
			}
			errs <- err
		}()
	}
	for range 2 {
		require.NoError(t, <-errs)
	}
	requireOneCluster(ctx, t, all...)
	requireReplicated(ctx, t, "k", all...)

	// The events of both joins, in time order, never interleave: each
	// added-then-promoted pair is contiguous.
	type event struct {
		at   time.Time
		what string
	}
	var events []event
	for name, l := range logs {
		l.mu.Lock()
		for i, s := range l.lines {
			// Join's and Promote's own lines; the loop's summaries
			// ("added as learner", "promoted ... after") repeat them.
			switch {
			case strings.HasPrefix(s, "membership: added as learner"), strings.HasPrefix(s, "membership: promoted to a voting member after"):
			case strings.HasPrefix(s, "membership: added"):
				events = append(events, event{l.at[i], name + " added"})
			case strings.HasPrefix(s, "membership: promoted"):
				events = append(events, event{l.at[i], name + " promoted"})
			}
		}
		l.mu.Unlock()
	}
	slices.SortFunc(events, func(a, b event) int { return a.at.Compare(b.at) })
	var seq []string
	for _, e := range events {
		seq = append(seq, e.what)
	}
	require.Len(t, seq, 4, "%v", seq)
	first := strings.Fields(seq[0])[0]
	second := strings.Fields(seq[2])[0]
	assert.Equal(t, []string{first + " added", first + " promoted", second + " added", second + " promoted"}, seq)
	assert.NotEqual(t, first, second)
	assert.Contains(t, logs[second].all(), "waiting for the membership lock")
}

// TestSimultaneousFirstBoot: every node boots with no data at once, or
// two of the three initial members first (the third then finds the
// cluster running with its own slot unstarted, and bootstraps into it as a
// late initial member); the expected initial members bootstrap one
// cluster, the extra node waits and then joins. Repeated, since a race
// would show only sometimes. (A forming cluster without a quorum does not
// serve clients, so to the others it looks unreachable.)
func TestSimultaneousFirstBoot(t *testing.T) {
	t.Parallel()
	for round, staggered := range []bool{false, false, true, true} {
		t.Run(fmt.Sprintf("round %d staggered %v", round, staggered), func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, 90*time.Second)
			c := newTestCluster(t)
			n1, n2, n3, n4 := c.node("n1"), c.node("n2"), c.node("n3"), c.node("n4")
			all := []*node{n1, n2, n3, n4}
			expected := []*node{n1, n2, n3}
			logs := make([]*logger, len(all))
			plans := make([]Plan, len(all))
			errs := make([]error, len(all))
			var wg sync.WaitGroup
			for i, n := range all {
				logs[i] = newLogger(t, n.name)
				wg.Go(func() { plans[i], errs[i] = n.boot(ctx, expected, others(n, all), logs[i]) })
				if staggered && i == 1 {
					wg.Wait() // n1 and n2 run a cluster with a quorum
				}
			}
			wg.Wait()
			require.NoError(t, errors.Join(errs...))
			for i, n := range expected {
				assert.Equal(t, Bootstrap, plans[i].Action, "%s: %s", n.name, plans[i].Reason)
			}
			assert.Equal(t, JoinAsLearner, plans[3].Action, plans[3].Reason)
			if staggered {
				assert.Contains(t, logs[2].all(), "initial member n3 (", "n3 saw its own unstarted slot")
			}
			requireOneCluster(ctx, t, all...)
			requireReplicated(ctx, t, "k", all...)
		})
	}
}

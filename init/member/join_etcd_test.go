package member

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdbox/etcdbox/init/supervise"
	"github.com/etcdbox/etcdbox/internal/testenv"
)

// startAdvertising is start with another advertised client URL than the
// one etcd listens on: the member list then sends other nodes' probes to
// a port where nothing answers, while raft runs as usual between the
// peers: this node is cut off from the member, the leader is not.
func (n *node) startAdvertising(initial, state, clientURL string) {
	n.startWith(initial, state, clientURL, NewRemovedWatch())
}

// startWith is start with the advertised client URL and the removal watch
// given.
func (n *node) startWith(initial, state, clientURL string, watch *RemovedWatch) {
	t := n.c.t
	t.Helper()
	p := func(f string) string { return filepath.Join(n.pkiDir, f) }
	cmd := exec.Command(n.c.etcd,
		"--name="+n.name,
		"--data-dir="+n.dataDir,
		"--listen-client-urls="+n.ClientURL(),
		"--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+n.PeerURL(),
		"--initial-advertise-peer-urls="+n.PeerURL(),
		"--initial-cluster="+initial,
		"--initial-cluster-state="+state,
		"--initial-cluster-token="+n.c.token,
		"--client-cert-auth", "--trusted-ca-file="+p("ca.crt"), "--cert-file="+p("node.crt"), "--key-file="+p("node.key"),
		"--peer-client-cert-auth", "--peer-trusted-ca-file="+p("ca.crt"), "--peer-cert-file="+p("node.crt"), "--peer-key-file="+p("node.key"),
		"--heartbeat-interval=25", "--election-timeout=250",
		"--unsafe-no-fsync",
		"--logger=zap", "--log-outputs=stderr",
	)
	cmd.SysProcAttr = testenv.DieWithTest()
	log := &testenv.Buffer{}
	cmd.Stdout = log
	cmd.Stderr = io.MultiWriter(log, watch)
	proc, err := supervise.Start(cmd)
	require.NoError(t, err, "start etcd %s", n.name)
	n.mu.Lock()
	n.proc, n.log, n.watch = proc, log, watch
	n.mu.Unlock()
}

// memberIDs lists the cluster's members, linearizable, by name.
func memberIDs(ctx context.Context, t *testing.T, cli *clientv3.Client) map[string]uint64 {
	t.Helper()
	resp, err := cli.MemberList(ctx)
	require.NoError(t, err)
	ids := map[string]uint64{}
	for _, m := range resp.Members {
		ids[m.Name] = m.ID
	}
	return ids
}

// waitLeaderView waits until the leader's view (MetricsLeaderView) of
// member id is want.
// tick, when not nil, runs before each look (to keep the leadership
// where the test needs it).
func waitLeaderView(ctx context.Context, t *testing.T, cli *clientv3.Client, view LeaderView, id uint64, want bool, tick func()) {
	t.Helper()
	var last string
	for {
		if tick != nil {
			tick()
		}
		resp, err := cli.MemberList(ctx)
		if err == nil {
			ms := make([]Member, len(resp.Members))
			for i, m := range resp.Members {
				ms[i] = fromPB(m)
			}
			f := gatherRemoval(ctx, cli, ms, view, func(format string, args ...any) { last = fmt.Sprintf(format, args...) })
			if f.LeaderActive != nil && f.leaderReaches(Member{ID: id}) == want {
				return
			}
			last = fmt.Sprintf("leader %x, active %v", f.Leader, f.LeaderActive)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the leader's view of %x never became %t: %s", id, want, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestJoinRemovesOnlyWhatTheLeaderCannotReach: a node that lost its data
// joins again under its old name. Join never removes a member that runs,
// even one this node cannot reach but the leader can (a partition); it
// removes the old member once it is stopped and the leader says so.
func TestJoinRemovesOnlyWhatTheLeaderCannotReach(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	c := newTestCluster(t)
	n1, n2, n3 := c.node("n1"), c.node("n2"), c.node("n3")
	initial := initialCluster(n1, n2, n3)
	n1.start(initial, "new")
	// n2 advertises a client URL where nothing listens: this node's
	// probes of it fail, the leader's raft streams to it do not.
	n2.startAdvertising(initial, "new", "https://127.0.0.1:"+strconv.Itoa(testenv.FreePort(t)))
	n3.start(initial, "new")
	for _, n := range []*node{n1, n2, n3} {
		n.waitReady(ctx)
	}
	admin := n1.client(n1)
	before := memberIDs(ctx, t, admin)
	require.Len(t, before, 3)
	// Nobody reads the metrics of a leader behind a dead client URL: keep
	// n2 a follower, as a partitioned member would be.
	// An election under load can hand it back to n2 at any time, so each
	// wait for the leader's view moves it away again.
	n2admin := n2.client(n2)
	keepOff := func() {
		sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if st, err := admin.Status(sctx, n1.ClientURL()); err == nil && st.Leader == before["n2"] {
			if _, err := n2admin.MoveLeader(sctx, before["n1"]); err != nil {
				t.Logf("move the leadership away from n2: %v", err)
			}
		}
	}
	// The HTTP port it is given has nothing behind it, as for a member of
	// an image whose etcd serves HTTP on its client port: the view falls
	// back to the client URLs.
	nothing := testenv.FreePort(t)
	view := MetricsLeaderView(n1.tls, func(string) int { return nothing })
	waitLeaderView(ctx, t, admin, view, before["n2"], true, keepOff)

	for _, tt := range []struct{ name, why string }{
		{"n1", "answers at"}, // answers this node
		{"n2", "n2 ("},       // cut off from this node; the leader reaches it (or it leads)
	} {
		log := newLogger(t, "fresh "+tt.name)
		_, err := Join(ctx, n1.client(n1, n3), Request{
			Cluster: c.token, Name: tt.name, PeerURL: "https://127.0.0.1:1", Logf: log.Logf, LeaderView: view,
		})
		require.ErrorIs(t, err, ErrNameInUse, "join as running member %s", tt.name)
		assert.Contains(t, err.Error(), tt.why)
		assert.Contains(t, log.all(), "not removing "+tt.name)
		assert.Equal(t, before, memberIDs(ctx, t, admin), "a join as %s changed the members", tt.name)
	}

	// n3 stops and loses its data; once the leader no longer reaches it,
	// its new incarnation removes it and joins as a learner.
	n3.stop()
	waitLeaderView(ctx, t, admin, view, before["n3"], false, keepOff)
	require.NoError(t, os.RemoveAll(n3.dataDir))
	log := newLogger(t, "n3")
	j, err := Join(ctx, n3.client(n1, n2), Request{Cluster: c.token, Name: "n3", PeerURL: n3.PeerURL(), Logf: log.Logf, LeaderView: view})
	require.NoError(t, err)
	require.Len(t, j.Removed, 1)
	assert.Equal(t, before["n3"], j.Removed[0].ID)
	assert.Contains(t, log.all(), "reports it unreachable")
	assert.NotEqual(t, before["n3"], j.ID)
	n3.start(j.InitialCluster, "existing")
	_, err = j.Promote(ctx)
	require.NoError(t, err)
	n3.waitReady(ctx)

	after := memberIDs(ctx, t, admin)
	assert.Equal(t, before["n1"], after["n1"], "n1 kept")
	assert.Equal(t, before["n2"], after["n2"], "n2 kept")
	assert.Equal(t, j.ID, after["n3"])
	assert.Len(t, after, 3)
}

// TestJoinWithoutLeaderViewKeepsStartedMember: without a leader-side
// view, a stopped member that started once is not removed.
func TestJoinWithoutLeaderViewKeepsStartedMember(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c := newTestCluster(t)
	n1, n2, n3 := c.node("n1"), c.node("n2"), c.node("n3")
	initial := initialCluster(n1, n2, n3)
	for _, n := range []*node{n1, n2, n3} {
		n.start(initial, "new")
	}
	for _, n := range []*node{n1, n2, n3} {
		n.waitReady(ctx)
	}
	admin := n1.client(n1)
	before := memberIDs(ctx, t, admin)
	n3.stop()
	require.NoError(t, os.RemoveAll(n3.dataDir))
	log := newLogger(t, "n3")
	_, err := Join(ctx, n3.client(n1, n2), Request{Cluster: c.token, Name: "n3", PeerURL: n3.PeerURL(), Logf: log.Logf})
	require.ErrorIs(t, err, ErrUnsafeRemoval)
	assert.Contains(t, err.Error(), "no leader-side view")
	assert.Equal(t, before, memberIDs(ctx, t, admin))
}

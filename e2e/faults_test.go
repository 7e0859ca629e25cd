package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/internal/kvwriter"
	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/qemu"
	"github.com/etcdbox/etcdbox/qemu/cluster"
)

// cutOffLeader cuts the leader off the others with cut (a partition or
// a one-way cut), checks that status shows it partitioned and the others
// running, and waits until the majority has a leader of a higher term. It
// returns the node cut off.
func cutOffLeader(ctx context.Context, t *testing.T, c *cluster.Cluster, cut func(node string) error) string {
	t.Helper()
	node, term := leaderOf(ctx, t, c, "")
	require.NoError(t, cut(node))
	rows, err := c.Status(ctx)
	require.NoError(t, err)
	for _, r := range rows {
		want := cluster.StateRunning
		if r.Node.Name == node {
			want = cluster.StatePartitioned
		}
		assert.Equal(t, want, r.State, "status of %s", r.Node.Name)
	}
	waitFor(ctx, t, "a leader in the majority", func() (bool, string) {
		l, tm := leaderOf(ctx, t, c, node)
		return l != "" && l != node && tm > term, fmt.Sprintf("leader %q term %d (was %s at %d)", l, tm, node, term)
	})
	return node
}

// slowSync is the bound (one of etcd's histogram buckets) above which a
// WAL sync counts as slow: normal ones take milliseconds here, one on a
// disk limited to 1 request a second about a second or more.
const slowSync = 256 * time.Millisecond

// assertDiskLimits checks that status shows the limits of want on their
// nodes and none on the others.
func assertDiskLimits(ctx context.Context, t *testing.T, c *cluster.Cluster, want map[string]qemu.DiskLimit) {
	t.Helper()
	rows, err := c.Status(ctx)
	require.NoError(t, err)
	for _, r := range rows {
		assert.Equal(t, want[r.Node.Name], r.Disk, "disk limit of %s", r.Node.Name)
	}
}

// endFault ends a fault the writer ran across, once it is undone: it waits
// until the cluster is whole, stops the writer (which checks its history),
// says what the writer saw, and checks that no member changed (ids, from
// before the fault) and that one leads.
func endFault(ctx context.Context, t *testing.T, c *cluster.Cluster, w *kvwriter.Writer, ids map[string]uint64, what string) {
	t.Helper()
	require.NoError(t, c.WaitReady(ctx))
	res := stopWriter(t, w)
	t.Logf("writer across %s: %d acknowledged puts, longest gap %s", what, res.Acked, res.Gap.Round(10*time.Millisecond))
	assert.Equal(t, ids, memberIDs(ctx, t, c), "a member changed across %s", what)
	assertOneLeader(ctx, t, c)
}

// faultDeadline bounds one fault and the recovery after it.
const faultDeadline = 5 * time.Minute

// electionTimeout is etcd's default, which the nodes run with.
const electionTimeout = time.Second

// testFaults runs every fault verb of `etcdbox cluster` on the running
// 3-node cluster r, chained so that each also proves one of the member
// lifecycle's promises (issue 10) and checks what clients saw with the
// writer's history where writes run. It leaves the cluster whole, with
// three voting members; the cold start replaces r.Cluster.
func testFaults(ctx context.Context, t *testing.T, r *running) {
	c := r.Cluster
	ok := t.Run("kill the leader under writes, then start it as the same member", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, faultDeadline)
		defer cancel()
		ids := memberIDs(ctx, t, c)
		w := startWriter(t, c)
		leader, term := leaderOf(ctx, t, c, "")
		require.NotEmpty(t, leader)
		var peer string
		for _, n := range c.Nodes() {
			if n.Name != leader {
				peer = n.Name
				break
			}
		}
		require.NoError(t, c.Kill(ctx, leader))
		assert.Equal(t, cluster.StateStopped, c.VMState(ctx, leader, nil))
		took, err := c.WaitPeerLost(ctx, peer, ids[leader])
		require.NoError(t, err)
		t.Logf("kill of the leader %s to %s's first report of the loss: %s", leader, peer, took.Round(10*time.Millisecond))
		waitFor(ctx, t, "a new leader", func() (bool, string) {
			l, tm := leaderOf(ctx, t, c, leader)
			return l != "" && l != leader && tm > term, fmt.Sprintf("leader %q at term %d", l, tm)
		})
		start := time.Now()
		require.NoError(t, c.Start(ctx, leader))
		require.NoError(t, c.WaitReady(ctx, leader))
		t.Logf("start of the stopped node to a healthy voter: %s", time.Since(start).Round(100*time.Millisecond))
		res := stopWriter(t, w)
		t.Logf("failover (the longest gap between acknowledged writes): %s, %.1fx etcd's election timeout", res.Gap.Round(10*time.Millisecond), res.Gap.Seconds()/electionTimeout.Seconds())
		assert.Equal(t, ids, memberIDs(ctx, t, c), "the killed node came back as another member")
		// The restarted member serves once it reaches the leader; its
		// streams with the other follower may connect a moment later.
		waitFor(ctx, t, peer+" reports "+leader+" active again", func() (bool, string) {
			active, err := c.PeerActive(ctx, peer, ids[leader])
			return err == nil && active, fmt.Sprintf("active %v, err %v", active, err)
		})
	})
	require.True(t, ok, "the next faults need the cluster whole")

	ok = t.Run("pause the leader, then resume it", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, faultDeadline)
		defer cancel()
		leader, term := leaderOf(ctx, t, c, "")
		require.NoError(t, c.Pause(ctx, leader))
		assert.Equal(t, cluster.StatePaused, c.VMState(ctx, leader, nil))
		rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := client(t, c, leader).Get(rctx, "e2e/paused")
		rcancel()
		assert.Error(t, err, "the paused node answered")
		// The others miss its heartbeats and elect another leader.
		waitFor(ctx, t, "a new leader while "+leader+" is paused", func() (bool, string) {
			l, tm := leaderOf(ctx, t, c, leader)
			return l != "" && l != leader && tm > term, fmt.Sprintf("leader %q term %d (was %s at %d)", l, tm, leader, term)
		})
		require.NoError(t, c.Resume(ctx, leader))
		require.NoError(t, c.WaitReady(ctx))
		assertOneLeader(ctx, t, c)
	})
	require.True(t, ok, "the next faults need the cluster whole")

	ok = t.Run("partition the leader, then heal", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, faultDeadline)
		defer cancel()
		// The majority elects a leader of its own and writes.
		cut := cutOffLeader(ctx, t, c, func(n string) error { return c.Partition(ctx, n) })
		var other string
		for _, n := range c.Nodes() {
			if n.Name != cut {
				other = n.Name
			}
		}
		_, err := client(t, c, other).Put(ctx, "e2e/partition", "majority")
		require.NoError(t, err)
		// The minority answers no linearizable read.
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = client(t, c, cut).Get(rctx, "e2e/partition")
		rcancel()
		assert.Error(t, err, "the cut-off old leader answered a linearizable read")
		require.NoError(t, c.Heal(ctx))
		waitFor(ctx, t, cut+" answers a linearizable read after heal", func() (bool, string) {
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			defer rcancel()
			cl := dial(t, c, cut)
			defer cl.Close()
			r, err := cl.Get(rctx, "e2e/partition")
			if err != nil {
				return false, err.Error()
			}
			return len(r.Kvs) == 1 && string(r.Kvs[0].Value) == "majority", fmt.Sprintf("%v", r.Kvs)
		})
		assertOneLeader(ctx, t, c)
	})
	require.True(t, ok, "the next faults need the cluster whole")

	ok = t.Run("cut the leader off one way under writes (it is heard, it hears nothing), then heal", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, faultDeadline)
		defer cancel()
		ids := memberIDs(ctx, t, c)
		w := startWriter(t, c)
		// Its heartbeats may still reach the others for a while, but it
		// hears no quorum: it steps down, and the majority elects a
		// leader of its own.
		cut := cutOffLeader(ctx, t, c, func(n string) error { return c.CutOneWay(ctx, false, n) })
		waitAcked(ctx, t, w, time.Now(), "by the majority while "+cut+" is cut off one way")
		require.NoError(t, c.Heal(ctx))
		endFault(ctx, t, c, w, ids, "the one-way cut")
	})
	require.True(t, ok, "the next faults need the cluster whole")

	ok = t.Run("make the leader's links lossy and slow under writes, then heal", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, faultDeadline)
		defer cancel()
		ids := memberIDs(ctx, t, c)
		leader, _ := leaderOf(ctx, t, c, "")
		require.NotEmpty(t, leader)
		w := startWriter(t, c)
		// A fifth of its frames to and from the others lost, the rest
		// 50 ms late: TCP retransmits, heartbeats come late.
		require.NoError(t, c.Impair(ctx, 0.2, 50*time.Millisecond, leader))
		rows, err := c.Status(ctx)
		require.NoError(t, err)
		for _, r := range rows {
			want := ""
			if r.Node.Name == leader {
				want = "20% loss, 50ms delay"
			}
			assert.Equal(t, want, r.Links, "links of %s", r.Node.Name)
		}
		impaired := time.Now()
		waitAcked(ctx, t, w, impaired, "while "+leader+"'s links are impaired")
		// Long enough for several election timeouts' worth of late and
		// lost heartbeats.
		waitFor(ctx, t, "puts acknowledged for 10 s of the impairment", func() (bool, string) {
			return w.LastAck().Sub(impaired) >= 10*time.Second, "last at " + w.LastAck().Format(time.RFC3339Nano)
		})
		require.NoError(t, c.Heal(ctx))
		endFault(ctx, t, c, w, ids, "the impaired links")
	})
	require.True(t, ok, "the next faults need the cluster whole")

	ok = t.Run("slow the leader's disk under writes: it hands the leadership to a follower whose disk keeps up", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, faultDeadline)
		defer cancel()
		ids := memberIDs(ctx, t, c)
		leader, term := leaderFreeToHandOff(ctx, t, c, ids)
		require.NotEmpty(t, leader)
		vm, err := c.VM(leader)
		require.NoError(t, err)
		mark := vm.Mark()
		before, err := c.SlowWALSyncs(ctx, leader, slowSync)
		require.NoError(t, err)
		w := startWriter(t, c)
		// Ten requests a second: each WAL sync waits on its writes, a few
		// hundred ms (at 5 and under, syncs stall for seconds and the
		// followers elect another leader by themselves).
		slow := qemu.DiskLimit{IOPS: 10}
		require.NoError(t, c.LimitDisk(ctx, leader, slow))
		limited := time.Now()
		assertDiskLimits(ctx, t, c, map[string]qemu.DiskLimit{leader: slow})
		waitFor(ctx, t, leader+"'s etcd to report slow WAL syncs", func() (bool, string) {
			n, err := c.SlowWALSyncs(ctx, leader, slowSync)
			return err == nil && n >= before+3, fmt.Sprintf("%d over %s (%d before the limit), err %v", n, slowSync, before, err)
		})
		// etcd alone would keep its leader for as long as the disk is
		// slow (heartbeats go out; almost nothing commits). The node's
		// init sees its syncs and moves the leadership.
		var next string
		waitFor(ctx, t, "the leadership to leave "+leader, func() (bool, string) {
			l, tm := leaderOf(ctx, t, c, "")
			next = l
			return l != "" && l != leader && tm > term, fmt.Sprintf("leader %q term %d (was %s at %d)", l, tm, leader, term)
		})
		t.Logf("limit to %s leading: %s", next, time.Since(limited).Round(100*time.Millisecond))
		// The move was the node's: it says why and to whom.
		lctx, lcancel := context.WithTimeout(ctx, 30*time.Second)
		m, err := vm.WaitConsole(lctx, mark, "moving the leadership to "+next)
		lcancel()
		require.NoError(t, err, "%s's console:\n%s", leader, vm.ConsoleTail(30))
		t.Logf("%s: %s", leader, qemu.Printable(m.Line))
		waitAcked(ctx, t, w, time.Now(), "with "+next+" leading while "+leader+"'s disk is slow")
		require.NoError(t, c.LimitDisk(ctx, leader, qemu.DiskLimit{}))
		assertDiskLimits(ctx, t, c, nil)
		endFault(ctx, t, c, w, ids, "the slow disk")
	})
	require.True(t, ok, "the next faults need the cluster whole")

	ok = t.Run("a replaced disk under writes: the stale member goes, the node rejoins as a learner", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, faultDeadline)
		defer cancel()
		leader, _ := leaderOf(ctx, t, c, "")
		victim := "n3"
		if leader == victim {
			victim = "n2"
		}
		before := memberIDs(ctx, t, c)
		w := startWriter(t, c)
		require.NoError(t, c.Kill(ctx, victim))
		// A wipe needs a stopped node; it refuses a running one.
		require.ErrorIs(t, c.Wipe(ctx, leader), cluster.ErrNodeRunning)
		require.NoError(t, c.Wipe(ctx, victim))
		require.NoError(t, c.Start(ctx, victim))
		require.NoError(t, c.WaitReady(ctx, victim))
		res := stopWriter(t, w)
		t.Logf("writer across the replaced disk: %d acknowledged puts, longest gap %s", res.Acked, res.Gap.Round(10*time.Millisecond))
		vm, err := c.VM(victim)
		require.NoError(t, err)
		console := vm.Console()
		assert.Contains(t, console, "is blank: first boot", "DATA was not formatted anew")
		assert.Contains(t, console, "formatted true")
		assert.Contains(t, console, "removing stale member with this node's name or peer URL "+victim)
		assert.Contains(t, console, "reports it unreachable", "the stale member was removed without the leader's word")
		assert.Contains(t, console, "as learner")
		// WaitReady saw the member list; the console line can trail it.
		_, err = vm.WaitConsole(ctx, 0, "promoted to a voting member")
		assert.NoError(t, err, "%s says it was promoted", victim)
		assert.NotContains(t, console, "bootstrapping member", "the wiped node started etcd to form a cluster")
		after := memberIDs(ctx, t, c)
		assert.NotEqual(t, before[victim], after[victim], "the wiped node runs with its old member ID")
		assert.NotContains(t, after, "", "a member that never started is left")
	})
	require.True(t, ok, "the next faults need the cluster whole")

	require.True(t, testBootOrders(ctx, t, c), "the next faults need the cluster whole")

	t.Run("wipe n1, renumber, and cold-start all: one cluster, n1 a new member, new addresses", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 2*faultDeadline)
		defer cancel()
		keys := putKeys(ctx, t, c, "e2e/cold/", 50)
		before := memberIDs(ctx, t, c)
		clusterID := clusterIDOf(ctx, t, c, "n2")
		require.NoError(t, c.Kill(ctx, "n1"))
		require.NoError(t, c.Wipe(ctx, "n1"))
		next, err := c.Renumber(ctx)
		require.NoError(t, err)
		require.Len(t, next, 3)
		require.NoError(t, c.Down(ctx, 90*time.Second))
		start := time.Now()
		up, err := cluster.Up(ctx, cluster.Config{Dir: c.Dir(), Log: t.Logf}, 0)
		if up != nil {
			r.Cluster, c = up, up
		}
		require.NoError(t, err)
		t.Logf("cold start of three nodes (one wiped, all renumbered) to three voters: %s", time.Since(start).Round(time.Second))
		for _, n := range c.Nodes() {
			assert.Equal(t, next[n.Name], n.IP, "%s did not take its new address", n.Name)
		}
		assert.Equal(t, clusterID, clusterIDOf(ctx, t, c, "n1"), "n1 is in another cluster")
		after := memberIDs(ctx, t, c)
		assert.NotEqual(t, before["n1"], after["n1"], "the wiped n1 runs with its old member ID")
		assert.Equal(t, before["n2"], after["n2"])
		assert.Equal(t, before["n3"], after["n3"])
		vm, err := c.VM("n1")
		require.NoError(t, err)
		assert.NotContains(t, vm.Console(), "bootstrapping member", "the wiped n1 bootstrapped")
		// The member list (which Up waits on) can show n1 a voter
		// before n1's console says so.
		_, err = vm.WaitConsole(ctx, 0, "promoted to a voting member")
		assert.NoError(t, err, "n1 says it was promoted")
		requireKeys(ctx, t, c, keys)
		checkOneCluster(ctx, t, c, []string{"n1", "n2", "n3"})
	})
}

// testTwoWiped wipes two of three disks and cold-starts the nodes, the
// third powered off at first: no cluster forms, the wiped nodes wait and
// say the quorum is lost, and the third's data is left as it was. The
// cluster cannot serve afterwards (recovery is an operator's explicit
// act), so this is the last step on it.
func testTwoWiped(ctx context.Context, t *testing.T, c *cluster.Cluster) {
	ctx, cancel := context.WithTimeout(ctx, 2*faultDeadline)
	defer cancel()
	ids := memberIDs(ctx, t, c)
	clusterID := clusterIDOf(ctx, t, c, "n3")
	hash := hashKV(ctx, t, c, "n3")
	require.NoError(t, c.Kill(ctx, "n1"))
	require.NoError(t, c.Kill(ctx, "n2"))
	// The survivor powers off cleanly, by its ACPI power button.
	n3, err := c.VM("n3")
	require.NoError(t, err)
	from := n3.Mark()
	require.NoError(t, c.Poweroff(ctx, "n3", 90*time.Second))
	assert.Contains(t, n3.Console()[from:], "etcdbox: etcd stopped", "n3 did not stop etcd cleanly")
	require.NoError(t, c.Wipe(ctx, "n1"))
	require.NoError(t, c.Wipe(ctx, "n2"))
	require.NoError(t, c.Start(ctx, "n1", "n2"))
	wiped := []string{"n1", "n2"}
	for _, name := range wiped {
		vm, err := c.VM(name)
		require.NoError(t, err)
		m, err := vm.WaitConsole(ctx, 0, "etcdbox: membership: wait: ")
		require.NoError(t, err, "%s console:\n%s", name, vm.ConsoleTail(40))
		t.Logf("%s with n3 off: %s", name, m.Line)
	}
	// A reset of a waiting node: it boots again and waits again.
	n1, err := c.VM("n1")
	require.NoError(t, err)
	mark := n1.Mark()
	require.NoError(t, c.Reset(ctx, "n1"))
	m, err := n1.WaitConsole(ctx, mark, "Linux version")
	require.NoError(t, err, "n1 did not reboot after reset:\n%s", n1.ConsoleTail(40))
	_, err = n1.WaitConsole(ctx, m.Next, "etcdbox: membership: wait: ")
	require.NoError(t, err, "n1 console after reset:\n%s", n1.ConsoleTail(40))
	marks := map[string]int64{}
	for _, name := range wiped {
		vm, err := c.VM(name)
		require.NoError(t, err)
		marks[name] = vm.Mark()
	}
	require.NoError(t, c.Start(ctx, "n3"))
	n3, err = c.VM("n3")
	require.NoError(t, err)
	_, err = n3.WaitConsole(ctx, 0, "etcdbox: etcd: restarting member n3 with its data")
	require.NoError(t, err, "n3 console:\n%s", n3.ConsoleTail(40))
	for _, name := range wiped {
		vm, err := c.VM(name)
		require.NoError(t, err)
		m, err := vm.WaitConsole(ctx, marks[name], "quorum lost")
		require.NoError(t, err, "%s console:\n%s", name, vm.ConsoleTail(40))
		t.Logf("%s with n3 up: %s", name, m.Line)
		assert.Contains(t, m.Line, "n3 holds data of this cluster")
		assert.NotContains(t, vm.Console(), "bootstrapping member", "%s formed a cluster", name)
		assert.NotContains(t, vm.Console(), "etcdbox: etcd ready", "%s started etcd", name)
	}
	// The survivor keeps its data: etcd restarted it as the same member
	// of the same cluster (its log says so; without a quorum etcd serves
	// no client request, not even a status), and once it is powered off
	// its database hashes as it did before the fault.
	restart, err := n3.WaitConsole(ctx, 0, `"msg":"restarting local member"`)
	require.NoError(t, err)
	assert.Contains(t, restart.Line, fmt.Sprintf(`"cluster-id":"%x"`, clusterID), "n3 restarted in another cluster")
	assert.Contains(t, restart.Line, fmt.Sprintf(`"local-member-id":"%x"`, ids["n3"]), "n3 restarted as another member")
	assert.NotContains(t, n3.Console(), "moved the removed member's data", "n3 moved its data aside")
	require.NoError(t, c.Poweroff(ctx, "n3", 90*time.Second))
	node, _ := c.Node("n3")
	got := hashDB(t, memberDB(t, filepath.Join(node.Dir, "disk.qcow2")))
	t.Logf("n3 offline: hash %d at revision %d", got.Hash, got.Revision)
	assert.Equal(t, hash, got.Hash, "n3's data changed")
}

// testRemove scales the cluster down by node name under writes: with
// `cluster remove`, which decommissions it through its node API, or with
// `etcdbox members remove` and then `cluster remove` of the stopped,
// member-less node. The cluster then reports one member fewer and the
// node's directory is gone.
func testRemove(ctx context.Context, t *testing.T, c *cluster.Cluster, name string, membersRemove bool) {
	w := startWriter(t, c)
	n, ok := c.Node(name)
	require.True(t, ok, "no node %s", name)
	before := len(memberIDs(ctx, t, c))
	if membersRemove {
		out, err := exec.CommandContext(ctx, testenv.Bin(t, "etcdbox"), "members", "remove", name, "--dir", c.Dir()).CombinedOutput()
		require.NoError(t, err, "etcdbox members remove %s: %s", name, out)
		t.Logf("etcdbox members remove %s: %s", name, strings.TrimSpace(string(out)))
		require.NoError(t, c.Kill(ctx, name))
	}
	require.NoError(t, c.Remove(ctx, name))
	_, err := os.Stat(n.Dir)
	assert.True(t, os.IsNotExist(err), "%s's directory %s is still there (%v)", name, n.Dir, err)
	_, still := c.Node(name)
	assert.False(t, still, "%s is still in the cluster's state", name)
	ids := memberIDs(ctx, t, c)
	assert.Len(t, ids, before-1, "members after removing %s: %v", name, ids)
	assert.NotContains(t, ids, name)
	rctx, cancel := context.WithTimeout(ctx, faultDeadline)
	defer cancel()
	require.NoError(t, c.WaitReady(rctx))
	res := stopWriter(t, w)
	t.Logf("writer across the removal of %s: %d acknowledged puts, longest gap %s", name, res.Acked, res.Gap.Round(10*time.Millisecond))
}

// handOffLine is in the console line of a node that moved the leadership
// off its slow disk (init/handoff.go).
const handOffLine = "; moving the leadership to "

// leaderFreeToHandOff returns the leader and the term, once the leader is
// a node that has not handed the leadership off yet. A node that did, in
// an earlier step (a slow sync under this machine's load: session 39's
// second full run saw n3 hand off at a mean of 57 ms while n4 joined),
// keeps the leadership for the hand-over's cooldown (5 min, against
// flapping), and the slow-disk step would then wait for etcd's own
// election instead of the node's move. So the leadership moves first to
// a member whose node has not handed off.
func leaderFreeToHandOff(ctx context.Context, t *testing.T, c *cluster.Cluster, ids map[string]uint64) (string, uint64) {
	t.Helper()
	leader, term := leaderOf(ctx, t, c, "")
	handed := func(name string) bool {
		vm, err := c.VM(name)
		return err == nil && strings.Contains(vm.Console(), handOffLine)
	}
	if leader == "" || !handed(leader) {
		return leader, term
	}
	for _, n := range c.Nodes() {
		if n.Name == leader || ids[n.Name] == 0 || handed(n.Name) {
			continue
		}
		cl := dial(t, c, leader)
		mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := cl.MoveLeader(mctx, ids[n.Name])
		cancel()
		cl.Close()
		if err != nil {
			t.Logf("move the leadership from %s to %s: %v", leader, n.Name, err)
			continue
		}
		t.Logf("%s handed the leadership off earlier in this run, and its cooldown holds the next: the leadership moved to %s first", leader, n.Name)
		waitFor(ctx, t, n.Name+" to lead", func() (bool, string) {
			leader, term = leaderOf(ctx, t, c, "")
			return leader == n.Name, fmt.Sprintf("leader %q at term %d", leader, term)
		})
		return leader, term
	}
	t.Logf("every member's node handed the leadership off earlier in this run; the step goes on with %s leading", leader)
	return leader, term
}

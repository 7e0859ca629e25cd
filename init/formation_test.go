package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/seed"
)

// The fast tier of the formation handshake (DESIGN §5, issue 10): real
// init processes whose data dirs are wiped (the whole DATA: etcd and
// state/) between boots, in every boot order. No second cluster ID and no
// reused member ID may ever appear.

// orders returns every order of nodes.
func orders(nodes []*cnode) [][]*cnode {
	if len(nodes) <= 1 {
		return [][]*cnode{nodes}
	}
	var out [][]*cnode
	for i, first := range nodes {
		rest := append(append([]*cnode{}, nodes[:i]...), nodes[i+1:]...)
		for _, o := range orders(rest) {
			out = append(out, append([]*cnode{first}, o...))
		}
	}
	return out
}

func nodeNames(nodes []*cnode) string {
	s := make([]string, len(nodes))
	for i, n := range nodes {
		s[i] = n.name
	}
	return strings.Join(s, ",")
}

// stopAll stops the nodes at once and returns the length of each log.
func stopAll(nodes ...*cnode) map[string]int {
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(n.stop)
	}
	wg.Wait()
	from := map[string]int{}
	for _, n := range nodes {
		from[n.name] = len(n.log())
	}
	return from
}

// wipe deletes n's whole DATA: etcd's data and state/.
func (n *cnode) wipe() {
	require.NoError(n.t, os.RemoveAll(filepath.Join(n.dir, "data")))
}

// bootInOrder starts the nodes one after the other, each once the one
// before it has made its first membership decision.
func bootInOrder(from map[string]int, nodes ...*cnode) {
	for _, n := range nodes {
		n.start()
		n.waitLog(from[n.name], "membership: ", 60*time.Second)
	}
}

// ids is what a node's etcd says about itself.
type ids struct {
	member, cluster uint64
	rev             int64
	hash            uint32
}

// ids asks n's own etcd (which serves clients only once the cluster has
// a quorum).
func (c *cluster) ids(t *testing.T, n *cnode) ids {
	t.Helper()
	cli := c.client(n)
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		st, err := cli.Status(ctx, n.endpoint())
		var h *clientv3.HashKVResponse
		if err == nil {
			h, err = cli.HashKV(ctx, n.endpoint(), 0)
		}
		cancel()
		if err == nil {
			return ids{member: st.Header.MemberId, cluster: st.Header.ClusterId, rev: h.Header.Revision, hash: h.Hash}
		}
		require.True(t, time.Now().Before(deadline), "status of %s: %v", n.name, err)
		time.Sleep(200 * time.Millisecond)
	}
}

// book keeps every member and cluster ID seen.
type book struct {
	cluster uint64
	members map[uint64]string // ID -> node name
	current map[string]uint64 // node name -> its current ID
}

// see checks the nodes' IDs against the book: one cluster ID ever; a
// node keeps its member ID unless it was wiped, and then gets one never
// seen before.
func (b *book) see(t *testing.T, c *cluster, wiped map[string]bool, nodes ...*cnode) {
	t.Helper()
	for _, n := range nodes {
		got := c.ids(t, n)
		if b.cluster == 0 {
			b.cluster = got.cluster
		}
		assert.Equal(t, fmt.Sprintf("%x", b.cluster), fmt.Sprintf("%x", got.cluster), "cluster ID of %s: a second cluster", n.name)
		old, known := b.current[n.name]
		switch {
		case !known:
		case wiped[n.name]:
			_, seen := b.members[got.member]
			assert.False(t, seen, "wiped %s reuses member ID %x (of %s)", n.name, got.member, b.members[got.member])
		default:
			assert.Equal(t, fmt.Sprintf("%x", old), fmt.Sprintf("%x", got.member), "member ID of %s, which kept its data", n.name)
		}
		b.members[got.member] = n.name
		b.current[n.name] = got.member
	}
}

// requireKeys reads every key through each node, linearizably.
func (c *cluster) requireKeys(t *testing.T, keys map[string]string, nodes ...*cnode) {
	t.Helper()
	for _, n := range nodes {
		cli := c.client(n)
		for k, v := range keys {
			var resp *clientv3.GetResponse
			deadline := time.Now().Add(30 * time.Second)
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				var err error
				resp, err = cli.Get(ctx, k)
				cancel()
				if err == nil {
					break
				}
				require.True(t, time.Now().Before(deadline), "get %s through %s: %v", k, n.name, err)
				time.Sleep(200 * time.Millisecond)
			}
			require.Len(t, resp.Kvs, 1, "%s through %s", k, n.name)
			assert.Equal(t, v, string(resp.Kvs[0].Value), "%s through %s", k, n.name)
		}
	}
}

// formThree starts three expected initial members at once and waits for
// their cluster.
func formThree(t *testing.T, name string) (*cluster, []*cnode) {
	c := newCluster(t, "n1", "n2", "n3")
	// No scheduled backups: their election writes to etcd whenever its
	// holder stops (it resigns), and these tests compare a member's
	// revision and hash across stops.
	c.backup = seed.Backup{Interval: "0"}
	all := []*cnode{c.nodes["n1"], c.nodes["n2"], c.nodes["n3"]}
	for _, n := range all {
		c.writeSeed(n, name, 3, "n1", "n2", "n3")
	}
	for _, n := range all {
		n.start()
	}
	for _, n := range all {
		n.waitLog(0, "membership: bootstrap: ", 60*time.Second)
		n.waitLog(0, "is a voting member", 60*time.Second)
	}
	c.voters(c.client(all...), 3, 30*time.Second)
	return c, all
}

// TestContainerRestartEveryOrder: in every boot order, a cold start
// with every disk keeps the cluster, its member IDs and every key.
func TestContainerRestartEveryOrder(t *testing.T) {
	t.Parallel()
	everyOrder(t, "cold", false)
}

// TestContainerOneWiped: in every boot order, a node whose disk was wiped
// (n3) never bootstraps: it joins as a learner with a new member ID, is
// promoted, and holds every key written before. n1 and n2, both with
// their data, play the same part, so the orders are those with n1 before
// n2: the wiped node boots first, between them, and last.
func TestContainerOneWiped(t *testing.T) {
	t.Parallel()
	everyOrder(t, "wipe", true)
}

// everyOrderOf returns every boot order of all, or with wipe (n3 wiped,
// n1 and n2 alike) those where n1 boots before n2.
func everyOrderOf(all []*cnode, wipe bool) [][]*cnode {
	out := orders(all)
	if wipe {
		out = slices.DeleteFunc(out, func(o []*cnode) bool {
			return slices.IndexFunc(o, func(n *cnode) bool { return n.name == "n1" }) > slices.IndexFunc(o, func(n *cnode) bool { return n.name == "n2" })
		})
	}
	return out
}

// everyOrder stops the three nodes of a new cluster and boots them in
// every order, wiping n3 before each boot when wipe is set, and checks
// the IDs and keys after each.
func everyOrder(t *testing.T, name string, wipe bool) {
	c, all := formThree(t, name)
	n3 := c.nodes["n3"]
	b := &book{members: map[uint64]string{}, current: map[string]uint64{}}
	b.see(t, c, nil, all...)
	keys := map[string]string{}
	put := func(round int) {
		k, v := fmt.Sprintf("k%d", round), fmt.Sprintf("v%d", round)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := c.client(all...).Put(ctx, k, v)
		require.NoError(t, err)
		keys[k] = v
	}
	put(0)
	for round, order := range everyOrderOf(all, wipe) {
		wiped := wipe
		t.Run(fmt.Sprintf("boot %s, n3 wiped %v", nodeNames(order), wiped), func(t *testing.T) {
			from := stopAll(all...)
			if wiped {
				n3.wipe()
			}
			bootInOrder(from, order...)
			if wiped {
				n3.waitLog(from["n3"], "promoted to a voting member", 120*time.Second)
				assert.NotContains(t, n3.log()[from["n3"]:], "bootstrapping member", "a wiped node never bootstraps into a formed cluster")
			}
			for _, n := range all {
				n.waitLog(from[n.name], "is a voting member", 120*time.Second)
			}
			c.voters(c.client(all...), 3, 60*time.Second)
			b.see(t, c, map[string]bool{"n3": wiped}, all...)
			c.requireKeys(t, keys, all...)
			put(round + 1)
		})
		if t.Failed() {
			return
		}
	}
}

// TestContainerTwoWiped: two wiped disks of three are a lost quorum. In
// every boot order the wiped nodes wait and say so, naming the node that
// holds data; they start no etcd, and the third keeps its data: once the
// old disks are back, n1 has its member and cluster IDs, revision and
// hash from before. (Without a quorum etcd serves no client, so n1 is
// measured then.)
func TestContainerTwoWiped(t *testing.T) {
	t.Parallel()
	c, all := formThree(t, "lost")
	n1, n2, n3 := c.nodes["n1"], c.nodes["n2"], c.nodes["n3"]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err := c.client(all...).Put(ctx, "kept", "yes")
	cancel()
	require.NoError(t, err)
	before := c.ids(t, n1)
	for i, order := range orders(all) {
		t.Run("boot "+nodeNames(order), func(t *testing.T) {
			from := stopAll(all...)
			// The disks of n2 and n3 are lost; keep them to put back
			// afterwards, as if the old disks came back.
			for _, n := range []*cnode{n2, n3} {
				require.NoError(t, os.Rename(filepath.Join(n.dir, "data"), filepath.Join(n.dir, fmt.Sprintf("saved-%d", i))))
			}
			bootInOrder(from, order...)
			n1.waitLog(from["n1"], "membership: restart", 60*time.Second)
			for _, n := range []*cnode{n2, n3} {
				n.waitLog(from[n.name], "quorum lost", 90*time.Second)
				assert.Contains(t, n.log()[from[n.name]:], "n1 holds data of this cluster")
			}
			stopAll(all...)
			for _, n := range []*cnode{n2, n3} {
				_, err := os.Stat(filepath.Join(n.dir, "data", "etcd", "member"))
				assert.True(t, os.IsNotExist(err), "%s started an etcd member: %v", n.name, err)
				assert.NotContains(t, n.log()[from[n.name]:], "bootstrapping member", "%s", n.name)
				require.NoError(t, os.RemoveAll(filepath.Join(n.dir, "data")))
				require.NoError(t, os.Rename(filepath.Join(n.dir, fmt.Sprintf("saved-%d", i)), filepath.Join(n.dir, "data")))
			}
		})
		if t.Failed() {
			return
		}
	}
	// With the old disks back, the cluster is whole again.
	from := stopAll(all...)
	for _, n := range all {
		n.start()
	}
	for _, n := range all {
		n.waitLog(from[n.name], "is a voting member", 120*time.Second)
	}
	c.voters(c.client(all...), 3, 60*time.Second)
	c.requireKeys(t, map[string]string{"kept": "yes"}, all...)
	assert.Equal(t, before, c.ids(t, n1), "n1's member, cluster, revision and hash")
	assert.Equal(t, before.cluster, c.ids(t, n2).cluster)
}

// TestContainerBootstrapWithout: an expected initial member that never
// boots holds up the first formation until the operator says to form
// without it; it later joins as a learner.
func TestContainerBootstrapWithout(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "n1", "n2", "n3")
	n1, n2, n3 := c.nodes["n1"], c.nodes["n2"], c.nodes["n3"]
	for _, n := range []*cnode{n1, n2, n3} {
		c.writeSeed(n, "without", 3, "n1", "n2", "n3")
	}
	n1.start()
	n2.start()
	for _, n := range []*cnode{n1, n2} {
		n.waitLog(0, "waiting for n3 (", 60*time.Second)
		assert.Contains(t, n.log(), "etcdbox bootstrap --without")
		_, err := os.Stat(filepath.Join(n.dir, "data", "etcd", "member"))
		assert.True(t, os.IsNotExist(err), "%s started etcd before the operator's word", n.name)
	}
	for _, n := range []*cnode{n1, n2} {
		api, err := nodeapi.NewClient(fmt.Sprintf("https://127.0.0.1:%d", n.apiPort), c.pkiDir)
		require.NoError(t, err)
		f, err := api.FormWithout(context.Background(), []string{"n3"})
		require.NoError(t, err)
		assert.Equal(t, []string{"n3"}, f.Without)
		_, err = api.FormWithout(context.Background(), []string{"n9"})
		require.ErrorContains(t, err, "not an expected initial member")
		api.Close()
	}
	for _, n := range []*cnode{n1, n2} {
		// The first to decide forms without n3; the other may find it
		// started already and bootstrap into its slot of that formation.
		n.waitLog(0, "membership: bootstrap: ", 60*time.Second)
		n.waitLog(0, "is a voting member", 60*time.Second)
	}
	assert.True(t, strings.Contains(n1.log(), "without n3, as the operator asked") || strings.Contains(n2.log(), "without n3, as the operator asked"))
	c.voters(c.client(n1, n2), 2, 30*time.Second)
	n3.start()
	n3.waitLog(0, "membership: join as learner", 60*time.Second)
	n3.waitLog(0, "promoted to a voting member", 90*time.Second)
	c.voters(c.client(n1, n2, n3), 3, 30*time.Second)
	b := &book{members: map[uint64]string{}, current: map[string]uint64{}}
	b.see(t, c, nil, n1, n2, n3)
}

// TestContainerSingleNodeWiped: a single-node cluster whose disk is wiped
// starts anew, with a new cluster ID clients can see; one that lost only
// its etcd dir (state/ kept) never bootstraps again.
func TestContainerSingleNodeWiped(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "s1")
	s1 := c.nodes["s1"]
	c.writeSeed(s1, "solo", 1, "s1")
	s1.start()
	s1.waitLog(0, "is a voting member", 60*time.Second)
	first := c.ids(t, s1)

	from := stopAll(s1)
	s1.wipe()
	s1.start()
	s1.waitLog(from["s1"], "is a voting member", 60*time.Second)
	second := c.ids(t, s1)
	assert.NotEqual(t, first.cluster, second.cluster, "a wiped single node is a new cluster")
	assert.NotEqual(t, first.member, second.member)

	from = stopAll(s1)
	require.NoError(t, os.RemoveAll(filepath.Join(s1.dir, "data", "etcd")))
	s1.start()
	s1.waitLog(from["s1"], "never bootstraps again", 60*time.Second)
	_, err := os.Stat(filepath.Join(s1.dir, "data", "etcd", "member"))
	assert.True(t, os.IsNotExist(err), "it started no etcd member")
}

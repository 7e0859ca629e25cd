package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/qemu/cluster"
)

// testStaggeredStart powers all three nodes of c off, by their ACPI power
// buttons, and boots them one at a time: n3 alone, which restarts its
// member with its data and serves nothing without a quorum; then n1, and
// the two serve and take writes; then n2, last, which catches up on the
// writes it missed. The same cluster and members throughout, and every
// write acknowledged before and during the staggered start reads back
// through every node. (Every order of three nodes, with and without wiped
// data, runs in the container tier: init's TestContainerRestartEveryOrder;
// this is the order on the real boot path.)
func testStaggeredStart(ctx context.Context, t *testing.T, c *cluster.Cluster) {
	ctx, cancel := context.WithTimeout(ctx, 2*faultDeadline)
	defer cancel()
	keys := putKeys(ctx, t, c, "e2e/staggered/before/", 20)
	before := memberIDs(ctx, t, c)
	clusterID := clusterIDOf(ctx, t, c, "n1")
	for _, name := range []string{"n1", "n2", "n3"} {
		require.NoError(t, c.Poweroff(ctx, name, 90*time.Second))
		assert.Equal(t, cluster.StateStopped, c.VMState(ctx, name, nil))
	}

	start := time.Now()
	require.NoError(t, c.Start(ctx, "n3"))
	n3, err := c.VM("n3")
	require.NoError(t, err)
	_, err = n3.WaitConsole(ctx, 0, "etcdbox: etcd: restarting member n3 with its data")
	require.NoError(t, err, "n3 console:\n%s", n3.ConsoleTail(40))
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = client(t, c, "n3").Get(rctx, "e2e/staggered/before/00")
	rcancel()
	assert.Error(t, err, "n3 alone answered a linearizable read")

	require.NoError(t, c.Start(ctx, "n1"))
	serves := func(names ...string) func() (bool, string) {
		return func() (bool, string) {
			for _, name := range names {
				rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
				cl := dial(t, c, name)
				_, err := cl.Get(rctx, "e2e/staggered/before/00")
				cl.Close()
				rcancel()
				if err != nil {
					return false, fmt.Sprintf("%s: %v", name, err)
				}
			}
			return true, ""
		}
	}
	waitFor(ctx, t, "n3 and n1 serve linearizable reads", serves("n3", "n1"))
	t.Logf("n3, then n1, to a quorum that serves: %s", time.Since(start).Round(time.Second))
	// Writes while n2 is off, through n1: n2 must catch up on them.
	cl := client(t, c, "n1")
	for i := range 20 {
		k, v := fmt.Sprintf("e2e/staggered/during/%02d", i), fmt.Sprintf("v%d", i)
		_, err := cl.Put(ctx, k, v)
		require.NoError(t, err)
		keys[k] = v
	}

	late := time.Now()
	require.NoError(t, c.Start(ctx, "n2"))
	require.NoError(t, c.WaitReady(ctx, "n2"))
	t.Logf("n2, started last, to a healthy voter: %s", time.Since(late).Round(time.Second))
	assert.Equal(t, before, memberIDs(ctx, t, c), "the members changed")
	for _, name := range []string{"n1", "n2", "n3"} {
		assert.Equal(t, clusterID, clusterIDOf(ctx, t, c, name), "%s is in another cluster", name)
		vm, err := c.VM(name)
		require.NoError(t, err)
		assert.NotContains(t, vm.Console(), "bootstrapping member", "%s bootstrapped", name)
	}
	requireKeys(ctx, t, c, keys)
	checkOneCluster(ctx, t, c, []string{"n1", "n2", "n3"})
}

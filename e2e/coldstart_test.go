package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/qemu/cluster"
)

// A bootOrder is how a full power-off ends: first boots alone; then
// second, and the two form a quorum; then last, which starts together
// with second unless late says it starts only once the other two serve
// and have taken writes it must catch up on.
type bootOrder struct {
	first, second, last string
	late                bool
	// cut powers the nodes off by a power cut (QMP quit) instead of
	// their ACPI power buttons.
	cut bool
}

func (o bootOrder) String() string {
	how := "power off all"
	if o.cut {
		how = "cut the power of all"
	}
	if o.late {
		return fmt.Sprintf("%s, boot %s alone, then %s, then %s last", how, o.first, o.second, o.last)
	}
	return fmt.Sprintf("%s, boot %s alone, then %s and %s", how, o.first, o.second, o.last)
}

// testBootOrder takes the 3-node cluster c down and boots it in order o.
// The node that boots alone restarts its member with its data and serves
// nothing without a quorum; once a second node is up, the two serve and
// take writes; the last catches up. The same cluster and members
// throughout, no node ever bootstraps, and every write acknowledged before
// and during the start reads back through every node. (Every order of
// three nodes, with and without wiped data, runs in the container tier:
// init's TestContainerRestartEveryOrder; these are orders on the real boot
// path.)
func testBootOrder(ctx context.Context, t *testing.T, c *cluster.Cluster, o bootOrder) {
	ctx, cancel := context.WithTimeout(ctx, 2*faultDeadline)
	defer cancel()
	prefix := "e2e/order-" + o.first + "-first/"
	keys := putKeys(ctx, t, c, prefix+"before/", 10)
	before := memberIDs(ctx, t, c)
	clusterID := clusterIDOf(ctx, t, c, o.first)
	for _, name := range []string{"n1", "n2", "n3"} {
		if o.cut {
			require.NoError(t, c.Kill(ctx, name))
		} else {
			require.NoError(t, c.Poweroff(ctx, name, 90*time.Second))
		}
		assert.Equal(t, cluster.StateStopped, c.VMState(ctx, name, nil))
	}

	start := time.Now()
	require.NoError(t, c.Start(ctx, o.first))
	vm, err := c.VM(o.first)
	require.NoError(t, err)
	_, err = vm.WaitConsole(ctx, 0, "etcdbox: etcd: restarting member "+o.first+" with its data")
	require.NoError(t, err, "%s console:\n%s", o.first, vm.ConsoleTail(40))
	rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
	_, err = client(t, c, o.first).Get(rctx, prefix+"before/00")
	rcancel()
	assert.Error(t, err, "%s alone answered a linearizable read", o.first)

	if !o.late {
		require.NoError(t, c.Start(ctx, o.second, o.last))
		require.NoError(t, c.WaitReady(ctx, o.second, o.last))
		t.Logf("%s: %s alone, then the other two, to three voters: %s", o, o.first, time.Since(start).Round(time.Second))
	} else {
		require.NoError(t, c.Start(ctx, o.second))
		waitFor(ctx, t, o.first+" and "+o.second+" serve linearizable reads", func() (bool, string) {
			for _, name := range []string{o.first, o.second} {
				rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
				cl := dial(t, c, name)
				_, err := cl.Get(rctx, prefix+"before/00")
				cl.Close()
				rcancel()
				if err != nil {
					return false, fmt.Sprintf("%s: %v", name, err)
				}
			}
			return true, ""
		})
		t.Logf("%s: %s, then %s, to a quorum that serves: %s", o, o.first, o.second, time.Since(start).Round(time.Second))
		// Writes while the last node is off: it must catch up on them.
		cl := client(t, c, o.second)
		for i := range 10 {
			k, v := fmt.Sprintf("%sduring/%02d", prefix, i), fmt.Sprintf("v%d", i)
			_, err := cl.Put(ctx, k, v)
			require.NoError(t, err)
			keys[k] = v
		}
		late := time.Now()
		require.NoError(t, c.Start(ctx, o.last))
		require.NoError(t, c.WaitReady(ctx, o.last))
		t.Logf("%s: %s, started last, to a healthy voter: %s", o, o.last, time.Since(late).Round(time.Second))
	}
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

// testBootOrders boots c after a full power-off in three orders, each
// node first once, one of them with a node that starts only after the
// others took writes.
func testBootOrders(ctx context.Context, t *testing.T, c *cluster.Cluster) bool {
	for _, o := range []bootOrder{
		{first: "n1", second: "n2", last: "n3", cut: true},
		{first: "n2", second: "n3", last: "n1", cut: true},
		{first: "n3", second: "n1", last: "n2", late: true},
	} {
		name := strings.ReplaceAll(o.String(), ",", "")
		if !t.Run(name, func(t *testing.T) { testBootOrder(ctx, t, c, o) }) {
			return false
		}
	}
	return true
}

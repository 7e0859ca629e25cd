package e2e

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/qemu"
)

// TestChaos is `make chaos`: randomised faults on one 3-node cluster, for
// as long as ETCDBOX_CHAOS says (a Go duration; unset, the test is
// skipped, so `make test` never runs it). ETCDBOX_CHAOS_SEED replays a
// run; the seed is logged either way. ETCDBOX_CHAOS_FAULTS=a,b draws only
// the faults whose names contain a or b ("partition,disk").
//
// Each round draws one fault, runs it under the porcupine writer, waits
// until all three nodes are healthy voters, and checks what clients saw
// (the writer's history is linearizable) and the promises of the member
// lifecycle: one cluster ID from start to end, and every node's member ID
// unchanged unless its disk was wiped, in which case it is new. A full
// power-off is followed by starts in a random order, with random gaps,
// some of them minutes long.
func TestChaos(t *testing.T) {
	spec := os.Getenv("ETCDBOX_CHAOS")
	if spec == "" || testing.Short() {
		t.Skip("make chaos: set ETCDBOX_CHAOS to a duration")
	}
	total, err := time.ParseDuration(spec)
	require.NoError(t, err, "ETCDBOX_CHAOS=%q: want a duration such as 30m", spec)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ETCDBOX_CHAOS_SEED"); s != "" {
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "ETCDBOX_CHAOS_SEED=%q: want an unsigned integer", s)
	}
	t.Logf("chaos for %s, seed %d (ETCDBOX_CHAOS_SEED=%d replays it)", total, seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	r := upCluster(t, 3)
	c := r.Cluster
	ctx := t.Context()
	names := []string{"n1", "n2", "n3"}
	ids := memberIDs(ctx, t, c)
	clusterID := clusterIDOf(ctx, t, c, "n1")

	// killStart cuts n's power and boots it again on its disk after a
	// random time.
	killStart := func(ctx context.Context, t *testing.T, n string) {
		require.NoError(t, c.Kill(ctx, n))
		pause(ctx, rng, 20*time.Second)
		require.NoError(t, c.Start(ctx, n))
	}
	faults := []chaosFault{
		{name: "kill a node, start it again", run: func(ctx context.Context, t *testing.T) string {
			killStart(ctx, t, pick(rng, names))
			return ""
		}},
		{name: "kill the leader, start it again", run: func(ctx context.Context, t *testing.T) string {
			leader, _ := leaderOf(ctx, t, c, "")
			require.NotEmpty(t, leader)
			killStart(ctx, t, leader)
			return ""
		}},
		// A graceful stop under the writer: the init hands the
		// leadership over, and ends etcd once its WAL and database are
		// closed (init/etcdstop.go); the node comes back on its data.
		{name: "power off a node (a graceful stop), start it again", run: func(ctx context.Context, t *testing.T) string {
			n := pick(rng, names)
			require.NoError(t, c.Poweroff(ctx, n, 90*time.Second))
			pause(ctx, rng, 20*time.Second)
			require.NoError(t, c.Start(ctx, n))
			return ""
		}},
		{name: "power off the leader (a graceful stop), start it again", run: func(ctx context.Context, t *testing.T) string {
			leader, _ := leaderOf(ctx, t, c, "")
			require.NotEmpty(t, leader)
			require.NoError(t, c.Poweroff(ctx, leader, 90*time.Second))
			pause(ctx, rng, 20*time.Second)
			require.NoError(t, c.Start(ctx, leader))
			return ""
		}},
		{name: "reset a node", run: func(ctx context.Context, t *testing.T) string {
			require.NoError(t, c.Reset(ctx, pick(rng, names)))
			return ""
		}},
		{name: "pause a node, resume it", run: func(ctx context.Context, t *testing.T) string {
			n := pick(rng, names)
			require.NoError(t, c.Pause(ctx, n))
			pause(ctx, rng, 15*time.Second)
			require.NoError(t, c.Resume(ctx, n))
			return ""
		}},
		{name: "partition a node, heal", run: func(ctx context.Context, t *testing.T) string {
			require.NoError(t, c.Partition(ctx, pick(rng, names)))
			pause(ctx, rng, 20*time.Second)
			require.NoError(t, c.Heal(ctx))
			return ""
		}},
		{name: "cut a node one way, heal", run: func(ctx context.Context, t *testing.T) string {
			// Out: it hears the others but cannot answer (a leader's
			// heartbeats stop reaching them; a follower's acks stop).
			// In: it is heard but hears nothing (a leader keeps sending
			// heartbeats while it hears no quorum).
			require.NoError(t, c.CutOneWay(ctx, rng.IntN(2) == 0, pick(rng, names)))
			pause(ctx, rng, 20*time.Second)
			require.NoError(t, c.Heal(ctx))
			return ""
		}},
		{name: "slow a node's disk, give it full speed", run: func(ctx context.Context, t *testing.T) string {
			// From a failing drive (1 request a second) to a throttled
			// volume (50).
			n, l := pick(rng, names), qemu.DiskLimit{IOPS: []int64{1, 2, 5, 20, 50}[rng.IntN(5)]}
			require.NoError(t, c.LimitDisk(ctx, n, l))
			pause(ctx, rng, 20*time.Second)
			require.NoError(t, c.LimitDisk(ctx, n, qemu.DiskLimit{}))
			return ""
		}},
		{name: "impair a node's links (loss, delay), heal", run: func(ctx context.Context, t *testing.T) string {
			// From a flaky NIC (a tenth of its frames lost) to a path
			// slower than etcd's heartbeat interval.
			n := pick(rng, names)
			loss := []float64{0, 0.05, 0.1, 0.3}[rng.IntN(4)]
			delay := []time.Duration{0, 20 * time.Millisecond, 100 * time.Millisecond, 400 * time.Millisecond}[rng.IntN(4)]
			if loss == 0 && delay == 0 {
				loss = 0.2
			}
			require.NoError(t, c.Impair(ctx, loss, delay, n))
			pause(ctx, rng, 20*time.Second)
			require.NoError(t, c.Heal(ctx))
			return ""
		}},
		{name: "power off all, start them in a random order", wholeCluster: true, run: func(ctx context.Context, t *testing.T) string {
			for _, n := range names {
				require.NoError(t, c.Poweroff(ctx, n, 90*time.Second))
			}
			order := slices.Clone(names)
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			for i, n := range order {
				if i > 0 {
					// Now and then one node only minutes after the others.
					gap := 3 * time.Minute
					if rng.IntN(3) > 0 {
						gap = 10 * time.Second
					}
					pause(ctx, rng, gap)
				}
				t.Logf("starting %s", n)
				require.NoError(t, c.Start(ctx, n))
			}
			return ""
		}},
		{name: "replace a follower's disk", wholeCluster: true, run: func(ctx context.Context, t *testing.T) string {
			leader, _ := leaderOf(ctx, t, c, "")
			n := pick(rng, slices.DeleteFunc(slices.Clone(names), func(s string) bool { return s == leader }))
			require.NoError(t, c.Kill(ctx, n))
			require.NoError(t, c.Wipe(ctx, n))
			require.NoError(t, c.Start(ctx, n))
			return n
		}},
	}

	// A rolling upgrade to another image, with one of the faults above
	// striking at a random point of it (chaos_roll_test.go).
	rolls := newChaosRolls(t, c, rng, slices.DeleteFunc(slices.Clone(faults), func(f chaosFault) bool { return f.wholeCluster }))
	faults = append(faults, chaosFault{name: "roll to another image under a fault", run: rolls.round, deadline: rollDeadline + faultDeadline})

	if only := os.Getenv("ETCDBOX_CHAOS_FAULTS"); only != "" {
		faults = named(faults, only)
		require.NotEmpty(t, faults, "ETCDBOX_CHAOS_FAULTS=%q names no fault", only)
	}

	end := time.Now().Add(total)
	for round := 1; time.Now().Before(end); round++ {
		f := faults[rng.IntN(len(faults))]
		ok := t.Run(fmt.Sprintf("%03d %s", round, f.name), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, f.roundDeadline())
			defer cancel()
			w := startWriter(t, c)
			wiped := f.run(ctx, t)
			require.NoError(t, c.WaitReady(ctx), "the cluster did not come back whole")
			// A short fault can end before any put got through (a worker's
			// request on a cut-off member waits out etcd's 7 s); the
			// history must reach past the fault, so wait for a put
			// acknowledged after the cluster is whole.
			whole := time.Now()
			wctx, wcancel := context.WithTimeout(ctx, time.Minute)
			waitFor(wctx, t, "a put acknowledged after the fault", func() (bool, string) {
				return w.LastAck().After(whole), "last at " + w.LastAck().UTC().Format("15:04:05.000")
			})
			wcancel()
			res := stopWriter(t, w)
			t.Logf("writer: %d acknowledged puts, %d failed requests, longest gap %s ending %s",
				res.Acked, res.Failed, res.Gap.Round(10*time.Millisecond), res.GapEnd.UTC().Format("15:04:05.000"))
			for _, e := range res.Errors {
				t.Logf("writer: %s", e)
			}
			checkOneCluster(ctx, t, c, names)
			assert.Equal(t, clusterID, clusterIDOf(ctx, t, c, "n1"), "the cluster ID changed")
			now := memberIDs(ctx, t, c)
			for _, n := range names {
				if n == wiped {
					assert.NotEqual(t, ids[n], now[n], "%s's disk was wiped, and it runs with its old member ID", n)
					assert.NotContains(t, slices.Collect(maps.Values(ids)), now[n], "%s reuses a member ID", n)
				} else {
					assert.Equal(t, ids[n], now[n], "%s came back as another member", n)
				}
			}
			ids = now
		})
		if !ok {
			t.Logf("stopped after round %d; replay with ETCDBOX_CHAOS_SEED=%d", round, seed)
			return
		}
	}
}

// A chaosFault is one kind of round of TestChaos.
type chaosFault struct {
	name string
	// run injects the fault and undoes it; it returns the node whose
	// disk it wiped, if any.
	run func(ctx context.Context, t *testing.T) string
	// wholeCluster marks the faults a roll is not drawn with: a power-off
	// of every node stops any roll by design (its preconditions wait for
	// every member), and a replaced disk needs the node's image again.
	wholeCluster bool
	// deadline bounds the round; 0 for twice faultDeadline.
	deadline time.Duration
}

func (f chaosFault) roundDeadline() time.Duration {
	if f.deadline > 0 {
		return f.deadline
	}
	return 2 * faultDeadline
}

// named keeps the faults whose names contain one of only's
// comma-separated words.
func named(faults []chaosFault, only string) []chaosFault {
	return slices.DeleteFunc(faults, func(f chaosFault) bool {
		return !slices.ContainsFunc(strings.Split(only, ","), func(s string) bool { return s != "" && strings.Contains(f.name, s) })
	})
}

// pick is a random element of names.
func pick(rng *rand.Rand, names []string) string { return names[rng.IntN(len(names))] }

// pause waits a random time up to limit, or until ctx ends: the fault's
// length, not a wait for readiness.
func pause(ctx context.Context, rng *rand.Rand, limit time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Duration(rng.Int64N(int64(limit)))):
	}
}

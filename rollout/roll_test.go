package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/nodeapi"
)

func TestRollFollowersFirstLeaderLast(t *testing.T) {
	s := newSim("3.7.3", "n1", "n2", "n3")
	s.leader = "n2"
	r := s.roll("n1", "n2", "n3")
	var log []string
	r.Log = func(f string, a ...any) { log = append(log, fmt.Sprintf(f, a...)) }
	require.NoError(t, r.Run(t.Context()), strings.Join(log, "\n"))
	ahead, turns := splitAhead(s.events)
	assert.ElementsMatch(t, []string{"n1 hold", "n2 hold", "n3 hold"}, ahead, "every node stages ahead, before the first reboot")
	assert.Equal(t, []string{
		"n1 snapshot", "n1 arm", "n1 reboot",
		"n3 snapshot", "n3 arm", "n3 reboot",
		"leader n2 -> n1",
		"n2 snapshot", "n2 arm", "n2 reboot",
	}, turns)
	for _, n := range s.nodes {
		assert.Equal(t, "b", n.slot, n.name)
		assert.Equal(t, StateDone, s.records[n.name].State, n.name)
		assert.Equal(t, 1, n.pulls, "%s: staged once; its turn reused the held slot", n.name)
	}
	assert.False(t, s.locked, "the lock is released")
	assert.Contains(t, strings.Join(log, "\n"), "node n2: leader; moving leadership to n1")

	// Rolled again, every node is done already.
	s.events = nil
	require.NoError(t, s.roll("n1", "n2", "n3").Run(t.Context()))
	assert.Empty(t, s.events)
}

// TestRollWarnsOfNodesWithoutWatchdog names, before any node moves, the
// nodes that say they have no hardware watchdog, and rolls them all the
// same: the warning is the operator's to weigh.
func TestRollWarnsOfNodesWithoutWatchdog(t *testing.T) {
	s := newSim("3.7.3", "n1", "n2", "n3")
	s.leader = "n1"
	s.nodes["n1"].watchdog = "/dev/watchdog (iTCO_wdt), timeout 30s"
	s.nodes["n2"].watchdog = nodeapi.WatchdogNone
	s.nodes["n3"].watchdog = nodeapi.WatchdogNone
	r := s.roll("n1", "n2", "n3")
	var log []string
	r.Log = func(f string, a ...any) { log = append(log, fmt.Sprintf(f, a...)) }
	require.NoError(t, r.Run(t.Context()), strings.Join(log, "\n"))
	i := slices.IndexFunc(log, func(l string) bool { return strings.HasPrefix(l, "warning: no hardware watchdog on n2, n3: ") })
	require.GreaterOrEqual(t, i, 0, "the warning names n2 and n3, not n1:\n%s", strings.Join(log, "\n"))
	assert.Less(t, i, slices.IndexFunc(log, func(l string) bool { return strings.HasPrefix(l, "staging ") }), "warned before staging")

	unwatched := Unwatched(healthy("3.7.3", "n1", "n2"))
	assert.Empty(t, unwatched, "a node that does not tell (empty) is not named")
}

// TestRollNoKexec asks every node for a firmware reboot.
func TestRollNoKexec(t *testing.T) {
	s := newSim("3.7.3", "n1", "n2", "n3")
	s.leader = "n3"
	r := s.roll("n1", "n2", "n3")
	r.NoKexec = true
	require.NoError(t, r.Run(t.Context()))
	var reboots []string
	for _, e := range s.events {
		if strings.Contains(e, "reboot") {
			reboots = append(reboots, e)
		}
	}
	assert.Equal(t, []string{"n1 reboot (no kexec)", "n2 reboot (no kexec)", "n3 reboot (no kexec)"}, reboots)
}

func TestRollStopsAtRollback(t *testing.T) {
	s := newSim("3.7.3", "n1", "n2", "n3")
	s.nodes["n2"].bad = "gate failed: not a voting member after 120s"
	err := s.roll("n1", "n2", "n3").Run(t.Context())
	require.EqualError(t, err, "node n2 rolled back: slot b: gate failed: not a voting member after 120s")
	assert.Equal(t, StateRolledBack, s.records["n2"].State)
	assert.Equal(t, "a", s.nodes["n2"].slot)
	assert.NotContains(t, s.events, "n3 arm", "the roll stops at the first rollback")
	assert.Equal(t, nodeapi.SlotHeld, s.nodes["n3"].slots["b"], "n3 staged ahead, held")
	assert.Contains(t, s.events, "n2 reboot")
}

func TestRollRefuses(t *testing.T) {
	t.Run("locked", func(t *testing.T) {
		s := newSim("3.7.3", "n1")
		s.locked = true
		require.ErrorIs(t, s.roll("n1").Run(t.Context()), ErrLocked)
	})
	t.Run("not ready", func(t *testing.T) {
		s := newSim("3.7.3", "n1", "n2")
		s.nodes["n2"].slots["a"] = nodeapi.SlotTrying
		err := s.roll("n1", "n2").Run(t.Context())
		require.ErrorIs(t, err, ErrNotReady)
		assert.Contains(t, err.Error(), "node n2: slot a is not blessed yet")
		assert.Empty(t, s.events)
	})
	t.Run("a node left out", func(t *testing.T) {
		s := newSim("3.7.3", "n1", "n2")
		err := s.roll("n1").Run(t.Context())
		require.ErrorIs(t, err, ErrNotReady)
		assert.Contains(t, err.Error(), "member n2: no node of this roll runs it")
	})
	t.Run("skipped minor", func(t *testing.T) {
		s := newSim("3.5.21", "n1")
		r := s.roll("n1")
		r.ImageEtcd = "3.7.3"
		require.ErrorIs(t, r.Run(t.Context()), ErrVersion)
		assert.Empty(t, s.events)
	})
	t.Run("not pinned", func(t *testing.T) {
		s := newSim("3.7.3", "n1")
		r := s.roll("n1")
		r.Image = "10.88.0.1:5000/etcdbox:v2"
		assert.ErrorContains(t, r.Run(t.Context()), "no digest")
	})
}

func TestRollAbort(t *testing.T) {
	s := newSim("3.7.3", "n1", "n2", "n3")
	s.abortAfter = "n2"
	err := s.roll("n1", "n2", "n3").Run(t.Context())
	require.ErrorIs(t, err, ErrAborted)
	ahead, turns := splitAhead(s.events)
	assert.ElementsMatch(t, []string{"n1 hold", "n2 hold", "n3 hold"}, ahead)
	assert.Equal(t, []string{"n2 snapshot", "n2 arm", "n2 reboot"}, turns)
	for _, name := range []string{"n1", "n3"} {
		n := s.nodes[name]
		assert.Equal(t, "a", n.slot, "%s stays on its slot", name)
		assert.Equal(t, nodeapi.SlotHeld, n.slots["b"], "%s: its staged slot is held, not armed", name)
	}
}

// TestRollAfterAbortReusesHeldSlots: a roll aborted after its first node
// leaves the others held; rolling the same image again moves them
// without pulling it again, and skips the node that moved.
func TestRollAfterAbortReusesHeldSlots(t *testing.T) {
	s := newSim("3.7.3", "n1", "n2", "n3")
	s.abortAfter = "n2"
	require.ErrorIs(t, s.roll("n1", "n2", "n3").Run(t.Context()), ErrAborted)
	s.abortAfter, s.events = "", nil
	require.NoError(t, s.roll("n1", "n2", "n3").Run(t.Context()))
	ahead, turns := splitAhead(s.events)
	assert.ElementsMatch(t, []string{"n1 hold", "n3 hold"}, ahead, "the node that moved is not staged again")
	assert.NotContains(t, turns, "n2 reboot")
	for _, n := range s.nodes {
		assert.Equal(t, "b", n.slot, n.name)
		assert.Equal(t, 1, n.pulls, "%s: the held slot was reused", n.name)
	}
}

// TestRollStagesAgainWhenTheHeldSlotWent: a node whose held slot was
// replaced after the roll staged it ahead refuses to arm; the roll stages
// it again at its turn and goes on.
func TestRollStagesAgainWhenTheHeldSlotWent(t *testing.T) {
	s := newSim("3.7.3", "n1", "n2", "n3")
	s.afterDone = map[string]func(){"n2": func() { s.nodes["n3"].staged = "10.88.0.1:5000/etcdbox@sha256:" + strings.Repeat("f", 64) }}
	var log []string
	r := s.roll("n1", "n2", "n3")
	r.Log = func(f string, a ...any) { log = append(log, fmt.Sprintf(f, a...)) }
	require.NoError(t, r.Run(t.Context()), strings.Join(log, "\n"))
	_, turns := splitAhead(s.events)
	assert.Contains(t, strings.Join(turns, ","), "n3 snapshot,n3 arm,n3 hold,n3 arm,n3 reboot")
	assert.Equal(t, 2, s.nodes["n3"].pulls, "n3 was staged again")
	assert.Equal(t, "b", s.nodes["n3"].slot)
	assert.True(t, slices.ContainsFunc(log, func(l string) bool {
		return strings.HasPrefix(l, "node n3: arm: ") && strings.HasSuffix(l, "; staging again")
	}), strings.Join(log, "\n"))
}

// TestRollStagingAheadFails: a node that cannot stage stops the roll
// before any node reboots, with the node and the reason.
func TestRollStagingAheadFails(t *testing.T) {
	s := newSim("3.7.3", "n1", "n2", "n3")
	s.nodes["n3"].holdErr = errors.New("pull: connection refused")
	err := s.roll("n1", "n2", "n3").Run(t.Context())
	require.ErrorContains(t, err, "node n3: staging ahead: pull: connection refused")
	for _, e := range s.events {
		assert.NotContains(t, e, "reboot")
		assert.NotContains(t, e, "arm")
	}
	for _, n := range s.nodes {
		assert.Equal(t, "a", n.slot, n.name)
	}
}

// TestRollTakesAnUntouchedTurnAgain: a node whose snapshot fails (it
// restarted on its own as its turn began) was not armed or rebooted, so
// its turn is taken again once the cluster is ready; a node whose
// snapshot keeps failing stops the roll after turnTries, never armed.
func TestRollTakesAnUntouchedTurnAgain(t *testing.T) {
	t.Run("once", func(t *testing.T) {
		s := newSim("3.7.3", "n1", "n2", "n3")
		s.leader = "n3"
		s.nodes["n2"].snapErrs = 1
		r := s.roll("n1", "n2", "n3")
		var log []string
		r.Log = func(f string, a ...any) { log = append(log, fmt.Sprintf(f, a...)) }
		require.NoError(t, r.Run(t.Context()), strings.Join(log, "\n"))
		_, turns := splitAhead(s.events)
		assert.Equal(t, []string{
			"n1 snapshot", "n1 arm", "n1 reboot",
			"n2 snapshot", "n2 snapshot", "n2 arm", "n2 reboot",
			"leader n3 -> n1",
			"n3 snapshot", "n3 arm", "n3 reboot",
		}, turns)
		for _, n := range s.nodes {
			assert.Equal(t, "b", n.slot, n.name)
			assert.Equal(t, StateDone, s.records[n.name].State, n.name)
		}
		assert.Contains(t, strings.Join(log, "\n"), "node n2: snapshot: POST https://n2:9379/v1/snapshot: net/http: timeout awaiting response headers; nothing changed on it: its turn again once the cluster is ready (2 of 3)")
	})
	t.Run("every time", func(t *testing.T) {
		s := newSim("3.7.3", "n1", "n2", "n3")
		s.leader = "n3"
		s.nodes["n2"].snapErrs = 100
		err := s.roll("n1", "n2", "n3").Run(t.Context())
		require.ErrorContains(t, err, "node n2: snapshot: POST https://n2:9379/v1/snapshot")
		_, turns := splitAhead(s.events)
		assert.Equal(t, []string{"n1 snapshot", "n1 arm", "n1 reboot", "n2 snapshot", "n2 snapshot", "n2 snapshot"}, turns,
			"three tries, then the roll stops; n2 never armed, n3 never reached")
		assert.Equal(t, "a", s.nodes["n2"].slot)
		assert.Equal(t, nodeapi.SlotHeld, s.nodes["n2"].slots["b"], "n2 staged ahead, held, not armed")
		assert.Equal(t, StateFailed, s.records["n2"].State)
	})
}

// TestRollAsksARestartedNodeToStageAgain: a node that restarted while it
// staged ahead reports its agent idle; the roll asks it again instead of
// waiting out its NodeTimeout, and stops at once if the node refuses.
func TestRollAsksARestartedNodeToStageAgain(t *testing.T) {
	t.Run("asked again", func(t *testing.T) {
		s := newSim("3.7.3", "n1", "n2", "n3")
		s.nodes["n2"].lostHold = 1
		r := s.roll("n1", "n2", "n3")
		r.NodeTimeout = time.Minute // a wait for it would fail the test's own deadline
		var log []string
		r.Log = func(f string, a ...any) { log = append(log, fmt.Sprintf(f, a...)) }
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		require.NoError(t, r.Run(ctx), strings.Join(log, "\n"))
		ahead, _ := splitAhead(s.events)
		assert.ElementsMatch(t, []string{"n1 hold", "n2 hold", "n2 hold", "n3 hold"}, ahead)
		assert.Contains(t, strings.Join(log, "\n"), `node n2: no staging of the image under way (phase idle, target ""): the node restarted, or staged another image; asking again`)
		for _, n := range s.nodes {
			assert.Equal(t, "b", n.slot, n.name)
		}
	})
	t.Run("refused", func(t *testing.T) {
		s := newSim("3.7.3", "n1", "n2", "n3")
		s.nodes["n2"].lostHold = 1
		s.nodes["n2"].holdRefusal = &nodeapi.Error{StatusCode: 409, Message: "busy: staging 10.88.0.1:5000/etcdbox@sha256:0000"}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		err := s.roll("n1", "n2", "n3").Run(ctx)
		require.ErrorContains(t, err, "node n2: staging ahead: staging again: 409 Conflict: busy: staging")
		for _, e := range s.events {
			assert.NotContains(t, e, "reboot", "no node reboots after a staging ahead failed")
		}
	})
}

// splitAhead splits a roll's events into the stages ahead (the leading
// holds, in any order: they run at once) and the turns after them.
func splitAhead(events []string) (ahead, turns []string) {
	i := 0
	for i < len(events) && strings.HasSuffix(events[i], " hold") {
		i++
	}
	return events[:i], events[i:]
}

func TestRollAcrossAMinor(t *testing.T) {
	s := newSim("3.6.16", "n1", "n2", "n3")
	for _, n := range s.nodes {
		n.newEtcd = "3.7.3"
	}
	r := s.roll("n1", "n2", "n3")
	r.ImageEtcd = "3.7.3"
	var log []string
	r.Log = func(f string, a ...any) { log = append(log, fmt.Sprintf(f, a...)) }
	require.NoError(t, r.Run(t.Context()), strings.Join(log, "\n"))
	i := slices.IndexFunc(log, func(l string) bool { return strings.Contains(l, "point of no return") })
	require.GreaterOrEqual(t, i, 0, strings.Join(log, "\n"))
	assert.True(t, strings.HasPrefix(log[i], "node n1: point of no return: it is the last member on etcd 3.6"), log[i])
	assert.Equal(t, "3.7.3", s.cv)
	assert.Contains(t, log[len(log)-1], "cluster version 3.7.3")
}

// TestRollWaitsForAnUnknownClusterVersion: when no node could read the
// cluster version just before the last member moves, the roll takes that
// turn again instead of failing or moving blind.
func TestRollWaitsForAnUnknownClusterVersion(t *testing.T) {
	s := newSim("3.6.16", "n1", "n2", "n3")
	for _, n := range s.nodes {
		n.newEtcd = "3.7.3"
	}
	s.afterDone = map[string]func(){"n3": func() { s.cvHidden = 1 }}
	r := s.roll("n1", "n2", "n3")
	r.ImageEtcd = "3.7.3"
	var log []string
	r.Log = func(f string, a ...any) { log = append(log, fmt.Sprintf(f, a...)) }
	require.NoError(t, r.Run(t.Context()), strings.Join(log, "\n"))
	all := strings.Join(log, "\n")
	assert.Contains(t, all, "node n1: before node n1, the last member to move to etcd 3.7: the cluster version is unknown; nothing changed on it: its turn again once the cluster is ready (2 of 3)")
	assert.Less(t, strings.Index(all, "cluster version is unknown"), strings.Index(all, "node n1: point of no return"))
	assert.Equal(t, "3.7.3", s.cv)
	assert.Equal(t, 0, s.cvHidden)
}

func TestRollDowngradeEnablesFirst(t *testing.T) {
	s := newSim("3.7.3", "n1")
	s.nodes["n1"].newEtcd = "3.6.16"
	r := s.roll("n1")
	r.ImageEtcd = "3.6.16"
	require.NoError(t, r.Run(t.Context()))
	assert.Equal(t, "downgrade 3.6", s.events[0])
}

// TestRollDowngradeWaitsForStorage checks that no node reboots into the
// older etcd before its member reports its storage migrated, and that a
// storage version that never comes stops the roll with the reason.
func TestRollDowngradeWaitsForStorage(t *testing.T) {
	s := newSim("3.7.3", "n1", "n2")
	s.storageLag = 5
	for _, n := range s.nodes {
		n.newEtcd = "3.6.16"
	}
	r := s.roll("n1", "n2")
	r.ImageEtcd = "3.6.16"
	r.ReadyWait = time.Second
	var log []string
	r.Log = func(f string, a ...any) { log = append(log, fmt.Sprintf(f, a...)) }
	require.NoError(t, r.Run(t.Context()), strings.Join(log, "\n"))
	require.Equal(t, "downgrade 3.6", s.events[0])
	ahead, turns := splitAhead(s.events[1:])
	assert.ElementsMatch(t, []string{"n1 hold", "n2 hold"}, ahead)
	assert.Equal(t, []string{"n2 snapshot", "n2 arm", "n2 reboot", "leader n1 -> n2", "n1 snapshot", "n1 arm", "n1 reboot"}, turns)
	assert.Zero(t, s.storageLag, "the roll observed until the storage was migrated")
	assert.True(t, slices.ContainsFunc(log, func(l string) bool { return l == "node n2: storage version 3.6.0" }), strings.Join(log, "\n"))

	s = newSim("3.7.3", "n1")
	s.storageLag = 1 << 30
	s.nodes["n1"].newEtcd = "3.6.16"
	r = s.roll("n1")
	r.ImageEtcd = "3.6.16"
	err := r.Run(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "before node n1: etcd's downgrade to 3.6 has not migrated its storage after 50ms: its storage version is 3.7.0")
	assert.NotContains(t, s.events, "n1 reboot")
}

package rollout

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRollLeaderMovedByItself: the leadership leaves the leader by itself
// just as the roll asks to move it, so the move reaches a node that no
// longer leads. The roll sees the new leader and goes on; a move that
// fails while the node still leads stops the roll.
func TestRollLeaderMovedByItself(t *testing.T) {
	s := newSim("3.7.3", "n1", "n2", "n3")
	s.leader, s.movedFirst = "n2", "n3"
	r := s.roll("n1", "n2", "n3")
	var log []string
	r.Log = func(f string, a ...any) { log = append(log, fmt.Sprintf(f, a...)) }
	require.NoError(t, r.Run(t.Context()), strings.Join(log, "\n"))
	_, turns := splitAhead(s.events)
	assert.Equal(t, []string{
		"n1 snapshot", "n1 arm", "n1 reboot",
		"n3 snapshot", "n3 arm", "n3 reboot",
		"leader n2 -> n3 by itself",
		"n2 snapshot", "n2 arm", "n2 reboot",
	}, turns)
	assert.Contains(t, strings.Join(log, "\n"), "node n2: no longer the leader (n3 leads now): nothing to hand over")
	for _, n := range s.nodes {
		assert.Equal(t, StateDone, s.records[n.name].State, n.name)
	}

	// A move that fails while the node still leads stops the roll before
	// that node's reboot.
	s = newSim("3.7.3", "n1", "n2", "n3")
	s.leader, s.moveErr = "n2", errors.New("etcdserver: request timed out")
	r = s.roll("n1", "n2", "n3")
	log = nil
	r.Log = func(f string, a ...any) { log = append(log, fmt.Sprintf(f, a...)) }
	err := r.Run(t.Context())
	require.ErrorContains(t, err, "node n2: etcdserver: request timed out")
	assert.Equal(t, 3, strings.Count(strings.Join(log, "\n"), "node n2: leader; moving leadership to"), "the hand-over is tried three times: nothing changed on n2")
	assert.NotContains(t, s.events, "n2 reboot")
	assert.Equal(t, "n2", s.leader)
}

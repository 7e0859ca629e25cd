package rollout

import (
	"fmt"
	"time"

	"github.com/etcdbox/etcdbox/nodeapi"
)

// Outcome is where a rebooted node stands.
type Outcome int

// The outcomes of Judge.
const (
	// Waiting: not back yet, or back and still on probation.
	Waiting Outcome = iota
	// Upgraded: booted on the new slot, blessed, a healthy voter.
	Upgraded
	// RolledBack: back on the old slot, the new one given up.
	RolledBack
)

// Judge tells from a node's status (err: it did not answer) whether it
// came back from the reboot into slot to, after leaving slot from at
// rebootAt. A status from before the reboot (its uptime reaches back past
// rebootAt) is Waiting. The string says what the node is doing, or why it
// rolled back.
func Judge(st nodeapi.Status, err error, from, to string, rebootAt, now time.Time) (Outcome, string) {
	if err != nil {
		return Waiting, "node API does not answer"
	}
	if !rebootAt.IsZero() && now.Add(-st.Uptime).Before(rebootAt) {
		return Waiting, "not rebooted yet"
	}
	switch st.Slot {
	case to:
		switch {
		case !st.Blessed:
			return Waiting, fmt.Sprintf("on slot %s, health gate under way (member %s, healthy %t)", to, st.Member.Role, st.Member.Healthy)
		case st.Member.Role != nodeapi.RoleVoter || !st.Member.Healthy:
			return Waiting, fmt.Sprintf("on slot %s, blessed, member %s, healthy %t", to, st.Member.Role, st.Member.Healthy)
		}
		return Upgraded, fmt.Sprintf("on slot %s, blessed, healthy voter", to)
	case from:
		state := slotState(st, to)
		switch state {
		case nodeapi.SlotBad, nodeapi.SlotEmpty, nodeapi.SlotHeld:
			why := st.LastRollback
			if why == "" {
				why = fmt.Sprintf("back on slot %s, slot %s is %s", from, to, state)
			}
			return RolledBack, why
		}
		return Waiting, fmt.Sprintf("on slot %s, slot %s is %s (tries left %d)", from, to, state, triesLeft(st, to))
	}
	return Waiting, fmt.Sprintf("booted slot %q", st.Slot)
}

func slotState(st nodeapi.Status, name string) string {
	for _, s := range st.Slots {
		if s.Name == name {
			return s.State
		}
	}
	return nodeapi.SlotEmpty
}

func triesLeft(st nodeapi.Status, name string) int {
	for _, s := range st.Slots {
		if s.Name == name {
			return s.TriesLeft
		}
	}
	return 0
}

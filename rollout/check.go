package rollout

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/etcdbox/etcdbox/nodeapi"
)

// ErrNotReady is what Check wraps when the cluster may not move a node now.
var ErrNotReady = errors.New("cluster not ready")

// NodeState is a node as its node API describes it.
type NodeState struct {
	// Name is the roll's name for the node (its status's name once known).
	Name   string
	Status nodeapi.Status
	// Err says why the node API did not answer.
	Err error
}

// MemberState is a member as etcd describes it.
type MemberState struct {
	ID   uint64
	Name string // empty until the member has started
	// Learner: not a voting member.
	Learner bool
	// PeerURLs and ClientURLs are as the member list gives them
	// (ClientURLs is empty until the member has started).
	PeerURLs, ClientURLs []string
	// Healthy: its client endpoint answers status without errors.
	Healthy bool
	// Problem says why it is not healthy.
	Problem string
	// Version is the member's etcd server version, when it answered.
	Version string
	// StorageVersion is the version of its backend's schema, when it
	// answered: during a downgrade etcd migrates it to the target minor,
	// and only then may the member's binary be replaced by the older one.
	StorageVersion string
}

// Cluster is what the roll sees at one moment.
type Cluster struct {
	Nodes   []NodeState
	Members []MemberState
	// Leader is the leader's member ID, 0 when unknown.
	Leader uint64
	// Alarms are the raised alarms, as "NOSPACE on 8e9e05c52164694d".
	Alarms []string
	// ClusterVersion is etcd's cluster version ("3.6.0"), empty when
	// unknown.
	ClusterVersion string
}

// memberID renders an ID the way nodeapi.Member.ID and etcdctl do.
func memberID(id uint64) string { return strconv.FormatUint(id, 16) }

// member returns the member a node is, by its ID, else by its name.
func (c Cluster) member(n NodeState) (MemberState, bool) {
	for _, m := range c.Members {
		if n.Status.Member.ID != "" && memberID(m.ID) == n.Status.Member.ID {
			return m, true
		}
	}
	for _, m := range c.Members {
		if m.Name != "" && m.Name == n.Name {
			return m, true
		}
	}
	return MemberState{}, false
}

// Node returns the node called name.
func (c Cluster) Node(name string) (NodeState, bool) {
	i := slices.IndexFunc(c.Nodes, func(n NodeState) bool { return n.Name == name })
	if i < 0 {
		return NodeState{}, false
	}
	return c.Nodes[i], true
}

// LeaderName is the name of the node that leads, "" when none does.
func (c Cluster) LeaderName() string {
	for _, n := range c.Nodes {
		if m, ok := c.member(n); ok && c.Leader != 0 && m.ID == c.Leader {
			return n.Name
		}
	}
	for _, n := range c.Nodes {
		if n.Err == nil && n.Status.Member.Leader {
			return n.Name
		}
	}
	return ""
}

// Check returns nil when the cluster may move a node: every node's API
// answers, every member has started and is a healthy voter that one of
// the nodes runs, every node's booted slot is blessed (no gate under way),
// no node is staging, and no alarm is raised. Otherwise it returns
// ErrNotReady with every problem it found.
func Check(c Cluster) error {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	seen := map[uint64]bool{}
	for _, n := range c.Nodes {
		m, ok := c.member(n)
		if ok {
			seen[m.ID] = true
		}
		if n.Err != nil {
			add("node %s: node API: %v", n.Name, n.Err)
			continue
		}
		st := n.Status
		switch {
		case !ok || st.Member.Role == nodeapi.RoleNone || st.Member.Role == "":
			add("node %s: not a member", n.Name)
		case st.Member.Role == nodeapi.RoleLearner || m.Learner:
			add("node %s: a learner, not a voting member", n.Name)
		case !st.Member.Healthy:
			add("node %s: member not healthy", n.Name)
		}
		if st.Slot != "" && !st.Blessed {
			add("node %s: slot %s is not blessed yet (health gate under way)", n.Name, st.Slot)
		}
		if p := st.Upgrade.Phase; p == nodeapi.PhasePulling || p == nodeapi.PhaseWriting {
			add("node %s: staging %s", n.Name, st.Upgrade.Target)
		}
	}
	for _, m := range c.Members {
		name := m.Name
		if name == "" {
			name = memberID(m.ID)
		}
		switch {
		case m.Name == "":
			add("member %s: not started", name)
		case m.Learner:
			add("member %s: a learner, not a voting member", name)
		case !m.Healthy:
			add("member %s: not healthy: %s", name, m.Problem)
		}
		if !seen[m.ID] {
			add("member %s: no node of this roll runs it (name every node)", name)
		}
	}
	for _, a := range c.Alarms {
		add("alarm %s", a)
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrNotReady, strings.Join(problems, "; "))
}

// Unwatched names the nodes that say they have no hardware watchdog
// (nodeapi.WatchdogNone): nothing resets such a node when its new slot
// hangs, so the roll's way back needs an operator there.
func Unwatched(c Cluster) []string {
	var out []string
	for _, n := range c.Nodes {
		if n.Err == nil && n.Status.Watchdog == nodeapi.WatchdogNone {
			out = append(out, n.Name)
		}
	}
	return out
}

// Order returns the names of the nodes to move in the order they move:
// followers first, in name order, the leader last.
func Order(names []string, leader string) []string {
	out := slices.Clone(names)
	slices.Sort(out)
	if i := slices.Index(out, leader); i >= 0 {
		out = append(slices.Delete(out, i, i+1), leader)
	}
	return out
}

// Transferee picks the member to hand leadership to before the leader's
// step: a healthy voter whose node already runs the target (in done),
// else any healthy voter other than the leader. ok is false when there is
// none (a single-member cluster).
func Transferee(c Cluster, leader string, done []string) (id uint64, name string, ok bool) {
	var fallback *NodeState
	for i, n := range c.Nodes {
		if n.Name == leader || n.Err != nil || !n.Status.Member.Healthy || n.Status.Member.Role != nodeapi.RoleVoter {
			continue
		}
		m, found := c.member(n)
		if !found || m.Learner || !m.Healthy {
			continue
		}
		if slices.Contains(done, n.Name) {
			return m.ID, n.Name, true
		}
		if fallback == nil {
			fallback = &c.Nodes[i]
		}
	}
	if fallback != nil {
		m, _ := c.member(*fallback)
		return m.ID, fallback.Name, true
	}
	return 0, "", false
}

package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/etcdbox/etcdbox/nodeapi"
)

// The roll tests' simulated cluster: nodes with A/B slots and an etcd
// whose leader moves, recording every call as an event.

const testImage = "10.88.0.1:5000/etcdbox@sha256:0123456789012345678901234567890123456789012345678901234567890123"

// sim is a cluster of fake nodes and a fake etcd: a node reboots into its
// staged slot when asked and comes back as its behaviour says.
type sim struct {
	mu      sync.Mutex
	nodes   map[string]*simNode
	leader  string
	locked  bool
	target  *Target
	records map[string]NodeRecord
	cv      string
	events  []string
	// abortAfter deletes the target after this node is done.
	abortAfter string
	// afterDone runs once the node it is keyed by is done.
	afterDone map[string]func()
	// downgraded is the minor of an enabled downgrade; the members report
	// it as their storage version after storageLag more observations.
	downgraded string
	storageLag int
	// cvHidden is how many more observations read no cluster version, as
	// when every /version read times out.
	cvHidden int
	// movedFirst, when set, is the node that takes the leadership by
	// itself as the roll asks for a move (an election, a node's slow-disk
	// handoff), so the roll's MoveLeader reaches a node that no longer
	// leads.
	movedFirst string
	// moveErr fails every MoveLeader, the leader staying.
	moveErr error
}

type simNode struct {
	s           *sim
	name        string
	id          uint64
	slot        string
	slots       map[string]string
	etcd        string
	newEtcd     string
	staged      string
	holdErr     error  // HoldUpgrade fails with it
	snapErrs    int    // snapshots that fail, as a node that restarts on its own does
	lostHold    int    // holds the node accepts and then forgets: it restarted while it staged
	holdRefusal error  // HoldUpgrade fails with it once a hold was lost
	pulls       int    // stages that wrote the slot
	down        int    // status calls that fail after a reboot
	bad         string // when set, the new slot fails its gate with this reason
	uptime      time.Duration
	rollback    string
	watchdog    string // Status.Watchdog
}

func newSim(etcd string, names ...string) *sim {
	s := &sim{nodes: map[string]*simNode{}, records: map[string]NodeRecord{}, leader: names[0], cv: etcd}
	for i, n := range names {
		s.nodes[n] = &simNode{s: s, name: n, id: uint64(0x100 + i), slot: "a", slots: map[string]string{"a": nodeapi.SlotBlessed, "b": nodeapi.SlotEmpty}, etcd: etcd, newEtcd: etcd, uptime: time.Hour}
	}
	return s
}

func (s *sim) event(format string, args ...any) {
	s.events = append(s.events, fmt.Sprintf(format, args...))
}

func (s *sim) roll(names ...string) *Roll {
	r := &Roll{Image: testImage, Etcd: (*simEtcd)(s), Poll: time.Millisecond, ReadyWait: 50 * time.Millisecond, NodeTimeout: 5 * time.Second}
	for _, n := range names {
		r.Nodes = append(r.Nodes, Node{API: s.nodes[n], EtcdEndpoint: "https://" + n + ":2379"})
	}
	return r
}

func (n *simNode) Status(context.Context) (nodeapi.Status, error) {
	n.s.mu.Lock()
	defer n.s.mu.Unlock()
	if n.down > 0 {
		n.down--
		return nodeapi.Status{}, errors.New("connection refused")
	}
	st := nodeapi.Status{Name: n.name, Slot: n.slot, Blessed: n.slots[n.slot] == nodeapi.SlotBlessed, EtcdVersion: n.etcd, Uptime: n.uptime,
		Member: nodeapi.Member{ID: memberID(n.id), Role: nodeapi.RoleVoter, Healthy: true, Leader: n.s.leader == n.name}, LastRollback: n.rollback, Watchdog: n.watchdog}
	for _, name := range []string{"a", "b"} {
		st.Slots = append(st.Slots, nodeapi.Slot{Name: name, State: n.slots[name]})
	}
	return st, nil
}

func (n *simNode) Snapshot(context.Context) (nodeapi.Snapshot, error) {
	n.s.mu.Lock()
	defer n.s.mu.Unlock()
	n.s.event("%s snapshot", n.name)
	if n.snapErrs > 0 {
		n.snapErrs--
		return nodeapi.Snapshot{}, errors.New("POST https://" + n.name + ":9379/v1/snapshot: net/http: timeout awaiting response headers")
	}
	return nodeapi.Snapshot{Path: "/var/lib/etcdbox/backups/etcd-x.db", Size: 1, Revision: 1}, nil
}

// HoldUpgrade stages image held, as the node's agent does: the digest
// its inactive slot holds already, never booted, is not written again.
func (n *simNode) HoldUpgrade(_ context.Context, image string) error {
	n.s.mu.Lock()
	defer n.s.mu.Unlock()
	n.s.event("%s hold", n.name)
	if n.holdErr != nil {
		return n.holdErr
	}
	if n.lostHold > 0 {
		// Accepted, then the node restarts: its agent comes back idle.
		n.lostHold--
		n.staged = ""
		n.holdErr = n.holdRefusal
		return nil
	}
	to := otherSlot(n.slot)
	if n.staged != image || (n.slots[to] != nodeapi.SlotHeld && n.slots[to] != nodeapi.SlotTrying) {
		n.pulls++
	}
	n.staged = image
	n.slots[to] = nodeapi.SlotHeld
	return nil
}

func (n *simNode) ArmUpgrade(_ context.Context, image string) (nodeapi.UpgradeProgress, error) {
	n.s.mu.Lock()
	defer n.s.mu.Unlock()
	n.s.event("%s arm", n.name)
	to := otherSlot(n.slot)
	if n.staged != image || n.slots[to] != nodeapi.SlotHeld && n.slots[to] != nodeapi.SlotTrying {
		return nodeapi.UpgradeProgress{}, fmt.Errorf("slot %s holds %q (%s)", to, n.staged, n.slots[to])
	}
	n.slots[to] = nodeapi.SlotTrying
	return nodeapi.UpgradeProgress{Target: image, Phase: nodeapi.PhaseStaged}, nil
}

func (n *simNode) Upgrade(context.Context) (nodeapi.UpgradeProgress, error) {
	n.s.mu.Lock()
	defer n.s.mu.Unlock()
	phase := nodeapi.PhaseStaged
	if n.staged == "" {
		return nodeapi.UpgradeProgress{Phase: nodeapi.PhaseIdle}, nil
	}
	if n.slots[otherSlot(n.slot)] == nodeapi.SlotHeld {
		phase = nodeapi.PhaseHeld
	}
	return nodeapi.UpgradeProgress{Target: n.staged, Phase: phase}, nil
}

func (n *simNode) RebootWith(_ context.Context, req nodeapi.RebootRequest) error {
	n.s.mu.Lock()
	defer n.s.mu.Unlock()
	if req.NoKexec {
		n.s.event("%s reboot (no kexec)", n.name)
	} else {
		n.s.event("%s reboot", n.name)
	}
	if n.s.leader == n.name {
		n.s.leader = "" // an election follows
	}
	n.down, n.uptime = 3, 0
	to := otherSlot(n.slot)
	if n.slots[to] != nodeapi.SlotTrying {
		return nil // nothing armed: the running slot boots again
	}
	if n.bad != "" {
		n.slots[to], n.rollback = nodeapi.SlotBad, "slot "+to+": "+n.bad
		return nil
	}
	n.slot, n.slots[to], n.etcd = to, nodeapi.SlotBlessed, n.newEtcd
	if n.s.leader == "" {
		n.s.leader = n.name
	}
	return nil
}

// simEtcd is the sim's Etcd.
type simEtcd sim

func (e *simEtcd) Observe(context.Context, []string) ([]MemberState, uint64, []string, string, error) {
	s := (*sim)(e)
	s.mu.Lock()
	defer s.mu.Unlock()
	var ms []MemberState
	var leader uint64
	storage := ""
	if s.downgraded != "" {
		if s.storageLag > 0 {
			s.storageLag--
		} else {
			storage = s.downgraded + ".0"
		}
	}
	for _, n := range s.nodes {
		sv := storage
		if m, err := ParseMinor(n.etcd); err == nil && sv == "" {
			sv = m.String() + ".0"
		}
		ms = append(ms, MemberState{ID: n.id, Name: n.name, Healthy: true, Version: n.etcd, StorageVersion: sv})
		if s.leader == n.name {
			leader = n.id
		}
	}
	if s.cvHidden > 0 {
		s.cvHidden--
		return ms, leader, nil, "", nil
	}
	return ms, leader, nil, s.cv, nil
}

func (e *simEtcd) MoveLeader(_ context.Context, ep string, to uint64) error {
	s := (*sim)(e)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.moveErr != nil {
		return s.moveErr
	}
	if s.movedFirst != "" {
		s.event("leader %s -> %s by itself", s.leader, s.movedFirst)
		s.leader, s.movedFirst = s.movedFirst, ""
	}
	if !strings.Contains(ep, s.leader) {
		return fmt.Errorf("%s: etcdserver: not leader", ep)
	}
	for _, n := range s.nodes {
		if n.id == to {
			s.event("leader %s -> %s", s.leader, n.name)
			s.leader = n.name
		}
	}
	return nil
}

func (e *simEtcd) Downgrade(_ context.Context, minor string) error {
	s := (*sim)(e)
	s.event("downgrade %s", minor)
	s.mu.Lock()
	s.downgraded = minor
	s.mu.Unlock()
	return nil
}

func (e *simEtcd) Lock(context.Context) (func(), error) {
	s := (*sim)(e)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.locked {
		return nil, ErrLocked
	}
	s.locked = true
	return func() { s.mu.Lock(); s.locked = false; s.mu.Unlock() }, nil
}

func (e *simEtcd) PutTarget(_ context.Context, t Target) error {
	s := (*sim)(e)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.target = &t
	return nil
}

func (e *simEtcd) Target(context.Context) (Target, bool, error) {
	s := (*sim)(e)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.target == nil {
		return Target{}, false, nil
	}
	return *s.target, true, nil
}

func (e *simEtcd) DeleteTarget(context.Context) error {
	s := (*sim)(e)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.target = nil
	return nil
}

func (e *simEtcd) PutRecord(_ context.Context, r NodeRecord) error {
	s := (*sim)(e)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records[r.Name] = r
	if r.State == StateDone && r.Name == s.abortAfter {
		s.target = nil
	}
	if f := s.afterDone[r.Name]; f != nil && r.State == StateDone {
		f()
	}
	// The cluster version rises once every member runs the new minor.
	all := true
	for _, n := range s.nodes {
		all = all && n.etcd == n.newEtcd
	}
	if all {
		s.cv = s.nodes[r.Name].newEtcd
	}
	return nil
}

func (e *simEtcd) Records(context.Context) ([]NodeRecord, error) {
	s := (*sim)(e)
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []NodeRecord
	for _, r := range s.records {
		out = append(out, r)
	}
	return out, nil
}

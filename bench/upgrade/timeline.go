package main

import (
	"cmp"
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/etcdbox/etcdbox/internal/kvwriter"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/rollout"
)

// The phases of a node in the roll's picture, in the order it goes
// through them.
const (
	// phaseStaging: the roll asked the node to stage the image held,
	// until the node reports it held (all nodes at once, ahead).
	phaseStaging = "staging"
	// phaseHandOver: the node's turn until its reboot request: leadership
	// moved away if it leads, the snapshot, the slot armed.
	phaseHandOver = "hand-over"
	// phaseReboot: the reboot request until the node API answers from
	// the new boot.
	phaseReboot = "reboot"
	// phaseGate: until the node reports its slot blessed and itself a
	// healthy voter (the health gate with its settle time).
	phaseGate = "gate"
	// phaseBlessed: blessed, until the roll ends.
	phaseBlessed = "blessed"
)

// phases lists them in order.
var phases = []string{phaseStaging, phaseHandOver, phaseReboot, phaseGate, phaseBlessed}

// nodeTimes are the moments a node's phases begin; zero when not seen.
type nodeTimes struct {
	hold, held, turn, reboot, up, blessed time.Time
}

// phaseClock notes when each node enters each phase, from the calls the
// roll makes to the node APIs and etcd (clockedAPI, clockedEtcd) and
// from rebootClock's reboot requests. It changes none of the calls.
type phaseClock struct {
	mu       sync.Mutex
	nodes    map[string]*nodeTimes
	endpoint map[string]string // etcd client URL -> node, for MoveLeader
	// reboots is rebootClock's map, under rebootMu.
	rebootMu *sync.Mutex
	reboots  map[string]time.Time
}

func newPhaseClock(nodes []rollout.Node, rebootMu *sync.Mutex, reboots map[string]time.Time) *phaseClock {
	c := &phaseClock{nodes: map[string]*nodeTimes{}, endpoint: map[string]string{}, rebootMu: rebootMu, reboots: reboots}
	for _, n := range nodes {
		c.nodes[n.Name] = &nodeTimes{}
		c.endpoint[n.EtcdEndpoint] = n.Name
	}
	return c
}

// note sets *at to now unless it is set already, for node.
func (c *phaseClock) note(node string, at func(*nodeTimes) *time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.nodes[node]; ok && at(t).IsZero() {
		*at(t) = time.Now()
	}
}

// times returns node's times, with the reboot request rebootClock noted.
func (c *phaseClock) times(node string) nodeTimes {
	c.rebootMu.Lock()
	at := c.reboots[node]
	c.rebootMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	var t nodeTimes
	if p, ok := c.nodes[node]; ok {
		t = *p
	}
	t.reboot = at
	return t
}

// clockedAPI is a node's API that tells the phase clock what the roll
// asked and what the node answered.
type clockedAPI struct {
	rollout.NodeAPI
	c    *phaseClock
	node string
}

func (a clockedAPI) HoldUpgrade(ctx context.Context, image string) error {
	a.c.note(a.node, func(t *nodeTimes) *time.Time { return &t.hold })
	return a.NodeAPI.HoldUpgrade(ctx, image)
}

func (a clockedAPI) Upgrade(ctx context.Context) (nodeapi.UpgradeProgress, error) {
	p, err := a.NodeAPI.Upgrade(ctx)
	if err == nil && p.Phase == nodeapi.PhaseHeld {
		a.c.note(a.node, func(t *nodeTimes) *time.Time { return &t.held })
	}
	return p, err
}

func (a clockedAPI) Snapshot(ctx context.Context) (nodeapi.Snapshot, error) {
	a.c.note(a.node, func(t *nodeTimes) *time.Time { return &t.turn })
	return a.NodeAPI.Snapshot(ctx)
}

// Status notes the first answer from the boot after the reboot request
// (its uptime reaches back no further than the request), and the first
// that says blessed and a healthy voter after it.
func (a clockedAPI) Status(ctx context.Context) (nodeapi.Status, error) {
	st, err := a.NodeAPI.Status(ctx)
	if err != nil {
		return st, err
	}
	if at := a.c.times(a.node).reboot; !at.IsZero() && !time.Now().Add(-st.Uptime).Before(at) {
		a.c.note(a.node, func(t *nodeTimes) *time.Time { return &t.up })
		if st.Blessed && st.Member.Role == nodeapi.RoleVoter && st.Member.Healthy {
			a.c.note(a.node, func(t *nodeTimes) *time.Time { return &t.blessed })
		}
	}
	return st, err
}

// clockedEtcd is the roll's etcd, whose leadership moves begin the
// leader's turn.
type clockedEtcd struct {
	rollout.Etcd
	c *phaseClock
}

func (e clockedEtcd) MoveLeader(ctx context.Context, leaderEndpoint string, to uint64) error {
	if node, ok := e.c.endpoint[leaderEndpoint]; ok {
		e.c.note(node, func(t *nodeTimes) *time.Time { return &t.turn })
	}
	return e.Etcd.MoveLeader(ctx, leaderEndpoint, to)
}

// timeline is what the roll's picture shows; times run from the
// writer's start.
type timeline struct {
	title  string
	end    time.Duration // the roll's end
	writes []write
	nodes  []nodeRow
}

// write is one put of the writer: when it was asked, how long until it
// was acknowledged; failed when it never was (it may have taken effect).
type write struct {
	at, latency time.Duration
	failed      bool
}

// nodeRow is one node's row of bands.
type nodeRow struct {
	name  string
	bands []band
}

// band is one phase of a node, from and to in the timeline's time.
type band struct {
	phase    string
	from, to time.Duration
}

// rollTimeline builds the picture's data: the node rows from the phase
// clock, in the roll's order (by their turn; a node never reached
// last), and the writer's puts.
func rollTimeline(title string, c *phaseClock, w writerFigures, end time.Time) timeline {
	tl := timeline{title: title, end: end.Sub(w.start), writes: writes(w.history)}
	turn := map[string]time.Time{}
	for name := range c.nodes {
		t := c.times(name)
		turn[name] = t.turn
		tl.nodes = append(tl.nodes, nodeRow{name: name, bands: bands(t, w.start, end)})
	}
	slices.SortFunc(tl.nodes, func(a, b nodeRow) int {
		ta, tb := turn[a.name], turn[b.name]
		switch {
		case ta.IsZero() != tb.IsZero():
			return cmp.Compare(boolInt(ta.IsZero()), boolInt(tb.IsZero()))
		case !ta.Equal(tb):
			return ta.Compare(tb)
		}
		return cmp.Compare(a.name, b.name)
	})
	return tl
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// bands turns a node's times into its phases; a phase whose start was
// not seen is left out, and one whose end was not seen lasts until the
// next phase seen, or the end.
func bands(t nodeTimes, zero, end time.Time) []band {
	starts := []time.Time{t.hold, t.turn, t.reboot, t.up, t.blessed}
	var out []band
	for i, from := range starts {
		if from.IsZero() {
			continue
		}
		to := end
		if i == 0 && !t.held.IsZero() {
			to = t.held // staging ends when held, long before the turn
		} else {
			for _, next := range starts[i+1:] {
				if !next.IsZero() {
					to = next
					break
				}
			}
		}
		if to.After(from) {
			out = append(out, band{phase: phases[i], from: from.Sub(zero), to: to.Sub(zero)})
		}
	}
	return out
}

// writes are the puts of a kvwriter history; reads are left out.
func writes(hist []porcupine.Operation) []write {
	var out []write
	for _, op := range hist {
		in, ok := op.Input.(kvwriter.Input)
		if !ok || !in.Put {
			continue
		}
		w := write{at: time.Duration(op.Call)}
		o, _ := op.Output.(kvwriter.Output)
		if o.Stopped {
			// Under way when the writer stopped: no failure.
			continue
		}
		if o.Unknown || op.Return == math.MaxInt64 {
			w.failed = true
		} else {
			w.latency = time.Duration(op.Return - op.Call)
		}
		out = append(out, w)
	}
	return out
}

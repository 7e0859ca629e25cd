package main

import (
	"context"
	"time"

	"github.com/etcdbox/etcdbox/init/slot"
	"github.com/etcdbox/etcdbox/init/supervise"
	"github.com/etcdbox/etcdbox/init/upgrade"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// runGate watches a slot on probation with the upgrade agent's health
// gate (upgrade.Probation): it blesses the slot, or marks it bad and
// reboots into the other one. A panic in the gate is a bug of the slot on
// probation, and fails its gate like any other problem.
func (n *node) runGate(ctx context.Context) {
	if !n.onProbation() {
		return
	}
	booted := n.bootedSlot()
	fail := func(why string) {
		if n.failSlot(why) {
			n.requestShutdown("slot "+booted+" failed its health gate", true)
		}
	}
	look := n.healthLook()
	defer look.close()
	p := upgrade.Probation{
		Slot:    booted,
		Settle:  time.Duration(n.seed.Upgrade.SettleSeconds) * time.Second,
		Limit:   time.Duration(n.seed.Upgrade.GateSeconds) * time.Second,
		Every:   time.Second,
		Problem: look.problem,
		Doomed:  n.etcdDoomed,
		Bless:   func() error { return slot.Bless(n.esp, booted) },
		Fail:    fail,
		Logf:    n.log.Printf,
	}
	err := supervise.Catch("health gate", n.log.Printf, func() error {
		p.Watch(ctx)
		return nil
	})
	if err != nil {
		fail("gate failed: " + err.Error())
	}
}

// etcdDoomed says why the slot on probation can never pass its gate
// (upgrade.CrashLoop): the current etcd exited on its own again and again
// and never served. It is "" while etcd is not started: the lifecycle may
// still be waiting for its peers.
func (n *node) etcdDoomed() string {
	n.mu.Lock()
	sup, readyc, last := n.etcd, n.readyc, n.lastExit
	n.mu.Unlock()
	if sup == nil || readyc == nil {
		return ""
	}
	served := false
	select {
	case <-readyc:
		served = true
	default:
	}
	return upgrade.CrashLoop(sup.Restarts(), served, last)
}

// gateProblem says what keeps the local member from counting as healthy,
// or "" when it is a started, voting member that serves linearizable
// reads: one look, over a client of its own.
func (n *node) gateProblem(ctx context.Context) string {
	h := n.healthLook()
	defer h.close()
	return h.problem(ctx)
}

// healthLook returns a look at the local member for the health gate.
func (n *node) healthLook() *healthLook {
	return &healthLook{
		started: func() bool { return n.supervisor() != nil },
		dial:    func() (*clientv3.Client, error) { return n.localMember().client() },
	}
}

// healthLook looks at the local member as the health gate does, again
// and again, over one client kept from look to look while the member is
// healthy. A client per look cost a TLS handshake with client
// certificates, ECDSA on both sides, every second of the gate, on the
// node just booted and still catching up: load the gate must not add. A
// look that finds a problem drops its client, so that the next look dials
// afresh (etcd restarted, or certificates reissued).
type healthLook struct {
	started func() bool // etcd has a supervisor
	dial    func() (*clientv3.Client, error)
	c       *clientv3.Client
}

// problem is what keeps the member from counting as healthy, or "".
func (h *healthLook) problem(ctx context.Context) string {
	if !h.started() {
		h.close()
		return "etcd not started"
	}
	if h.c == nil {
		c, err := h.dial()
		if err != nil {
			return err.Error()
		}
		h.c = c
	}
	p := memberProblem(ctx, h.c)
	if p != "" {
		h.close()
	}
	return p
}

func (h *healthLook) close() {
	if h.c != nil {
		h.c.Close()
		h.c = nil
	}
}

// memberProblem asks the member c reaches whether it is a voting member
// that serves linearizable reads; "" when it is.
func memberProblem(ctx context.Context, c *clientv3.Client) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := c.Status(ctx, c.Endpoints()[0])
	if err != nil {
		return "etcd does not answer: " + err.Error()
	}
	if st.IsLearner {
		return "not a voting member (learner)"
	}
	if len(st.Errors) > 0 {
		return "etcd reports " + st.Errors[0]
	}
	if _, err := c.Get(ctx, "etcdbox/health", clientv3.WithLimit(1)); err != nil {
		return "no linearizable read: " + err.Error()
	}
	return ""
}

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/etcdbox/etcdbox/init/slot"
	"github.com/etcdbox/etcdbox/init/supervise"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// verdict is the health gate's answer at one moment.
type verdict int

const (
	keepWaiting verdict = iota
	bless
	failGate
)

// gateState is what the gate has seen so far.
type gateState struct {
	start        time.Time // when the gate began
	healthySince time.Time // zero while not healthy
	lastProblem  string
}

// decide is the gate's decision table. A slot is blessed once the member
// has been a started, voting, healthy member serving linearizable reads
// for settle without a break; it fails when that has not happened within
// limit, with the last problem seen as the reason.
func (g *gateState) decide(now time.Time, problem string, settle, limit time.Duration) (verdict, string) {
	if problem != "" {
		g.healthySince, g.lastProblem = time.Time{}, problem
	} else if g.healthySince.IsZero() {
		g.healthySince = now
	}
	switch {
	case !g.healthySince.IsZero() && now.Sub(g.healthySince) >= settle:
		return bless, fmt.Sprintf("healthy voting member for %s", settle)
	case now.Sub(g.start) >= limit:
		why := g.lastProblem
		if why == "" {
			why = "not healthy long enough"
		}
		return failGate, fmt.Sprintf("gate failed: %s after %s", why, limit)
	}
	return keepWaiting, ""
}

// runGate watches a slot on probation: it blesses the slot, or marks it
// bad and reboots into the other one. A panic in the gate is a bug of the
// slot on probation, and fails its gate like any other problem.
func (n *node) runGate(ctx context.Context) {
	if !n.onProbation() {
		return
	}
	err := supervise.Catch("health gate", n.log.Printf, func() error {
		n.gate(ctx)
		return nil
	})
	if err != nil && n.failSlot("gate failed: "+err.Error()) {
		n.requestShutdown("slot "+n.bootedSlot()+" failed its health gate", true)
	}
}

// gate is runGate's loop.
func (n *node) gate(ctx context.Context) {
	settle := time.Duration(n.seed.Upgrade.SettleSeconds) * time.Second
	limit := time.Duration(n.seed.Upgrade.GateSeconds) * time.Second
	booted := n.bootedSlot()
	n.log.Printf("gate: slot %s is on probation: bless after %s healthy, roll back after %s", booted, settle, limit)
	g := &gateState{start: time.Now()}
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		v, why := g.decide(time.Now(), n.gateProblem(ctx), settle, limit)
		switch v {
		case bless:
			if err := slot.Bless(n.esp, booted); err != nil {
				n.log.Printf("gate: %v", err)
				continue
			}
			n.log.Printf("slot %s blessed: %s", booted, why)
			return
		case failGate:
			if n.failSlot(why) {
				n.requestShutdown("slot "+booted+" failed its health gate", true)
			}
			return
		}
	}
}

// gateProblem says what keeps the local member from counting as healthy,
// or "" when it is a started, voting member that serves linearizable
// reads.
func (n *node) gateProblem(ctx context.Context) string {
	if n.supervisor() == nil {
		return "etcd not started"
	}
	c, err := n.localMember().client()
	if err != nil {
		return err.Error()
	}
	defer c.Close()
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

package main

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/etcdbox/etcdbox/init/recovery"
	"github.com/etcdbox/etcdbox/init/supervise"
	"github.com/etcdbox/etcdbox/nodeapi"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The quorum watch: a voting member that serves no linearizable read for
// longer than quorumLossBound, while its etcd runs, has lost its quorum
// (or never regained it after a restart). The node says so on its log
// once, and again every quorumLogEvery while it lasts, with the members
// that answer and the exact command that recovers the cluster; the node
// API's status shows it. It never acts: only the operator knows whether
// the silent members are gone for good (DESIGN §5).
const (
	quorumLogEvery = 5 * time.Minute
)

// quorumLossBound and quorumPoll are variables for the test hooks
// (ETCDBOX_TEST_QUORUM_BOUND): a container test cannot wait 45s per loss.
var (
	quorumLossBound = 45 * time.Second
	quorumPoll      = 5 * time.Second
)

// quorumState returns the quorum watch's view.
func (n *node) quorumState() nodeapi.Quorum {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.quorum
}

func (n *node) setQuorum(q nodeapi.Quorum) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.quorum = q
}

// watchQuorum runs the quorum watch until ctx ends.
func (n *node) watchQuorum(ctx context.Context) {
	var (
		c      *clientv3.Client
		last   *supervise.Supervisor
		served = time.Now()
		lost   bool
		logged time.Time
		// directed: the seed's recovery directive was followed (once
		// per boot).
		directed bool
		t        = time.NewTicker(quorumPoll)
		resetTo  = func(now time.Time) {
			if lost {
				n.log.Printf("quorum: regained (or no longer a voter)")
			}
			served, lost = now, false
			n.setQuorum(nodeapi.Quorum{})
		}
	)
	defer t.Stop()
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		sup := n.supervisor()
		rec, _ := recovery.Load(n.recoveryFile())
		if sup == nil || !n.wasMember() || recovery.Fenced(rec) || sup.Pid() == 0 {
			resetTo(now)
			continue
		}
		if sup != last {
			// A new etcd (the lifecycle started another): it has the
			// bound to serve.
			last = sup
			resetTo(now)
			if c != nil {
				c.Close()
				c = nil
			}
		}
		if c == nil {
			var err error
			if c, err = n.localMember().client(); err != nil {
				continue
			}
		}
		if ready(ctx, c) == nil || isLearner(ctx, c) {
			resetTo(now)
			continue
		}
		if now.Sub(served) < quorumLossBound {
			continue
		}
		q := n.probeQuorum(ctx, served)
		n.setQuorum(q)
		if !lost || now.Sub(logged) >= quorumLogEvery {
			n.log.Printf("quorum lost: member %s has served no linearizable read for %s; nodes answering: %s; silent: %s. Nothing is done by itself. If the silent members are gone for good, recover with: %s",
				n.name, now.Sub(served).Round(time.Second), listOrNone(q.Answering), listOrNone(q.Silent), q.Command)
			logged = now
		}
		if !lost && !directed {
			// The operator's directive, given ahead in the seed.
			directed = true
			lost = true
			n.followDirective(ctx)
			continue
		}
		lost = true
	}
}

// probeQuorum asks every peer's node API for its formation answer, which
// says whether the node runs and holds data.
func (n *node) probeQuorum(ctx context.Context, served time.Time) nodeapi.Quorum {
	q := nodeapi.Quorum{Lost: true, Since: served, Command: "etcdbox recover --survivor " + n.name}
	q.Answering = append(q.Answering, n.name+" (this node)")
	peers, err := n.peers(ctx, n.localMember())
	if err != nil {
		n.log.Printf("quorum: %v", err)
		return q
	}
	for _, a := range n.askFormation(ctx, peers) {
		switch {
		case a.Err != nil:
			q.Silent = append(q.Silent, a.Name)
		case !a.Formation.HasData:
			q.Answering = append(q.Answering, a.Name+" (no data)")
		default:
			q.Answering = append(q.Answering, a.Name+" (holds data)")
		}
	}
	slices.Sort(q.Silent)
	return q
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

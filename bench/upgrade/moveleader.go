package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/etcdbox/etcdbox/rollout"
)

// moves is what the plain leadership moves measured: the yardstick of the
// roll's write gap, since a roll moves leadership once (off the leader
// before its reboot) and a client cannot write while leadership moves.
type moves struct {
	n      int
	writer writerFigures
	// ackGap is the writer's ackGap: its longest gap less its start, the
	// measure of the fresh moves, which start a writer for each move.
	ackGap time.Duration
}

// moveLeaders moves leadership n times, as `etcdctl move-leader` does
// (the leader asked to hand over to a voter), under the writer, waiting
// for the cluster to be ready and the writer to have written again before
// each move. Nothing reboots.
func (r *rig) moveLeaders(ctx context.Context, n int, stdout io.Writer) (moves, error) {
	out := moves{n: n}
	w, err := r.startWriter(ctx)
	if err != nil {
		return out, err
	}
	fmt.Fprintf(stdout, "plain leadership moves (etcd's MoveLeader at the leader, nothing rebooted), under the writer:\n")
	for i := range n {
		c, err := r.waitReady(ctx)
		if err != nil {
			w.Stop(0)
			return out, fmt.Errorf("before move %d: %w", i+1, err)
		}
		from := c.LeaderName()
		to, ok := otherVoter(c)
		if from == "" || !ok {
			w.Stop(0)
			return out, fmt.Errorf("move %d: no leader, or no other voter: %+v", i+1, c.Members)
		}
		ep := r.nodes[slices.IndexFunc(r.nodes, func(n rollout.Node) bool { return n.Name == from })].EtcdEndpoint
		t := time.Now()
		if err := r.etcd.MoveLeader(ctx, ep, to.ID); err != nil {
			w.Stop(0)
			return out, fmt.Errorf("move %d: %w", i+1, err)
		}
		moved := time.Since(t)
		// The gap a move causes ends with the first put after it.
		if err := waitFor(ctx, 30*time.Second, func() bool { return w.LastAck().After(t.Add(moved)) }); err != nil {
			w.Stop(0)
			return out, fmt.Errorf("move %d: the writer wrote nothing after it: %w", i+1, err)
		}
		fmt.Fprintf(stdout, "  %s -> %s: MoveLeader answered in %s\n", from, to.Name, moved.Round(time.Millisecond))
	}
	out.writer = r.stopWriter(w)
	out.ackGap = ackGap(out.writer.history)
	fmt.Fprintf(stdout, "  writer during the moves: %s; longest gap between puts %s\n", out.writer, out.ackGap.Round(10*time.Millisecond))
	return out, nil
}

// otherVoter returns a voting member of c that does not lead.
func otherVoter(c rollout.Cluster) (rollout.MemberState, bool) {
	for _, m := range c.Members {
		if !m.Learner && m.ID != c.Leader && m.Name != "" {
			return m, true
		}
	}
	return rollout.MemberState{}, false
}

// waitFor polls cond every 50 ms until it holds, for up to within.
func waitFor(ctx context.Context, within time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for !cond() {
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

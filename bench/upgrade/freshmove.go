package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/etcdbox/etcdbox/internal/kvwriter"
	"github.com/etcdbox/etcdbox/rollout"
)

// freshMoves is what the leadership moves to a member just back from a
// reboot measured: the roll's case, where the leader hands over to a node
// that finished its own turn, blessed, a moment before.
type freshMoves struct {
	age   time.Duration   // from healthy voter again to the move
	gaps  []time.Duration // each move's ackGap
	moved []time.Duration // each MoveLeader's answer
	// checks are porcupine's verdicts on each move's writer.
	checks []porcupine.CheckResult
}

// longest is the longest of the moves' gaps.
func (f freshMoves) longest() time.Duration {
	if len(f.gaps) == 0 {
		return 0
	}
	return slices.Max(f.gaps)
}

// freshMoves reboots a follower, waits until it has been a healthy voter
// again for age (the roll's settle and its poll, after which the roll
// blesses it and moves on), and moves leadership to it, n times, each
// under a writer of its own that has written for a while before the move
// and keeps writing a while after it, so that a slow first lead shows as
// well as the hand-over. The writer runs only around the move: the
// reboot's own gap is the plain reboots' figure.
func (r *rig) freshMoves(ctx context.Context, n int, age time.Duration, stdout io.Writer) (freshMoves, error) {
	out := freshMoves{age: age}
	fmt.Fprintf(stdout, "leadership moved to a member %s after it is a healthy voter again after a plain reboot, as the roll moves it to a node it just blessed:\n", age)
	for i := range n {
		c, err := r.waitReady(ctx)
		if err != nil {
			return out, fmt.Errorf("before fresh move %d: %w", i+1, err)
		}
		to, ok := otherVoter(c)
		if !ok {
			return out, fmt.Errorf("fresh move %d: no voter other than the leader: %+v", i+1, c.Members)
		}
		b, err := r.reboot(ctx, to.Name)
		if err != nil {
			return out, fmt.Errorf("fresh move %d: reboot %s: %w", i+1, to.Name, err)
		}
		if err := sleep(ctx, age); err != nil {
			return out, err
		}
		if c, err = r.waitReady(ctx); err != nil {
			return out, fmt.Errorf("fresh move %d: after rebooting %s: %w", i+1, to.Name, err)
		}
		from := c.LeaderName()
		if from == to.Name {
			fmt.Fprintf(stdout, "  %s leads already, after its reboot (%s): no move\n", to.Name, secs(b.total))
			continue
		}
		gap, moved, check, err := r.moveUnderWriter(ctx, from, to)
		if err != nil {
			return out, fmt.Errorf("fresh move %d: %w", i+1, err)
		}
		out.gaps, out.moved, out.checks = append(out.gaps, gap), append(out.moved, moved), append(out.checks, check)
		fmt.Fprintf(stdout, "  %s -> %s (back from its reboot in %s): MoveLeader answered in %s, longest gap between puts %s, porcupine: %s\n",
			from, to.Name, secs(b.total), moved.Round(time.Millisecond), gap.Round(10*time.Millisecond), checkName(check))
	}
	return out, nil
}

// Around each fresh move, the writer writes this long before it and at
// least this long after its first put after it.
const moveMargin = 3 * time.Second

// moveUnderWriter starts a writer, lets it write for moveMargin, moves
// leadership from the leader to to, and stops the writer moveMargin after
// its first put after the move. It returns the writer's ackGap, how long
// MoveLeader took to answer, and porcupine's verdict.
func (r *rig) moveUnderWriter(ctx context.Context, from string, to rollout.MemberState) (time.Duration, time.Duration, porcupine.CheckResult, error) {
	w, err := r.startWriter(ctx)
	if err != nil {
		return 0, 0, porcupine.Unknown, err
	}
	// Until the first put, LastAck is the writer's start.
	started := w.LastAck()
	if err := waitFor(ctx, 30*time.Second, func() bool { return w.LastAck().After(started) }); err != nil {
		w.Stop(0)
		return 0, 0, porcupine.Unknown, fmt.Errorf("the writer wrote nothing: %w", err)
	}
	first := w.LastAck()
	if err := waitFor(ctx, 30*time.Second, func() bool { return w.LastAck().After(first.Add(moveMargin)) }); err != nil {
		w.Stop(0)
		return 0, 0, porcupine.Unknown, fmt.Errorf("the writer stopped writing before the move: %w", err)
	}
	ep := r.nodes[slices.IndexFunc(r.nodes, func(n rollout.Node) bool { return n.Name == from })].EtcdEndpoint
	t := time.Now()
	if err := r.etcd.MoveLeader(ctx, ep, to.ID); err != nil {
		w.Stop(0)
		return 0, 0, porcupine.Unknown, fmt.Errorf("move %s -> %s: %w", from, to.Name, err)
	}
	moved := time.Since(t)
	if err := waitFor(ctx, 30*time.Second, func() bool { return w.LastAck().After(t.Add(moved)) }); err != nil {
		w.Stop(0)
		return 0, 0, porcupine.Unknown, fmt.Errorf("move %s -> %s: the writer wrote nothing after it: %w", from, to.Name, err)
	}
	after := w.LastAck()
	if err := waitFor(ctx, 30*time.Second, func() bool { return w.LastAck().After(after.Add(moveMargin)) }); err != nil {
		w.Stop(0)
		return 0, 0, porcupine.Unknown, fmt.Errorf("move %s -> %s: the writer stopped writing after it: %w", from, to.Name, err)
	}
	f := r.stopWriter(w)
	if f.err != nil {
		return 0, 0, f.check, fmt.Errorf("move %s -> %s: the writer's final reads: %w", from, to.Name, f.err)
	}
	return ackGap(f.history), moved, f.check, nil
}

// ackGap is the longest time between two acknowledged puts of hist, one
// after the other, whichever worker made them: the writer's longest write
// gap less its own start (the dial and the first put), which a move made
// once it writes does not cause.
func ackGap(hist []porcupine.Operation) time.Duration {
	var acks []int64
	for _, op := range hist {
		in, _ := op.Input.(kvwriter.Input)
		o, _ := op.Output.(kvwriter.Output)
		if in.Put && o.Set && !o.Unknown {
			acks = append(acks, op.Return)
		}
	}
	slices.Sort(acks)
	var gap int64
	for i := 1; i < len(acks); i++ {
		gap = max(gap, acks[i]-acks[i-1])
	}
	return time.Duration(gap)
}

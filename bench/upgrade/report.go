package main

import (
	"fmt"
	"io"
	"time"

	"github.com/etcdbox/etcdbox/bench/internal/stats"
)

// rebootStats summarises the plain reboots: request to healthy voter, its
// part after the kernel started, and its part until the init's shutdown
// was complete.
type rebootStats struct{ total, boot, shutdown stats.Summary }

func rebootSummary(runs []reboot) rebootStats {
	var total, boot, shutdown []time.Duration
	for _, b := range runs {
		total = append(total, b.total)
		boot = append(boot, b.boot())
		shutdown = append(shutdown, b.shutdown)
	}
	return rebootStats{stats.Durations(total), stats.Durations(boot), stats.Durations(shutdown)}
}

// rollStats summarises the roll's steps: each whole, and its part from the
// reboot request until blessed.
type rollStats struct{ total, back stats.Summary }

func rollSummary(steps []step) rollStats {
	var total, back []time.Duration
	for _, s := range steps {
		total = append(total, s.total)
		if s.back > 0 {
			back = append(back, s.back)
		}
	}
	return rollStats{stats.Durations(total), stats.Durations(back)}
}

// one is a single measurement as a Summary, for stats.Ratio.
func one(d time.Duration) stats.Summary { return stats.Durations([]time.Duration{d}) }

// printRatios compares the roll with a plain reboot of this run (medians).
func printRatios(w io.Writer, reb reboots, mv moves, fresh freshMoves, r roll) {
	rs, ro := rebootSummary(reb.runs), rollSummary(r.steps)
	fmt.Fprintf(w, "ratios to a plain reboot, request -> healthy voter (medians, this run):\n")
	fmt.Fprintf(w, "  per-node roll step / reboot:                  %s\n", stats.Ratio(ro.total, rs.total))
	fmt.Fprintf(w, "  roll's reboot request -> blessed / reboot:    %s\n", stats.Ratio(ro.back, rs.total))
	fmt.Fprintf(w, "  roll total / reboot:                          %s\n", stats.Ratio(one(r.total), rs.total))
	fmt.Fprintf(w, "  longest write gap in the roll / reboot:       %s\n", stats.Ratio(one(r.writer.gap), rs.total))
	fmt.Fprintf(w, "  longest write gap, roll / plain reboots:      %s\n", stats.Ratio(one(r.writer.gap), one(reb.writer.gap)))
	fmt.Fprintf(w, "  longest write gap, roll / move-leader:        %s (goal <= 2x)\n", stats.Ratio(one(r.writer.gap), one(mv.writer.gap)))
	if len(fresh.gaps) > 0 {
		fmt.Fprintf(w, "  longest gap between puts, move to a member back from a reboot / plain move: %s\n",
			stats.Ratio(one(fresh.longest()), one(mv.ackGap)))
	}
}

// printBack prints the way back from one bad slot and its ratios to a
// plain reboot.
func printBack(w io.Writer, b badImage, bk back, reb reboots) {
	rs := rebootSummary(reb.runs)
	fmt.Fprintf(w, "bad slot back to the old slot (%s; node %s, slot %s bad, slot %s old):\n", b.what, bk.node, bk.bad, bk.old)
	fmt.Fprintf(w, "  reboot request -> bad slot's kernel: %s\n", secs(bk.kernel))
	fmt.Fprintf(w, "  from the bad slot's kernel: failure on the console %s, old slot's kernel %s, etcd ready %s, healthy voter %s\n",
		secs(bk.failed), secs(bk.oldKernel), secs(bk.etcdReady), secs(bk.healthy))
	fmt.Fprintf(w, "  bad slot's kernel -> healthy voter on the old slot / plain reboot's kernel -> healthy voter: %s\n",
		stats.Ratio(one(bk.healthy), rs.boot))
	fmt.Fprintf(w, "  reboot request -> healthy voter on the old slot / plain reboot:                       %s\n",
		stats.Ratio(one(bk.kernel+bk.healthy), rs.total))
	fmt.Fprintf(w, "  slot %s is now %s; last rollback: %q\n", bk.bad, bk.badState, bk.reason)
}

// secs prints d in seconds, "n/a" for zero (not measured).
func secs(d time.Duration) string {
	if d == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

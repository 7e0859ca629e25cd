package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/etcdbox/etcdbox/bench/internal/figures"
	"github.com/etcdbox/etcdbox/bench/internal/stats"
)

// recordRoll records the plain reboots' and the roll's figures for
// bench.json (bench/internal/figures), each with the reference of its
// printed ratio: a plain reboot of this run, or the plain reboots'
// longest write gap.
func recordRoll(reb reboots, mv moves, fresh freshMoves, r roll) error {
	rs, ro := rebootSummary(reb.runs), rollSummary(r.steps)
	s := func(key, name string, v float64, n int) figures.Figure {
		return figures.Figure{Key: key, Name: name, Value: v, Unit: "s", N: n}
	}
	const plain = "one plain reboot, request to healthy voter"
	total := s("upgrade.roll-total", "roll of 3 nodes, total", r.total.Seconds(), 0).Ref(plain, rs.total.Median)
	total.Goal = "<= 3.5x"
	gap := s("upgrade.roll-gap", "longest write gap during the roll", r.writer.gap.Seconds(), 0).
		Ref(fmt.Sprintf("the longest gap of %d plain move-leaders", mv.n), mv.writer.gap.Seconds())
	gap.Goal = "<= 2x"
	rebootGap := s("upgrade.reboot-gap", "longest write gap during the plain reboots", reb.writer.gap.Seconds(), 0).
		Ref(fmt.Sprintf("the longest gap of %d plain move-leaders", mv.n), mv.writer.gap.Seconds())
	figs := []figures.Figure{
		s("upgrade.reboot", "plain reboot, request to healthy voter", rs.total.Median, rs.total.N),
		s("upgrade.reboot-boot", "plain reboot, kernel to healthy voter", rs.boot.Median, rs.boot.N),
		s("upgrade.reboot-shutdown", "plain reboot, request to the init's shutdown complete", rs.shutdown.Median, rs.shutdown.N).Ref(plain, rs.total.Median),
		total,
		s("upgrade.roll-step", "roll, per node (snapshot, arm, reboot, gate)", ro.total.Median, ro.total.N).Ref(plain, rs.total.Median),
		s("upgrade.roll-back", "roll, per node: reboot request to blessed", ro.back.Median, ro.back.N).Ref(plain, rs.total.Median),
		gap,
		rebootGap,
	}
	if len(reb.watched) > 0 {
		w := stats.Durations(reb.watched)
		figs = append(figs, s("upgrade.reboot-watched-shutdown", "plain reboot with a watch open on the node, request to the init's shutdown complete", w.Median, w.N).
			Ref("the same without a watch", rs.shutdown.Median))
	}
	if len(fresh.gaps) > 0 {
		figs = append(figs, s("upgrade.fresh-move-gap",
			fmt.Sprintf("leadership moved to a member %s after it is a healthy voter again: longest gap between puts", fresh.age),
			fresh.longest().Seconds(), 0).
			Ref(fmt.Sprintf("the same in %d plain move-leaders", mv.n), mv.ackGap.Seconds()))
	}
	if rs.total.N == 0 {
		figs = figs[3:] // no reboot measured: keep the roll's values alone
	}
	return figures.Record("upgrade", figs...)
}

// recordBack records the way back from one bad slot against a plain
// reboot's kernel to healthy voter, as printBack prints it.
func recordBack(b badImage, bk back, reb reboots) error {
	rs := rebootSummary(reb.runs)
	return figures.Record("upgrade", figures.Figure{
		Key: "upgrade.back-" + b.name, Name: "bad slot (" + b.what + "): its kernel to healthy voter on the old slot",
		Value: bk.healthy.Seconds(), Unit: "s",
	}.Ref("a plain reboot's kernel to healthy voter", rs.boot.Median))
}

// drawRoll writes the roll's picture to path, when path is set.
func drawRoll(path string, tl timeline, stdout io.Writer) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeSVG(f, tl); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "roll timeline (%d puts, %d nodes, %s): %s\n", len(tl.writes), len(tl.nodes), tl.end.Round(time.Second), path)
	return nil
}

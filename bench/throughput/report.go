package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/etcdbox/etcdbox/bench/internal/figures"
	"github.com/etcdbox/etcdbox/bench/load"
)

// section is this bench's section of bench.json.
const section = "throughput"

// Figure references and goals (issue 17).
const (
	floorRef       = "floor VM"
	tlsFloorRef    = "floor VM, mutual TLS"
	throughputGoal = ">= 0.95x"
)

// report prints ours against floor, point by point, with the ratio
// ours/floor of each figure, then, with the TLS floor, ours against it
// and it against the floor (what TLS costs), then check perf's lines,
// and records the figures.
func report(w io.Writer, ours, floor clusterRun, floorTLS *clusterRun) error {
	fmt.Fprintf(w, "== etcd through the appliance: ours = 3 etcdbox nodes (mutual TLS), floor = 3 floor VMs (plain http); ratio = ours/floor\n")
	fmt.Fprintf(w, "clusters up in: ours %s, floor %s", ours.upTook.Round(100*time.Millisecond), floor.upTook.Round(100*time.Millisecond))
	if floorTLS != nil {
		fmt.Fprintf(w, ", floor-tls %s", floorTLS.upTook.Round(100*time.Millisecond))
	}
	fmt.Fprintln(w)
	var figs []figures.Figure
	table(w, ours, floor, func(o, f load.Result) { figs = append(figs, pointFigures(o, f)...) })
	if floorTLS != nil {
		fmt.Fprintf(w, "== ours against floor-tls = 3 floor VMs whose etcd speaks mutual TLS as ours does; ratio = ours/floor-tls (the appliance's cost beyond TLS)\n")
		table(w, ours, *floorTLS, func(o, f load.Result) { figs = append(figs, tlsFigures(o, f)...) })
		fmt.Fprintf(w, "== floor-tls against floor; ratio = floor-tls/floor (what mutual TLS costs etcd here)\n")
		table(w, *floorTLS, floor, nil)
	}
	runs := []clusterRun{ours, floor}
	if floorTLS != nil {
		runs = append(runs, *floorTLS)
	}
	for _, r := range runs {
		switch {
		case r.perfErr != nil:
			fmt.Fprintf(w, "etcdctl check perf, %s: %v\n", r.name, r.perfErr)
		case len(r.perf) > 0:
			fmt.Fprintf(w, "etcdctl check perf, %s: %s\n", r.name, strings.Join(r.perf, "; "))
		}
	}
	if ours.perfOps > 0 && floor.perfOps > 0 {
		fmt.Fprintf(w, "etcdctl check perf throughput, ours/floor: %s\n", ratio(ours.perfOps, floor.perfOps))
		figs = append(figs, figures.Figure{
			Key: "checkperf.ops", Name: "etcdctl check perf throughput through the appliance",
			Value: ours.perfOps, Unit: "ops/s",
		}.Ref(floorRef, floor.perfOps))
	}
	if floorTLS != nil && ours.perfOps > 0 && floorTLS.perfOps > 0 {
		fmt.Fprintf(w, "etcdctl check perf throughput, ours/floor-tls: %s\n", ratio(ours.perfOps, floorTLS.perfOps))
		figs = append(figs, figures.Figure{
			Key: "checkperf.ops.tlsfloor", Name: "etcdctl check perf throughput through the appliance, against the TLS floor",
			Value: ours.perfOps, Unit: "ops/s",
		}.Ref(tlsFloorRef, floorTLS.perfOps))
	}
	return figures.Record(section, figs...)
}

// table prints a against b, point by point, with the ratio a/b of each
// figure; add, when set, takes each point both answered.
func table(w io.Writer, a, b clusterRun, add func(a, b load.Result)) {
	fmt.Fprintf(w, "%-10s %14s %14s %6s | %12s %12s %6s | %12s %12s %6s | %s\n",
		"point", a.name+" ops/s", b.name+" ops/s", "ratio", a.name+" p50", b.name+" p50", "ratio", a.name+" p99", b.name+" p99", "ratio",
		"ops (errors) "+a.name+", "+b.name)
	for i, o := range a.results {
		if i >= len(b.results) {
			break
		}
		f := b.results[i]
		if o.Ops == 0 || f.Ops == 0 {
			// No latency to compare: a cluster answered nothing in time.
			fmt.Fprintf(w, "%-10s %14.1f %14.1f %6s | %s | %d (%d), %d (%d); not recorded\n",
				o.Name(), o.Throughput(), f.Throughput(), "n/a", "no answer in the measured time", o.Ops, o.Errors, f.Ops, f.Errors)
			continue
		}
		p50o, p50f := o.Latency.Quantile(0.5), f.Latency.Quantile(0.5)
		p99o, p99f := o.Latency.Quantile(0.99), f.Latency.Quantile(0.99)
		fmt.Fprintf(w, "%-10s %14.1f %14.1f %6s | %12s %12s %6s | %12s %12s %6s | %d (%d), %d (%d)\n",
			o.Name(), o.Throughput(), f.Throughput(), ratio(o.Throughput(), f.Throughput()),
			load.Round(p50o), load.Round(p50f), ratio(ms(p50o), ms(p50f)),
			load.Round(p99o), load.Round(p99f), ratio(ms(p99o), ms(p99f)),
			o.Ops, o.Errors, f.Ops, f.Errors)
		if add != nil {
			add(o, f)
		}
	}
}

// tlsFigures are one load point's throughput and p50 against the TLS
// floor's: the appliance's cost beyond TLS. No goal: issue 17's is
// against the plain floor.
func tlsFigures(o, f load.Result) []figures.Figure {
	key, what := pointName(o)
	return []figures.Figure{
		figures.Figure{Key: key + ".ops.tlsfloor", Name: what + ", throughput, against the TLS floor", Value: o.Throughput(), Unit: "ops/s"}.Ref(tlsFloorRef, f.Throughput()),
		figures.Figure{Key: key + ".p50.tlsfloor", Name: what + ", p50 latency, against the TLS floor", Value: ms(o.Latency.Quantile(0.5)), Unit: "ms",
			N: int(o.Ops)}.Ref(tlsFloorRef, ms(f.Latency.Quantile(0.5))),
	}
}

// pointName is a point's figure key prefix and its words.
func pointName(o load.Result) (key, what string) {
	key = fmt.Sprintf("%s.c%d", o.Op, o.Clients)
	clients := fmt.Sprintf("%d clients", o.Clients)
	if o.Clients == 1 {
		clients = "1 client"
	}
	what = fmt.Sprintf("etcd %s through the appliance, %s", o.Op, clients)
	if o.Op == load.Range {
		what = "etcd linearizable range through the appliance, " + clients
	}
	return key, what
}

// pointFigures are one load point's figures: throughput (with issue 17's
// goal), p50 and p99, each against the floor's. Only the p50 is a
// median, of the point's requests (N).
func pointFigures(o, f load.Result) []figures.Figure {
	key, what := pointName(o)
	return []figures.Figure{
		figures.Figure{Key: key + ".ops", Name: what + ", throughput", Value: o.Throughput(), Unit: "ops/s",
			Goal: throughputGoal}.Ref(floorRef, f.Throughput()),
		figures.Figure{Key: key + ".p50", Name: what + ", p50 latency", Value: ms(o.Latency.Quantile(0.5)), Unit: "ms",
			N: int(o.Ops)}.Ref(floorRef, ms(f.Latency.Quantile(0.5))),
		figures.Figure{Key: key + ".p99", Name: what + ", p99 latency", Value: ms(o.Latency.Quantile(0.99)), Unit: "ms"}.Ref(floorRef, ms(f.Latency.Quantile(0.99))),
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ratio prints a/b as "0.97x", or "n/a".
func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// options are the command-line settings of one bench run.
type options struct {
	sysroot   string        // kernel, modules, systemd-boot, OVMF
	etcd      string        // upstream etcd server binary
	init      string        // the etcdbox init
	workDir   string        // images and the cluster; empty: a temporary directory
	keep      bool          // keep workDir
	reboots   int           // plain reboots, cycling over the nodes
	watched   int           // plain reboots with a watch open on the node
	fresh     int           // leadership moves to a member just back from a reboot
	bad       []string      // names of the bad images to roll back from, in order
	memoryMiB int           // per VM
	poll      time.Duration // node API polling, the same for reboots and the roll
	timeout   time.Duration // the whole run
	svg       string        // where the roll's timeline picture goes; empty: none
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	var bad string
	fs := flag.NewFlagSet("upgrade", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.sysroot, "sysroot", ".cache/sysroot", "root holding the kernel, modules, systemd-boot and OVMF")
	fs.StringVar(&o.etcd, "etcd", "", "etcd server binary (default: the init's own)")
	fs.StringVar(&o.init, "init", "bin/init", "etcdbox init binary")
	fs.StringVar(&o.workDir, "work", "", "work directory for images and the cluster (default: a temporary one, removed)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work directory (consoles, images)")
	fs.IntVar(&o.reboots, "reboots", 3, "plain reboots to time, one node after the other")
	fs.IntVar(&o.watched, "watched", 3, "plain reboots with a watch open on the node, to time its shutdown (0: none)")
	fs.IntVar(&o.fresh, "fresh", 3, "leadership moves to a member just back from a plain reboot, under the writer (0: none)")
	fs.StringVar(&bad, "bad", "panic,nomod", "bad images to roll back from, in order (comma-separated: "+strings.Join(badNames, ", ")+"; empty: none)")
	fs.IntVar(&o.memoryMiB, "mem", 768, "guest memory in MiB")
	fs.DurationVar(&o.poll, "poll", time.Second, "node API polling interval")
	fs.DurationVar(&o.timeout, "timeout", time.Hour, "deadline of the whole run")
	fs.StringVar(&o.svg, "svg", os.Getenv("BENCH_SVG"), "write the roll's timeline (write latency, each node's phases) to this SVG file (default $BENCH_SVG; empty: none)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if bad != "" {
		o.bad = strings.Split(bad, ",")
	}
	for _, b := range o.bad {
		if !slices.Contains(badNames, b) {
			return o, fmt.Errorf("-bad: unknown image %q, want one of %s", b, strings.Join(badNames, ", "))
		}
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	case o.reboots < 1:
		return o, fmt.Errorf("-reboots %d: want at least one, the other figures are its ratios", o.reboots)
	case o.watched < 0:
		return o, fmt.Errorf("-watched %d: want 0 or more", o.watched)
	case o.fresh < 0:
		return o, fmt.Errorf("-fresh %d: want 0 or more", o.fresh)
	case o.poll <= 0 || o.timeout <= 0:
		return o, fmt.Errorf("-poll and -timeout must be positive")
	}
	return o, nil
}

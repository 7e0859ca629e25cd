package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"
)

// options are the command-line settings of one bench run.
type options struct {
	boots     int           // boots per image
	sysroot   string        // kernel, modules, systemd-boot, OVMF
	etcd      string        // upstream etcd server binary
	init      string        // the etcdbox init
	floorInit string        // the bench/floorinit binary
	workDir   string        // where images and VMs go; empty: a temporary directory
	keep      bool          // keep workDir
	timeout   time.Duration // one boot to healthy
	poll      time.Duration // how often a new read attempt starts
	memoryMiB int
	cpus      int
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("boot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.boots, "n", 3, "boots per image (ours and floor alternate)")
	fs.StringVar(&o.sysroot, "sysroot", ".cache/sysroot", "root holding the kernel, modules, systemd-boot and OVMF")
	fs.StringVar(&o.etcd, "etcd", "bin/etcd", "etcd server binary of the floor image (ours runs the init's own, as etcdbox build does by default)")
	fs.StringVar(&o.init, "init", "bin/init", "etcdbox init binary")
	fs.StringVar(&o.floorInit, "floor-init", "", "floor init binary (built from ./bench/floorinit)")
	fs.StringVar(&o.workDir, "work", "", "work directory for images and VMs (default: a temporary one, removed)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work directory (VM consoles, images)")
	fs.DurationVar(&o.timeout, "timeout", 4*time.Minute, "deadline of one boot to healthy")
	fs.DurationVar(&o.poll, "poll", 100*time.Millisecond, "interval between read attempts")
	fs.IntVar(&o.memoryMiB, "mem", 1024, "guest memory in MiB")
	fs.IntVar(&o.cpus, "cpus", 1, "guest vCPUs")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	case o.boots < 1:
		return o, fmt.Errorf("-n %d: want at least one boot", o.boots)
	case o.floorInit == "":
		return o, errors.New("-floor-init: no path given")
	case o.poll <= 0 || o.timeout <= 0:
		return o, errors.New("-poll and -timeout must be positive")
	}
	return o, nil
}

// Command init is etcdbox's PID 1, and the entrypoint of its container
// form. It reads top to bottom like the boot (DESIGN §2):
//
//	mount /proc /sys /dev /run cgroup2; log to kmsg and the console
//	load kernel modules (coldplug by modalias)
//	arm the hardware watchdog; listen for the power button
//	mount the ESP (the A/B slots)
//	find DATA, grow and format it on first boot, e2fsck -p, mount it
//	read the seed; set the hostname; bring up the network
//	issue this node's certificates from the seed's CA
//	serve the node API, which answers the formation handshake
//	(formation.go) before any etcd starts
//	find the peers and decide: restart, bootstrap (only on every expected
//	initial member's word that the cluster never formed, with a token of
//	this formation), join as a learner or wait (lifecycle.go); start etcd
//	as a supervised child; print "etcdbox: etcd ready"; on a new slot, run
//	the health gate (gate.go)
//	on power button, SIGTERM or an API reboot: stop etcd, sync, unmount,
//	power off or reboot
//
// A new slot that fails (the gate, or a fatal init error while on
// probation) is marked bad and the node reboots into the old one.
//
// In container mode (not PID 1, or --container) the kernel-facing steps are
// skipped and the seed comes from a file.
//
// PID 1 never exits. An error an operator must fix (a bad seed, a DATA
// partition that e2fsck cannot preen) is printed and the node waits, with
// its data untouched; any other fatal error is logged, synced, and the
// node reboots.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/etcdbox/etcdbox/init/supervise"
)

// step is one boot step. Optional steps log their failure and boot goes on.
type step struct {
	name     string
	optional bool
	run      func(ctx context.Context) error
}

func (s step) String() string { return s.name }

// Set only in test images (testhooks.go): startTestHooks serves the test
// hooks once the node is up; beforeStep may inject a fault before a boot
// step (a hang or a crash of the init, named on the kernel command line);
// watchdogHealthy, when set, says whether the watchdog is still fed.
var (
	startTestHooks  func(ctx context.Context, n *node)
	beforeStep      func(n *node, step string)
	watchdogHealthy func() bool
)

// errWait marks errors an operator must act on: the node reports them and
// waits instead of rebooting into the same failure.
var errWait = errors.New("waiting for an operator")

func main() {
	n := newNode()
	flag.BoolVar(&n.container, "container", os.Getpid() != 1, "run in container mode (default when not PID 1)")
	flag.StringVar(&n.seedFile, "seed", os.Getenv("ETCDBOX_SEED"), "container mode: the seed file")
	flag.StringVar(&n.root, "data-dir", "/var/lib/etcdbox", "where DATA is mounted (container mode: any directory)")
	flag.StringVar(&n.etcdBin, "etcd", "/usr/bin/etcd", "the etcd binary")
	flag.StringVar(&n.listenIP, "listen-ip", "0.0.0.0", "the address etcd listens on")
	flag.Parse()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Every child is waited for by one reaper, orphans included.
	if err := supervise.StartReaper(); err != nil {
		n.log.Printf("reaper: %v", err)
	}
	go n.handleShutdown()
	if err := n.boot(ctx); err != nil {
		n.fail(err)
	}
	if startTestHooks != nil {
		startTestHooks(ctx, n)
	}
	select {} // PID 1 never returns; handleShutdown ends the node
}

// boot runs the boot steps in order.
func (n *node) boot(ctx context.Context) error {
	var steps []step
	if !n.container {
		steps = append(steps,
			step{"mount pseudo filesystems", false, n.mountPseudo},
			step{"load kernel modules", true, n.loadModules},
			step{"arm watchdog", true, n.armWatchdog},
			step{"listen for the power button", true, n.watchPowerButton},
			step{"mount ESP", true, n.mountESP},
			step{"prepare DATA", false, n.prepareData},
		)
	}
	steps = append(steps,
		step{"read seed", false, n.readSeed},
	)
	if !n.container {
		steps = append(steps, step{"configure network", false, n.configureNetwork})
	} else {
		steps = append(steps, step{"find addresses", false, n.containerAddresses})
	}
	steps = append(steps,
		step{"issue certificates", false, n.issueCertificates},
		// Before etcd: the formation handshake asks every node's API
		// whether it ever formed the cluster before any etcd starts.
		step{"serve the node API", true, n.serveAPI},
		step{"start etcd", false, n.startEtcd},
	)
	for _, s := range steps {
		n.noteReached(s.name)
		if beforeStep != nil {
			beforeStep(n, s.name)
		}
		start := time.Now()
		if err := s.run(ctx); err != nil {
			if s.optional {
				n.log.Printf("%s: %v (continuing)", s, err)
				continue
			}
			return fmt.Errorf("%s: %w", s, err)
		}
		n.log.Printf("%s: done in %s", s, time.Since(start).Round(time.Millisecond))
	}
	n.noteReached("the health gate")
	return nil
}

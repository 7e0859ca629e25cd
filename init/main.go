// Command init is etcdbox's PID 1, and the entrypoint of its container
// form. It reads top to bottom like the boot (DESIGN §2):
//
//	mount /proc /sys /dev /run cgroup2; log to kmsg and the console
//	load the watchdog's driver, arm the hardware watchdog
//	load kernel modules (coldplug by modalias); listen for the power button
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
// In container mode (not PID 1, PID 1 of a container, or --container) the
// kernel-facing steps are skipped and the seed comes from a file.
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
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/etcdbox/etcdbox/init/supervise"
)

// step is one boot step. Optional steps log their failure and boot goes on.
//
// silence is how long the step may run, 0 for defaultStepSilence: the boot
// loop registers each step as a watchdog liveness source (node.heart) for
// its run, so a step that hangs stops the feeding and the machine resets.
// A step that may legitimately take long (e2fsck, DHCP) gets a budget that
// covers it.
type step struct {
	name     string
	optional bool
	run      func(ctx context.Context) error
	silence  time.Duration
}

func (s step) String() string { return s.name }

// defaultStepSilence is the budget of a step that takes well under a
// second. It is short because a hung boot on a new slot must reset within
// about a minute: the budget, then the watchdog's 30s timeout.
const defaultStepSilence = 15 * time.Second

func (s step) maxSilence() time.Duration {
	if s.silence > 0 {
		return s.silence
	}
	return defaultStepSilence
}

// Set only in test images (testhooks.go): startTestHooks serves the test
// hooks once the node is up; beforeStep may inject a fault before a boot
// step (a hang or a crash of the init, named on the kernel command line).
// beforeStep runs inside the step's watchdog budget, so a hang there is a
// hung step.
var (
	startTestHooks func(ctx context.Context, n *node)
	beforeStep     func(n *node, step string)
)

// inContainer reports whether init runs in a container: it is not PID 1,
// or it is PID 1 with /proc already mounted. The kernel starts an
// appliance's /init with nothing mounted (init mounts /proc itself, as
// the boot's first step); a container runtime mounts /proc before it
// starts the entrypoint. So `podman run IMAGE`, which runs /init as the
// container's PID 1, is container mode without --container: the
// appliance steps (partitioning and formatting disks by label, loading
// modules, halting) must never run against a host that a privileged
// container can reach.
func inContainer() bool {
	if os.Getpid() != 1 {
		return true
	}
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}

// errWait marks errors an operator must act on: the node reports them and
// waits instead of rebooting into the same failure.
var errWait = errors.New("waiting for an operator")

func main() {
	if runAsEtcd(os.Args) {
		return
	}
	n := newNode()
	flag.Usage = usage
	flag.BoolVar(&n.container, "container", inContainer(), "run in container mode (default when not PID 1, or PID 1 of a container)")
	flag.StringVar(&n.seedFile, "seed", os.Getenv("ETCDBOX_SEED"), "container mode: the seed file")
	flag.StringVar(&n.root, "data-dir", "/var/lib/etcdbox", "where DATA is mounted (container mode: any directory)")
	flag.StringVar(&n.etcdBin, "etcd", "/usr/bin/etcd", "the etcd binary")
	flag.StringVar(&n.listenIP, "listen-ip", "0.0.0.0", "the address etcd listens on")
	flag.StringVar(&n.metadataURL, "metadata-url", "", "the cloud metadata services' base URL (default http://169.254.169.254 as PID 1, none in container mode; off: none)")
	flag.StringVar(&healthAddr, "health-addr", os.Getenv("ETCDBOX_HEALTH_ADDR"), "container mode: serve plain-HTTP /livez and /readyz on this loopback address (health.go)")
	flag.Parse()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Every child is waited for by one reaper, orphans included.
	if err := supervise.StartReaper(); err != nil {
		n.log.Printf("reaper: %v", err)
	}
	signal.Notify(n.sigc, syscall.SIGTERM, syscall.SIGINT)
	supervise.Go(ctx, "shutdown handler", n.log.Printf, func(context.Context) { n.handleShutdown() })
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
	n.ctx = ctx
	var steps []step
	if !n.container {
		steps = append(steps,
			step{"mount pseudo filesystems", false, n.mountPseudo, 0},
			step{"read the kernel command line", false, n.readCmdline, 0},
			step{"tune the kernel", true, n.tuneKernel, 0},
			// The watchdog's driver first, and the watchdog armed before
			// the other drivers probe: a probe that hangs (a NIC's, after
			// a kexec) is then reset, not hung for good (modules.go).
			step{"load watchdog driver", true, n.loadWatchdogDriver, 30 * time.Second},
			step{"arm watchdog", true, n.armWatchdog, 0},
			step{"load kernel modules", true, n.loadModules, 2 * time.Minute},
			// A watchdog whose device another driver adds (iTCO_wdt's, on
			// Intel chipsets) comes only with the other drivers.
			step{"arm a watchdog the drivers added", true, n.armLateWatchdog, 0},
			step{"listen for the power button", true, n.watchPowerButton, 0},
			// Without RDRAND or an RNG device the pool can take minutes.
			step{"wait for entropy", true, n.waitEntropy, 10 * time.Minute},
			step{"mount ESP", true, n.mountESP, 3 * time.Minute}, // 30s for the disk, fsck up to 2m
			// e2fsck and resize2fs of a large disk take long, and
			// cannot report progress from inside.
			step{"prepare DATA", false, n.prepareData, time.Hour},
		)
	}
	steps = append(steps,
		step{"read seed", false, n.readSeed, 2 * time.Minute},
	)
	if !n.container {
		steps = append(steps, step{"configure network", false, n.configureNetwork, 5 * time.Minute})
	} else {
		steps = append(steps, step{"find addresses", false, n.containerAddresses, 0})
	}
	steps = append(steps,
		step{"issue certificates", false, n.issueCertificates, time.Minute},
		// Before etcd: the formation handshake asks every node's API
		// whether it ever formed the cluster before any etcd starts.
		step{"serve the node API", true, n.serveAPI, 0},
		// Plain-HTTP probes on loopback, when asked (health.go).
		step{"serve health checks", false, n.serveHealth, 0},
		// etcd's settings; the member lifecycle below starts it.
		step{"start etcd", false, n.startEtcd, 0},
	)
	for _, s := range steps {
		n.noteReached(s.name)
		if err := n.runStep(ctx, s); err != nil {
			if s.optional {
				n.log.Printf("%s: %v (continuing)", s, err)
				continue
			}
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	n.noteReached("the health gate")
	// Find the peers, decide (restart, bootstrap, join or wait) and keep
	// etcd running as a supervised child (lifecycle.go), unless a
	// recovery under way fences it (recover.go).
	n.startLifecycle(ctx)
	// The long-lived parts, once the steps are done: each runs until the
	// node stops, under supervise.Go, which logs a panic with the part's
	// name and starts the part again after a backoff. The gate is the
	// exception: a panic in it fails the gate (runGate), and the slot.
	// Shutdown stops them before etcd (parts.go).
	n.parts.start(ctx, n.log.Printf, []part{
		// Tell when this node's member has lost its quorum (quorum.go).
		{"quorum watch", n.watchQuorum},
		// Clear NOSPACE, when the seed allows it (maintain.go).
		{"maintenance", n.autoMaintain},
		// Hand the leadership off a slow disk (handoff.go).
		{"slow-disk handoff", n.watchSlowDisk},
		// Print "etcdbox: etcd ready" once etcd serves.
		{"ready watch", n.watchReady},
		// The cluster's scheduled backups, while this node holds their
		// election (backups.go).
		{"backups", n.scheduleBackups},
		// Renew this node's leaves at two thirds of their life
		// (certs.go).
		{"certificate renewal", n.renewCertificates},
		// Say when DATA could fill before etcd's quota stops the
		// database (storagewatch.go).
		{"storage watch", n.watchStorage},
	})
	// On a new slot: bless it once healthy, or mark it bad and reboot.
	go n.runGate(ctx)
	return nil
}

// runStep runs one boot step as a watchdog liveness source of its own
// (`boot step "prepare DATA"`), which must return within its budget or
// call beatStep with its ctx while it waits. Before "arm watchdog" has run
// there is no watchdog, and nothing to watch.
func (n *node) runStep(ctx context.Context, s step) error {
	h := n.heart(fmt.Sprintf("boot step %q", s.name), s.maxSilence())
	defer h.Stop()
	ctx = context.WithValue(ctx, stepHeartKey{}, h)
	if beforeStep != nil {
		beforeStep(n, s.name)
	}
	start := time.Now()
	// A panic in a step is an error of that step: an optional one is
	// logged and boot goes on, a required one takes the fatal path.
	if err := supervise.Catch("boot step "+strconv.Quote(s.name), n.log.Printf, func() error { return s.run(ctx) }); err != nil {
		return err
	}
	n.log.Printf("%s: done in %s", s, time.Since(start).Round(time.Millisecond))
	return nil
}

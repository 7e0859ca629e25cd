package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/etcdbox/etcdbox/init/console"
	"github.com/etcdbox/etcdbox/init/kmod"
	"github.com/etcdbox/etcdbox/init/member"
	"github.com/etcdbox/etcdbox/init/slot"
	"github.com/etcdbox/etcdbox/init/supervise"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/nodeapi/server"
	"github.com/etcdbox/etcdbox/seed"
	"net"
)

// node is the init: its console, then what it knows, grouped by who
// sets it. options are fixed before the boot; the boot steps set
// machine and self (the step is named beside each field), and after the
// boot these are read only; the member lifecycle and
// the recovery requests change etcdState, under its mutex. Everything
// else is a lock, a once or a channel of one part.
type node struct {
	log  *console.Logger
	ring *console.Ring // the last lines of etcd's log, for the node API
	// limited is log behind a rate limiter, for lines a stranger can cause.
	limited *console.Limiter
	// consoleSink carries etcd's lines to the console (etcdConsole).
	consoleOnce sync.Once
	consoleSink *console.Async
	start       time.Time
	// ctx is boot's: the long-lived parts run under it.
	ctx context.Context

	options
	machine
	self
	etcdState

	api    *server.Server // the node API, nil until it serves (serveAPI)
	parts  parts          // the long-lived parts, once boot starts them
	powerc chan shutdownRequest
	// sigc receives SIGTERM and SIGINT from the start of main, so a signal
	// that comes while a panicked shutdown handler waits to run again is
	// kept for it, not taken by the default action (which ends a
	// container-mode init at once, etcd orphaned).
	sigc chan os.Signal
	once sync.Once // one shutdown

	formOnce  sync.Once
	formation *member.Store // formationStore

	backupMu sync.Mutex // one scheduled or asked-for backup at a time
	// certMu: one writer of state/pki at a time (certs.go).
	certMu sync.Mutex
	// recoverMu: one recovery request at a time (recover.go).
	recoverMu sync.Mutex
}

// options are the init's flags (main).
type options struct {
	container bool
	seedFile  string
	root      string // DATA's mount point
	etcdBin   string
	listenIP  string
	// metadataURL is the cloud metadata services' base URL ("": the
	// link-local default as PID 1, none in container mode; "off": none).
	metadataURL string
}

// machine is what the kernel-facing boot steps found and set up.
type machine struct {
	cmdline map[string]string // the kernel command line's parameters (readCmdline)
	// cmdlineText is the kernel command line as the kernel gave it, read
	// once, at boot (readCmdline).
	cmdlineText string
	mounts      []string     // mounted by the boot steps, unmounted in reverse at shutdown
	dog         watchdog     // nil without a hardware watchdog (armWatchdog)
	kmod        *kmod.Loader // the boot's module loader (moduleLoader)
	esp         slot.Dir     // the mounted ESP, "" without one (mountESP)
	// jumps is the kexec load the kernel holds (jumpload.go); nil
	// without an ESP (mountESP).
	jumps *jumpLoad
	// disksBy is when the boot disk must have shown its partitions: set
	// when mountESP starts to wait for them (dataWait).
	disksBy time.Time
	// probation: the booted slot was on probation when the ESP was
	// mounted; its boot steps are noted there (noteReached).
	probation bool
}

// self is who the node is in its cluster: its seed (readSeed), its
// name, domain and addresses (configureNetwork, or containerAddresses).
type self struct {
	seed *seed.Seed
	// seedSource is where the seed came from ("ec2", "nocloud"...;
	// readSeed), as the node API shows it.
	seedSource string
	name       string
	domain     string
	ips        []net.IP
	// peerOnly: the leaves come from a node CA, so etcd lets only peer
	// leaves on its peer port (issueCertificates).
	peerOnly bool
}

// etcdState is the local etcd member, as the lifecycle and the recovery
// requests run it, under mu.
type etcdState struct {
	mu sync.Mutex
	// quorum is the quorum watch's view (quorum.go).
	quorum nodeapi.Quorum
	member etcdMember            // as last started (or planned)
	etcd   *supervise.Supervisor // nil until the lifecycle starts etcd
	// flushEtcdLog writes what etcd's log limiter holds back and waits
	// for the console; the shutdown calls it once etcd has stopped.
	flushEtcdLog func()
	readyc       chan struct{} // closed once the current etcd serves
	// lastExit is how the current etcd last exited on its own
	// (etcdDoomed).
	lastExit string
	// lifecycleStop ends the member lifecycle and returns a channel
	// closed once it has returned; nil while none runs (recover.go).
	lifecycleStop func() <-chan struct{}
	stopping      bool // shutting down: start no etcd
}

// watchdog is the part of the hardware watchdog that shutdown needs.
type watchdog interface {
	Close() error
	// Handover leaves it armed for the kernel a kexec jumps into.
	Handover()
}

func newNode() *node {
	n := &node{
		ring:   console.NewRing(2000),
		powerc: make(chan shutdownRequest, 4),
		sigc:   make(chan os.Signal, 4),
		start:  time.Now(),
	}
	var out io.Writer = os.Stderr
	if os.Getpid() == 1 {
		if f, err := os.OpenFile("/dev/console", os.O_WRONLY, 0); err == nil {
			out = f
		}
	}
	// The ring holds the init's lines and etcd's, for the node API's logs.
	n.log = console.New(out, n.ring)
	// What strangers can make the node log (refused TLS handshakes on
	// the node API) goes through a limiter.
	n.limited = console.NewLimiter(n.log)
	return n
}

// attachKmsg adds the kernel log to the logger's outputs once /dev is
// mounted, and keeps kernel info messages off the console so that each
// line shows there once.
func (n *node) attachKmsg() {
	if k, err := console.OpenKmsg("/dev/kmsg"); err == nil {
		n.log.Add(k)
	}
	_ = os.WriteFile("/proc/sys/kernel/printk", []byte("5 4 1 7"), 0)
}

func (n *node) stateDir() string { return filepath.Join(n.root, "state") }
func (n *node) pkiDir() string   { return filepath.Join(n.stateDir(), "pki") }

// handleShutdown waits for a shutdown request: SIGTERM or SIGINT, the
// ACPI power button, or (PID 1) a reboot request. It runs from the start
// of the boot, so a node that waits (for peers, or for an operator to fix
// its seed) still powers off when asked.
func (n *node) handleShutdown() {
	var req shutdownRequest
	select {
	case s := <-n.sigc:
		n.log.Printf("%s received: shutting down", s)
	case req = <-n.powerc:
		what := "shutting down"
		if req.reboot {
			what = "rebooting"
		}
		n.log.Printf("%s: %s", req.why, what)
	}
	n.shutdownUnsupervised(req)
}

// shutdownUnsupervised runs the shutdown in a goroutine of its own,
// outside the recovery of supervise.Go that runs handleShutdown: a panic
// while the node stops (etcd half stopped, filesystems half unmounted)
// still ends PID 1, and the kernel's panic=10 reboots the machine, rather
// than leaving it half down and waiting for another request.
func (n *node) shutdownUnsupervised(req shutdownRequest) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.shutdown(req)
	}()
	<-done
}

// partsStopWithin bounds the wait for the long-lived parts at shutdown:
// the backups' resignation is the slowest of them (backups.go).
const partsStopWithin = 3 * time.Second

// shutdownRequest asks handleShutdown to power off or reboot.
type shutdownRequest struct {
	why    string
	reboot bool
	// noKexec keeps the reboot on the firmware path even into a freshly
	// armed slot (see jump).
	noKexec bool
}

// requestShutdown asks for an orderly power-off or reboot and returns.
func (n *node) requestShutdown(why string, reboot bool) {
	n.request(shutdownRequest{why: why, reboot: reboot})
}

// request passes req to handleShutdown, unless one is pending already.
func (n *node) request(req shutdownRequest) {
	select {
	case n.powerc <- req:
	default: // one is pending already
	}
}

// shutdown stops etcd gracefully (SIGTERM, then SIGKILL after a deadline),
// disarms the watchdog, syncs and unmounts, then powers off or reboots:
// into a freshly armed slot with kexec, unless req says no (jump). In
// container mode it exits instead.
func (n *node) shutdown(req shutdownRequest) {
	n.once.Do(func() {
		start := time.Now()
		laps := newLaps(start)
		n.mu.Lock()
		n.stopping = true
		etcd, flushEtcdLog := n.etcd, n.flushEtcdLog
		n.mu.Unlock()
		if n.api != nil {
			// Waits for answers in flight, such as the one to a reboot
			// request.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = n.api.Shutdown(ctx)
			cancel()
			laps.lap("API")
		}
		// The parts first: their streams on etcd would hold its stop
		// for its request timeout (parts.go).
		began := time.Now()
		if still := n.parts.stop(partsStopWithin); len(still) > 0 {
			n.log.Printf("shutdown: %s still running after %s; stopping etcd anyway", strings.Join(still, ", "), partsStopWithin)
		}
		partsTook := time.Since(began)
		laps.lap("parts")
		if etcd != nil {
			// The durations say where a reboot's time goes (make bench).
			began := time.Now()
			if err := etcd.Stop(30 * time.Second); err != nil {
				n.log.Printf("stop etcd: %v", err)
			} else {
				n.log.Printf("etcd stopped in %s (the node's own parts in %s before it)", time.Since(began).Round(time.Millisecond), partsTook.Round(time.Millisecond))
			}
			laps.lap("etcd")
		}
		// What the limiters held back since their windows began would be
		// said at the windows' ends, after the power is off.
		if flushEtcdLog != nil {
			flushEtcdLog()
		}
		n.limited.Flush()
		laps.lap("log")
		syscall.Sync()
		laps.lap("sync")
		if n.container {
			n.log.Printf("shutdown complete in %s (%s)", time.Since(start).Round(time.Millisecond), laps)
			os.Exit(0)
		}
		j := jumpPlan{}
		if req.reboot {
			j = n.planJump(req.noKexec)
			laps.lap("jump plan")
		}
		if n.dog != nil && !j.ready {
			if err := n.dog.Close(); err != nil {
				n.log.Printf("watchdog: %v", err)
			}
		}
		n.unmountAll()
		laps.lap("unmount")
		n.downLinks(haltWord(req.reboot, j.ready))
		laps.lap("links")
		n.log.Printf("shutdown complete in %s (%s)", time.Since(start).Round(time.Millisecond), laps)
		if j.ready {
			n.jump(j)
		}
		halt(req.reboot)
	})
	select {} // another goroutine is shutting down
}

// fail handles an error that stops the boot. Operator errors (errWait)
// are reported and the node waits, keeping its data, until it is powered
// off; anything else is logged, synced, and the node reboots. In container
// mode init exits non-zero, and the container runtime decides.
func (n *node) fail(err error) {
	// A slot on probation that cannot boot is marked bad first, so the
	// reboot lands in the other slot now, not after its remaining tries.
	if n.failSlot("init failed: " + err.Error()) {
		n.log.Printf("fatal: %v", err)
		n.requestShutdown("init failure in a new slot", true)
		select {}
	}
	if errors.Is(err, errWait) {
		n.log.Printf("fatal: %v", err)
		if n.container {
			os.Exit(2)
		}
		n.log.Printf("waiting: power off, fix the problem and boot again")
		select {} // handleShutdown still answers the power button
	}
	n.log.Printf("fatal: %v", err)
	if n.container {
		os.Exit(1)
	}
	syscall.Sync()
	n.log.Printf("rebooting in 5s")
	time.Sleep(5 * time.Second) // let the console drain before the reset
	n.unmountAll()
	n.downLinks("reboot")
	halt(true)
}

package supervise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Backoff is the delay before a crashed child is started again. The delay
// starts at Initial and grows by Factor after each quick exit, up to Max; a
// child that ran for at least Reset before it exited is restarted after
// Initial again. Zero fields take the defaults in DefaultBackoff.
type Backoff struct {
	Initial time.Duration
	Max     time.Duration
	Factor  float64
	Reset   time.Duration
}

// DefaultBackoff is the backoff for etcd: 1s, 2s, 4s ... 30s, reset after a
// minute of stable running.
var DefaultBackoff = Backoff{Initial: time.Second, Max: 30 * time.Second, Factor: 2, Reset: time.Minute}

func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = DefaultBackoff.Initial
	}
	if b.Max <= 0 {
		b.Max = DefaultBackoff.Max
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	if b.Factor < 1 {
		b.Factor = DefaultBackoff.Factor
	}
	if b.Reset <= 0 {
		b.Reset = DefaultBackoff.Reset
	}
	return b
}

// delay returns the delay after the given number of consecutive quick
// failures (0 for the first).
func (b Backoff) delay(failures int) time.Duration {
	d := float64(b.Initial)
	for range failures {
		d *= b.Factor
		if d >= float64(b.Max) {
			return b.Max
		}
	}
	return time.Duration(d)
}

// Supervisor keeps one child process running: it restarts it with
// exponential backoff whenever it exits, until Stop. Set the fields, then
// call Run once; a stopped Supervisor is not restarted.
//
//	s := &supervise.Supervisor{Name: "etcd", Path: "/usr/bin/etcd", Args: args,
//		Stdout: io.MultiWriter(ring, log), Log: log.Printf}
//	go s.Run(ctx)
//	...
//	err := s.Stop(30 * time.Second) // SIGTERM, then SIGKILL
type Supervisor struct {
	// Name names the child in log lines and prefixes each line of its
	// output ("etcd: ...").
	Name string
	Path string
	Args []string // not including argv[0]
	// Env is the child's environment; nil means init's own.
	Env []string
	Dir string
	// Stdout and Stderr receive the child's output, one prefixed line per
	// Write. A nil Stderr means Stdout; both nil discard the output. Use
	// sinks that do not block for long (console.Ring, console.Async): a
	// blocked sink stalls the child in write(2).
	Stdout, Stderr io.Writer
	Backoff        Backoff
	// StopTimeout is the grace period when Run's context ends (default
	// 10s); Stop takes its own.
	StopTimeout time.Duration
	// OnStart is called with the pid of each started child.
	OnStart func(pid int)
	// OnExit is called after each exit of the child, the last one after
	// Stop included, with nil for exit status 0 and otherwise the
	// *ExitError (or the error from starting it), and the number of
	// restarts before this run. It runs on Run's goroutine.
	OnExit func(err error, restarts int)
	// Log prints init's messages (console.Logger.Printf); default
	// log.Printf.
	Log func(format string, args ...any)
	// Alive, when set, is called on Run's goroutine at each turn of its
	// loop and every aliveInterval (5s) while it waits for the child or
	// for a restart, so that a watchdog can tell the loop is not stuck
	// (power.Heart.Beat). It must not block.
	Alive func()
	// SysProcAttr defaults to a new process group; see sysProcAttr.
	SysProcAttr *syscall.SysProcAttr
	// Finished, when set, is called by Stop just before its SIGTERM with
	// the child's pid. It may return a check that reports whether the
	// child, once told to stop, has done all of its exit that matters
	// (etcd: its WAL and database are closed), or nil when it cannot
	// tell. Stop then polls the check every finishedPoll and sends
	// SIGKILL as soon as it reports true, sparing the rest of the exit
	// (etcd: up to a second waiting for its peers' connections to go
	// idle). A check must answer false whenever it is unsure.
	Finished func(pid int) func() bool
	// Stopping, when set, is called on a goroutine of its own right
	// after Stop's SIGTERM, with the child's pid and a channel closed
	// once the child has exited and been reaped. It must return soon
	// after that channel closes; Stop waits for it before it returns
	// (etcd: it ends the client connections still open after a moment,
	// init/etcdstop.go).
	Stopping func(pid int, exited <-chan struct{})

	// aliveEvery replaces aliveInterval in tests.
	aliveEvery time.Duration

	mu       sync.Mutex
	running  bool
	stopping bool
	stopc    chan struct{} // closed by Stop
	done     chan struct{} // closed when Run returns
	proc     *Process
	restarts int
}

func (s *Supervisor) initLocked() {
	if s.stopc == nil {
		s.stopc = make(chan struct{})
		s.done = make(chan struct{})
	}
}

func (s *Supervisor) logf(format string, args ...any) {
	if s.Log != nil {
		s.Log(format, args...)
		return
	}
	log.Printf(format, args...)
}

var errStopping = errors.New("stopping")

// Run starts the child and restarts it whenever it exits, until Stop is
// called (then it returns nil) or ctx ends (then it stops the child with
// StopTimeout and returns ctx.Err()). Each restart is logged as
// "<name> exited: <status>; restarting in <delay> (restart <n>)".
func (s *Supervisor) Run(ctx context.Context) error {
	if err := s.markRunning(); err != nil {
		return err
	}
	defer close(s.done)

	b := s.Backoff.withDefaults()
	alive, stopAlive := s.aliveTicker()
	defer stopAlive()
	failures := 0
	for {
		s.alive()
		if err := ctx.Err(); err != nil {
			return err
		}
		started := time.Now()
		p, out, err := s.start()
		if errors.Is(err, errStopping) {
			return nil
		}
		if err == nil {
			if s.OnStart != nil {
				s.OnStart(p.Pid())
			}
			s.awaitExit(ctx, p, alive)
			err = p.Wait()
			for _, lw := range out {
				lw.Flush()
			}
			if stopping, restarts := s.clearProc(); stopping {
				return s.stopped(ctx, p, err, restarts)
			}
		}

		if time.Since(started) >= b.Reset {
			failures = 0
		}
		delay := b.delay(failures)
		failures++
		s.announceRestart(p, err, delay)
		if stop, err := s.waitRestart(ctx, delay, alive); stop {
			return err
		}
	}
}

// markRunning initialises s and records that Run has been called; a second
// call is an error.
func (s *Supervisor) markRunning() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.initLocked()
	if s.running {
		return errors.New("supervise: Run called twice")
	}
	s.running = true
	return nil
}

// aliveTicker returns a channel that ticks every aliveInterval (aliveEvery
// in tests) and a function that stops it. Without Alive the channel is nil,
// so it is never ready.
func (s *Supervisor) aliveTicker() (<-chan time.Time, func()) {
	if s.Alive == nil {
		return nil, func() {}
	}
	every := s.aliveEvery
	if every <= 0 {
		every = aliveInterval
	}
	t := time.NewTicker(every)
	return t.C, t.Stop
}

// awaitExit waits until the child p has exited, stopping it with
// StopTimeout when ctx ends first, and calls Alive on each tick of alive.
func (s *Supervisor) awaitExit(ctx context.Context, p *Process, alive <-chan time.Time) {
	for {
		select {
		case <-p.Done():
			return
		case <-ctx.Done():
			if serr := s.Stop(s.stopTimeout()); serr != nil {
				s.logf("%v", serr)
			}
			return
		case <-alive:
			s.alive()
		}
	}
}

// clearProc forgets the exited child and returns whether Stop was called
// and the number of restarts so far.
func (s *Supervisor) clearProc() (stopping bool, restarts int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc = nil
	return s.stopping, s.restarts
}

// stopped ends Run after the child p exited with err because of Stop or of
// ctx: it logs the exit, calls OnExit and returns ctx.Err() if ctx ended,
// else nil.
func (s *Supervisor) stopped(ctx context.Context, p *Process, err error, restarts int) error {
	s.logf("%s stopped: %s", s.Name, p.Status())
	if s.OnExit != nil {
		s.OnExit(err, restarts)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

// announceRestart counts a restart, logs it with the child's exit status
// (or, when p is nil, the error that kept it from starting) and delay, and
// calls OnExit.
func (s *Supervisor) announceRestart(p *Process, err error, delay time.Duration) {
	s.mu.Lock()
	restarts := s.restarts
	s.restarts++
	s.mu.Unlock()
	if p != nil {
		s.logf("%s exited: %s; restarting in %s (restart %d)", s.Name, p.Status(), delay, restarts+1)
	} else {
		s.logf("%s did not start: %v; retrying in %s (restart %d)", s.Name, err, delay, restarts+1)
	}
	if s.OnExit != nil {
		s.OnExit(err, restarts)
	}
}

// waitRestart sleeps for delay before the next start, calling Alive on each
// tick of alive. It returns stop true, with the error for Run to return,
// when Stop is called (nil) or ctx ends (ctx.Err()) first.
func (s *Supervisor) waitRestart(ctx context.Context, delay time.Duration, alive <-chan time.Time) (stop bool, err error) {
	t := time.NewTimer(delay)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return false, nil
		case <-s.stopc:
			return true, nil
		case <-ctx.Done():
			return true, ctx.Err()
		case <-alive:
			s.alive()
		}
	}
}

// aliveInterval is how often Run calls Alive while it waits.
const aliveInterval = 5 * time.Second

func (s *Supervisor) alive() {
	if s.Alive != nil {
		s.Alive()
	}
}

func (s *Supervisor) stopTimeout() time.Duration {
	if s.StopTimeout > 0 {
		return s.StopTimeout
	}
	return 10 * time.Second
}

// start starts one child, unless Stop was called. Holding mu across the
// start means Stop either sees the new child or stops it from starting.
func (s *Supervisor) start() (*Process, []*lineWriter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return nil, nil, errStopping
	}
	cmd := exec.Command(s.Path, s.Args...)
	cmd.Env = s.Env
	cmd.Dir = s.Dir
	cmd.SysProcAttr = s.SysProcAttr
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = sysProcAttr()
	}
	// Give up on the output pipes shortly after the child exits, in case
	// something it spawned still holds them.
	cmd.WaitDelay = 2 * time.Second
	var out []*lineWriter
	prefix := s.Name + ": "
	stderr := s.Stderr
	if stderr == nil {
		stderr = s.Stdout
	}
	if s.Stdout != nil {
		lw := newLineWriter(prefix, s.Stdout)
		cmd.Stdout = lw
		out = append(out, lw)
	}
	if stderr != nil {
		if sameWriter(stderr, s.Stdout) {
			cmd.Stderr = cmd.Stdout
		} else {
			lw := newLineWriter(prefix, stderr)
			cmd.Stderr = lw
			out = append(out, lw)
		}
	}
	p, err := start(cmd, outputPause)
	if err != nil {
		return nil, nil, fmt.Errorf("start %s: %w", s.Path, err)
	}
	s.proc = p
	return p, out, nil
}

// Stop stops the child and keeps Run from restarting it: it sends SIGTERM,
// waits up to timeout for the child to exit, then sends SIGKILL. It returns
// once the child has been reaped, with an error when SIGKILL was needed or
// the child outlived it. When Finished gave a check and the check reports
// true first, Stop sends SIGKILL at once and returns nil: that is a normal
// stop. It may be called before or after Run, and more than once.
func (s *Supervisor) Stop(timeout time.Duration) error {
	s.mu.Lock()
	s.initLocked()
	if !s.stopping {
		s.stopping = true
		close(s.stopc)
	}
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	var finished func() bool
	if s.Finished != nil {
		finished = s.Finished(p.Pid())
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			return nil
		}
		s.logf("stop %s: SIGTERM: %v", s.Name, err)
	}
	sent := time.Now()
	if s.Stopping != nil {
		hook := make(chan struct{})
		go func() {
			defer close(hook)
			s.Stopping(p.Pid(), p.Done())
		}()
		defer func() {
			// Only once the child is gone: one that outlived SIGKILL
			// (stuck I/O) would keep the hook, and Stop, waiting.
			select {
			case <-p.Done():
				<-hook
			default:
			}
		}()
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	switch waitStop(p, finished, t.C) {
	case stopExited:
		return nil
	case stopFinished:
		return s.killFinished(p, time.Since(sent))
	}
	s.logf("%s (pid %d) still running %s after SIGTERM; sending SIGKILL", s.Name, p.Pid(), timeout)
	if err := s.kill(p); err != nil {
		return err
	}
	return fmt.Errorf("stop %s (pid %d): killed after %s without exiting on SIGTERM", s.Name, p.Pid(), timeout)
}

// kill sends SIGKILL to p and waits for it to be reaped, up to killWait:
// a process in uninterruptible sleep (stuck I/O) can outlive SIGKILL, and
// the shutdown must not hang on it.
func (s *Supervisor) kill(p *Process) error {
	if err := p.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop %s (pid %d): SIGKILL: %w", s.Name, p.Pid(), err)
	}
	k := time.NewTimer(killWait)
	defer k.Stop()
	select {
	case <-p.Done():
		return nil
	case <-k.C:
		return fmt.Errorf("stop %s (pid %d): still running %s after SIGKILL", s.Name, p.Pid(), killWait)
	}
}

// killWait bounds the wait for a child to die after SIGKILL.
const killWait = 5 * time.Second

// finishedPoll is how often Stop asks a Finished check.
const finishedPoll = 10 * time.Millisecond

// How waitStop ended.
const (
	stopExited   = iota // the child exited
	stopFinished        // its Finished check reported true
	stopTimedOut        // neither, within Stop's timeout
)

// waitStop waits for the child to exit, polling finished (when not nil)
// meanwhile, until timeout fires.
func waitStop(p *Process, finished func() bool, timeout <-chan time.Time) int {
	var tick <-chan time.Time
	if finished != nil {
		t := time.NewTicker(finishedPoll)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-p.Done():
			return stopExited
		case <-timeout:
			return stopTimedOut
		case <-tick:
			if finished() {
				return stopFinished
			}
		}
	}
}

// killFinished ends a child whose Finished check reported true, after
// SIGTERM: what it had left to do does not matter, so this is a stop like
// any other.
func (s *Supervisor) killFinished(p *Process, after time.Duration) error {
	if err := s.kill(p); err != nil {
		return err
	}
	s.logf("stop %s (pid %d): done with what matters %s after SIGTERM; SIGKILL ended the rest of its exit", s.Name, p.Pid(), after.Round(time.Millisecond))
	return nil
}

// Pid returns the pid of the running child, or 0 when none runs.
func (s *Supervisor) Pid() int {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return 0
	}
	select {
	case <-p.Done():
		return 0
	default:
		return p.Pid()
	}
}

// Signal sends sig to the running child (e.g. SIGKILL from a test hook).
func (s *Supervisor) Signal(sig os.Signal) error {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return fmt.Errorf("signal %s: not running", s.Name)
	}
	return p.Signal(sig)
}

// Restarts returns how many times the child was restarted.
func (s *Supervisor) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// Done is closed when Run has returned.
func (s *Supervisor) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.initLocked()
	return s.done
}

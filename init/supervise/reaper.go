package supervise

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// reaper waits for every child of this process; see the package doc.
type reaper struct {
	// mu is held for reading while a child is forked and registered or
	// signalled, and for writing while children are reaped.
	mu sync.RWMutex

	pmu    sync.Mutex
	procs  map[int]*Process
	orphan func(pid int, st Status)
}

var (
	theReaper = &reaper{procs: map[int]*Process{}}
	startOnce sync.Once
	startErr  error
)

// StartReaper starts reaping children: it subscribes to SIGCHLD and collects
// any zombie already there. It is idempotent, and Start calls it, but PID 1
// should call it early so orphans are collected from the start.
func StartReaper() error {
	startOnce.Do(func() { startErr = theReaper.start() })
	return startErr
}

// SetOrphanFunc sets a function called (outside the reaper's lock) for each
// reaped process that no Start registered, typically to log it. Orphans are
// reaped whether or not one is set.
func SetOrphanFunc(f func(pid int, st Status)) {
	theReaper.pmu.Lock()
	defer theReaper.pmu.Unlock()
	theReaper.orphan = f
}

// collected hands the exit status of pid to its Process, or returns it as
// an orphan. The caller holds mu for writing.
func (r *reaper) collected(pid int, st Status) (orphan func(int, Status)) {
	r.pmu.Lock()
	defer r.pmu.Unlock()
	p, ok := r.procs[pid]
	if !ok {
		if r.orphan == nil {
			return func(int, Status) {}
		}
		return r.orphan
	}
	delete(r.procs, pid)
	p.exited(st)
	return nil
}

// Process is a child started by Start. Its exit status comes from the
// reaper; do not call the exec.Cmd's Wait.
type Process struct {
	cmd       *exec.Cmd
	pid       int
	done      chan struct{} // closed when the reaper has the exit status
	status    Status
	waitDelay time.Duration

	copies  sync.WaitGroup  // goroutines copying output to non-file writers
	readers []io.ReadCloser // parent ends of output pipes
	stdin   *os.File        // parent end of the stdin pipe, if any

	waitOnce sync.Once
	waitErr  error
}

// Pid returns the child's process id.
func (p *Process) Pid() int { return p.pid }

// Done is closed once the child has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Status returns how the child ended. It is valid once Done is closed.
func (p *Process) Status() Status {
	<-p.done
	return p.status
}

// exited records the exit status; the reaper calls it holding mu.
func (p *Process) exited(st Status) {
	p.status = st
	_ = p.cmd.Process.Release() // closes the pidfd; nothing waits on it
	close(p.done)
}

// Signal sends sig to the child. After the child was reaped it returns
// os.ErrProcessDone, and never signals a pid that may have been reused.
func (p *Process) Signal(sig os.Signal) error {
	theReaper.mu.RLock()
	defer theReaper.mu.RUnlock()
	select {
	case <-p.done:
		return os.ErrProcessDone
	default:
	}
	return p.cmd.Process.Signal(sig)
}

// Wait waits for the child to exit and for its output to be copied, then
// returns nil for exit status 0 and an *ExitError otherwise. Like
// exec.Cmd.Wait, it waits for the output pipes to close; with
// cmd.WaitDelay set, it gives up on them that long after the exit (a
// grandchild may hold them open). It may be called more than once.
func (p *Process) Wait() error {
	<-p.done
	p.waitOnce.Do(func() {
		copied := make(chan struct{})
		go func() {
			p.copies.Wait()
			close(copied)
		}()
		if p.waitDelay > 0 {
			t := time.NewTimer(p.waitDelay)
			select {
			case <-copied:
			case <-t.C:
				closeAll(p.readers...) // unblocks the copies
				<-copied
			}
			t.Stop()
		} else {
			<-copied
		}
		closeAll(p.readers...)
		if p.stdin != nil {
			_ = p.stdin.Close()
		}
		p.waitErr = p.status.err(p.pid)
	})
	return p.waitErr
}

// Start starts cmd and registers it with the reaper. cmd must come from
// exec.Command, not exec.CommandContext (use Run with a context instead),
// and its Wait, Run and Output methods must not be used.
//
// As with exec.Cmd, a Stdin, Stdout or Stderr that is not an *os.File is
// connected through a pipe and copied by a goroutine; Stdout and Stderr
// that are the same writer share one pipe.
func Start(cmd *exec.Cmd) (*Process, error) { return start(cmd, 0) }

// start is Start, with the output copies pausing between reads (see
// outputPause): the Supervisor's long-running children pause, one-shot
// tools do not, since each pause would add to the tool's run.
func start(cmd *exec.Cmd, pause time.Duration) (*Process, error) {
	if err := StartReaper(); err != nil {
		return nil, err
	}
	if cmd.Process != nil {
		return nil, errors.New("supervise: command already started")
	}
	if cmd.Cancel != nil {
		return nil, fmt.Errorf("start %s: made by exec.CommandContext, whose context goroutine waits for exec.Cmd.Wait; use exec.Command and supervise.Run", cmd.Path)
	}
	p := &Process{cmd: cmd, done: make(chan struct{}), waitDelay: cmd.WaitDelay}
	stdin, stdout, stderr := cmd.Stdin, cmd.Stdout, cmd.Stderr
	pipes := &childPipes{p: p, pause: pause}
	err := pipes.connect(cmd)
	if err == nil {
		err = startRegistered(cmd, p)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	if err != nil {
		pipes.abort()
		return nil, err
	}
	pipes.started()
	return p, nil
}

// startRegistered starts cmd and registers p under its pid, holding the
// reaper's lock for reading so the child cannot be reaped in between.
func startRegistered(cmd *exec.Cmd, p *Process) error {
	theReaper.mu.RLock()
	defer theReaper.mu.RUnlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	p.pid = cmd.Process.Pid
	theReaper.pmu.Lock()
	theReaper.procs[p.pid] = p
	theReaper.pmu.Unlock()
	return nil
}

// Run starts cmd and waits for it. When ctx is done first, the child gets
// SIGKILL and Run returns an error that wraps ctx.Err().
func Run(ctx context.Context, cmd *exec.Cmd) error {
	p, err := Start(cmd)
	if err != nil {
		return err
	}
	select {
	case <-p.Done():
		return p.Wait()
	case <-ctx.Done():
		_ = p.Signal(syscall.SIGKILL)
		if p.waitDelay == 0 {
			p.waitDelay = time.Second // a grandchild may hold the pipes
		}
		werr := p.Wait()
		if werr == nil {
			return nil // it finished just as ctx ended
		}
		return fmt.Errorf("%s: %w (%v)", cmd.Path, ctx.Err(), werr)
	}
}

// Output runs cmd and returns its standard output. When cmd.Stderr is nil,
// standard error is collected into the *ExitError's Stderr.
func Output(ctx context.Context, cmd *exec.Cmd) ([]byte, error) {
	if cmd.Stdout != nil {
		return nil, errors.New("supervise: Stdout already set")
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	if cmd.Stderr == nil {
		cmd.Stderr = &stderr
	}
	err := Run(ctx, cmd)
	var ee *ExitError
	if errors.As(err, &ee) {
		ee.Stderr = stderr.Bytes()
	}
	return stdout.Bytes(), err
}

// CombinedOutput runs cmd and returns its standard output and standard
// error, interleaved as written.
func CombinedOutput(ctx context.Context, cmd *exec.Cmd) ([]byte, error) {
	if cmd.Stdout != nil || cmd.Stderr != nil {
		return nil, errors.New("supervise: Stdout or Stderr already set")
	}
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := Run(ctx, cmd)
	return b.Bytes(), err
}

// RunTool runs cmd, a tool whose exit code means something (fsck, e2fsck),
// and returns its standard output and standard error, interleaved, with
// its exit code. err is only for a tool that could not run, died of a
// signal, or outlived ctx. It is the init's one way to run a tool: through
// the reaper, never exec.Cmd.Wait.
func RunTool(ctx context.Context, cmd *exec.Cmd) (out []byte, code int, err error) {
	out, err = CombinedOutput(ctx, cmd)
	var ee *ExitError
	if errors.As(err, &ee) && ee.Signal == 0 {
		return out, ee.Code, nil
	}
	if err != nil {
		return out, -1, err
	}
	return out, 0, nil
}

func closeAll[F io.Closer](fs ...F) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// sameWriter reports whether a and b are the same writer, without
// panicking on writers whose dynamic type is not comparable.
func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

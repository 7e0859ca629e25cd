package qemu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

var (
	// ErrRunning means a QEMU process already runs in the VM's directory.
	ErrRunning = errors.New("vm is already running")
	// ErrNotRunning means no QEMU process runs in the VM's directory.
	ErrNotRunning = errors.New("vm is not running")
	// ErrExited means QEMU exited while the caller waited for something.
	ErrExited = errors.New("qemu exited")
	// ErrForced means Stop had to quit or kill QEMU because the guest did
	// not power off within its grace period.
	ErrForced = errors.New("guest did not power off; qemu stopped by force")
)

// VM is a running (or exited) QEMU process and its work directory.
type VM struct {
	name string
	dir  string
	pid  int
	cfg  Config // resolved by Start; zero for an attached VM
	// accel is the accelerator Start chose ("" for an attached VM).
	accel string

	cmd     *exec.Cmd // nil for an attached VM
	done    chan struct{}
	waitErr error
	watch   sync.Once // starts the exit watcher of an attached VM
}

// Start prepares cfg.Dir (disk, UEFI variables, free host ports) and
// starts QEMU, returning once its QMP socket answers. ctx bounds only the
// start: the VM runs until it powers off or is stopped, also past the
// exit of the calling process.
func Start(ctx context.Context, cfg Config) (*VM, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("vm %s: %w", cfg.Name, err)
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("vm %s: %w", c.Name, err)
	}
	if old, err := Attach(c.Dir); err == nil {
		return nil, fmt.Errorf("vm %s in %s (pid %d): %w", c.Name, c.Dir, old.PID(), ErrRunning)
	}
	choice, err := ChooseAccel(ctx, c.Accel)
	if err != nil {
		return nil, fmt.Errorf("vm %s: %w", c.Name, err)
	}
	accel := choice.Accel
	if err := copyOnce(filepath.Join(c.Dir, varsFile), c.OVMFVars); err != nil {
		return nil, fmt.Errorf("vm %s: copy UEFI variables: %w", c.Name, err)
	}
	d, err := prepareDisk(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("vm %s: %w", c.Name, err)
	}
	for i := range c.Forwards {
		if c.Forwards[i].HostPort == 0 {
			if c.Forwards[i].HostPort, err = FreePort(c.Forwards[i].HostAddr); err != nil {
				return nil, fmt.Errorf("vm %s: %w", c.Name, err)
			}
		}
	}
	// The previous run's console is kept one generation; offsets into
	// console.log are this run's.
	if err := os.Rename(filepath.Join(c.Dir, consoleFile), filepath.Join(c.Dir, consoleFile+".1")); err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("vm %s: %w", c.Name, err)
	}
	os.Remove(filepath.Join(c.Dir, qmpFile)) // stale after a crash; no QEMU owns it (Attach failed)
	log, err := os.OpenFile(filepath.Join(c.Dir, qemuLogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("vm %s: %w", c.Name, err)
	}
	defer log.Close()
	fmt.Fprintf(log, "%s: starting %s %s\n", time.Now().Format(time.RFC3339), qemuBinary, strings.Join(c.args(accel, d), " "))

	cmd := exec.Command(qemuBinary, c.args(accel, d)...)
	cmd.Dir = c.Dir
	cmd.Stdout, cmd.Stderr = log, log // stdin stays /dev/null
	cmd.SysProcAttr = detached()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("vm %s: start qemu: %w", c.Name, err)
	}
	v := &VM{name: c.Name, dir: c.Dir, pid: cmd.Process.Pid, cfg: c, accel: accel, cmd: cmd, done: make(chan struct{})}
	go func() {
		v.waitErr = cmd.Wait()
		close(v.done)
	}()
	if err := v.waitQMP(ctx); err != nil {
		v.Kill()
		<-v.done
		return nil, fmt.Errorf("vm %s: %w\n%s", c.Name, err, tailFile(filepath.Join(c.Dir, qemuLogFile), 10))
	}
	return v, nil
}

// waitQMP waits until the QMP socket answers.
func (v *VM) waitQMP(ctx context.Context) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		q, err := DialQMP(ctx, v.QMPPath())
		if err == nil {
			return q.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for qmp: %w (%v)", ctx.Err(), err)
		case <-v.done:
			return fmt.Errorf("wait for qmp: %w: %v", ErrExited, v.waitErr)
		case <-tick.C:
		}
	}
}

// Attach finds the QEMU process running in dir (from its pid file) so that
// another process can control it. An attached VM knows its directory but
// not its Config.
func Attach(dir string) (*VM, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, pidFile))
	if err != nil {
		return nil, fmt.Errorf("attach %s: %w", dir, ErrNotRunning)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return nil, fmt.Errorf("attach %s: bad pid file %q", dir, b)
	}
	// The pid file outlives a killed QEMU, and its pid can be reused: the
	// process must be alive and working in dir.
	if !alive(pid) || processDir(pid) != dir {
		return nil, fmt.Errorf("attach %s: %w", dir, ErrNotRunning)
	}
	return &VM{name: filepath.Base(dir), dir: dir, pid: pid, done: make(chan struct{})}, nil
}

// Name returns the VM's name (for an attached VM, its directory's name).
func (v *VM) Name() string { return v.name }

// Dir returns the VM's work directory.
func (v *VM) Dir() string { return v.dir }

// Accel returns the accelerator the VM runs with ("" for an attached VM).
func (v *VM) Accel() string { return v.accel }

// PID returns the QEMU process id.
func (v *VM) PID() int { return v.pid }

// QMPPath returns the path of the QMP socket.
func (v *VM) QMPPath() string { return v.path(qmpFile) }

// Forwards returns the port forwards with their host ports chosen (nil
// for an attached VM).
func (v *VM) Forwards() []Forward { return append([]Forward(nil), v.cfg.Forwards...) }

// HostPort returns the host port forwarded to guestPort, or 0.
func (v *VM) HostPort(guestPort int) int {
	for _, f := range v.cfg.Forwards {
		if f.GuestPort == guestPort {
			return f.HostPort
		}
	}
	return 0
}

func (v *VM) path(name string) string { return filepath.Join(v.dir, name) }

// Done returns a channel closed when QEMU has exited.
func (v *VM) Done() <-chan struct{} {
	if v.cmd == nil {
		v.watch.Do(func() {
			go func() {
				tick := time.NewTicker(100 * time.Millisecond)
				defer tick.Stop()
				for range tick.C {
					if !alive(v.pid) {
						close(v.done)
						return
					}
				}
			}()
		})
	}
	return v.done
}

// Wait waits until QEMU exits and returns its exit error (always nil for
// an attached VM, whose exit status belongs to another process).
func (v *VM) Wait(ctx context.Context) error {
	select {
	case <-v.Done():
		if v.waitErr != nil {
			return fmt.Errorf("vm %s: qemu: %w", v.name, v.waitErr)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("vm %s: wait for qemu to exit: %w", v.name, ctx.Err())
	}
}

// Kill kills QEMU at once: a power cut for the guest.
func (v *VM) Kill() error {
	p, err := os.FindProcess(v.pid)
	if err == nil {
		err = p.Kill()
	}
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("vm %s: kill qemu: %w", v.name, err)
	}
	return nil
}

// Powerdown presses the ACPI power button.
func (v *VM) Powerdown(ctx context.Context) error { return v.execute(ctx, "system_powerdown", nil) }

// Reset presses the reset button: the guest reboots without shutting down.
func (v *VM) Reset(ctx context.Context) error { return v.execute(ctx, "system_reset", nil) }

// Quit makes QEMU exit at once, like pulling the power cord.
func (v *VM) Quit(ctx context.Context) error {
	err := v.execute(ctx, "quit", nil)
	if isClosed(err) {
		return nil // QEMU exited before it answered
	}
	return err
}

// Pause freezes the guest (QMP stop): its clock, CPUs and devices stop,
// like a process that gets SIGSTOP, and it answers nothing until Resume.
func (v *VM) Pause(ctx context.Context) error { return v.execute(ctx, "stop", nil) }

// Resume thaws a paused guest (QMP cont).
func (v *VM) Resume(ctx context.Context) error { return v.execute(ctx, "cont", nil) }

// Status returns QEMU's run state ("running", "paused", "shutdown", ...).
func (v *VM) Status(ctx context.Context) (string, error) {
	var st struct {
		Status string `json:"status"`
	}
	err := v.execute(ctx, "query-status", &st)
	return st.Status, err
}

// execute runs one QMP command on a connection of its own.
func (v *VM) execute(ctx context.Context, command string, result any) error {
	return v.executeArgs(ctx, command, nil, result)
}

// executeArgs runs one QMP command with args (nil for none) on a
// connection of its own.
func (v *VM) executeArgs(ctx context.Context, command string, args, result any) error {
	q, err := DialQMP(ctx, v.QMPPath())
	if err != nil {
		return fmt.Errorf("vm %s: %w", v.name, err)
	}
	defer q.Close()
	if err := q.Execute(ctx, command, args, result); err != nil {
		return fmt.Errorf("vm %s: %w", v.name, err)
	}
	return nil
}

// Stop powers the VM off: it presses the power button and waits up to
// grace for the guest to power off, then quits QEMU, then kills it. It
// returns nil after a clean power-off, and an error wrapping ErrForced
// when it had to force QEMU to stop. ctx bounds the whole stop.
func (v *VM) Stop(ctx context.Context, grace time.Duration) error {
	select {
	case <-v.Done():
		return nil
	default:
	}
	if err := v.Powerdown(ctx); err == nil {
		if v.exitWithin(ctx, grace) {
			return nil
		}
	}
	// Quit and kill get a few seconds each: QEMU exits at once on either
	// unless it hangs.
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	qerr := v.Quit(qctx)
	cancel()
	if qerr == nil && v.exitWithin(ctx, 10*time.Second) {
		return fmt.Errorf("vm %s: %w (quit after %s)", v.name, ErrForced, grace)
	}
	if err := v.Kill(); err != nil {
		return err
	}
	if v.exitWithin(ctx, 10*time.Second) {
		return fmt.Errorf("vm %s: %w (killed after %s; quit: %v)", v.name, ErrForced, grace, qerr)
	}
	return fmt.Errorf("vm %s: qemu (pid %d) survived SIGKILL", v.name, v.pid)
}

// exitWithin reports whether QEMU exits within d.
func (v *VM) exitWithin(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-v.Done():
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	select {
	case <-v.Done():
		return true
	default:
		return false
	}
}

// tailFile returns the last n lines of a log file, for error messages.
func tailFile(path string, n int) string {
	b, _ := os.ReadFile(path)
	return Tail(string(b), n)
}

package supervise

import (
	"fmt"
	"syscall"
)

// Status is how a child ended.
type Status struct {
	// Code is the exit code, or -1 when a signal killed the child.
	Code int
	// Signal is the signal that killed the child, or 0 when it exited.
	Signal syscall.Signal
	// CoreDump reports whether the child dumped core.
	CoreDump bool
}

// Exited reports whether the child exited on its own (with any code).
func (s Status) Exited() bool { return s.Signal == 0 }

// Success reports whether the child exited with code 0.
func (s Status) Success() bool { return s.Signal == 0 && s.Code == 0 }

// String reads like os.ProcessState's: "exit status 3", "signal: killed".
func (s Status) String() string {
	if s.Signal == 0 {
		return fmt.Sprintf("exit status %d", s.Code)
	}
	str := "signal: " + s.Signal.String()
	if s.CoreDump {
		str += " (core dumped)"
	}
	return str
}

// err returns nil for success and an *ExitError otherwise.
func (s Status) err(pid int) error {
	if s.Success() {
		return nil
	}
	return &ExitError{Status: s, Pid: pid}
}

// ExitError is the error of a child that did not exit with code 0. It plays
// the part of exec.ExitError, whose ProcessState only exec.Cmd.Wait can
// fill.
type ExitError struct {
	Status
	Pid int
	// Stderr holds the child's standard error when Output collected it.
	Stderr []byte
}

func (e *ExitError) Error() string { return e.Status.String() }

// ExitCode returns the exit code, or -1 when a signal killed the child.
func (e *ExitError) ExitCode() int { return e.Code }

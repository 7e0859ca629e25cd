package supervise

import (
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

func (r *reaper) start() error {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, unix.SIGCHLD)
	go func() {
		r.reap() // zombies from before we listened
		for range ch {
			r.reap()
		}
	}()
	return nil
}

// reap collects every child that has exited. SIGCHLDs coalesce, so one
// signal may stand for many children: loop until wait4 finds none.
func (r *reaper) reap() {
	type orphan struct {
		f   func(int, Status)
		pid int
		st  Status
	}
	var orphans []orphan
	r.mu.Lock()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || pid <= 0 { // ECHILD: no children; 0: none exited
			break
		}
		st := statusOf(ws)
		if f := r.collected(pid, st); f != nil {
			orphans = append(orphans, orphan{f, pid, st})
		}
	}
	r.mu.Unlock()
	for _, o := range orphans {
		o.f(o.pid, o.st)
	}
}

func statusOf(ws unix.WaitStatus) Status {
	if ws.Signaled() {
		return Status{Code: -1, Signal: ws.Signal(), CoreDump: ws.CoreDump()}
	}
	return Status{Code: ws.ExitStatus()}
}

// sysProcAttr puts a supervised child in its own process group, so a Ctrl-C
// on a container's terminal reaches init only and init decides how etcd
// stops (leadership transfer first, then SIGTERM).
//
// No Pdeathsig: it fires when the OS thread that forked the child exits,
// not the process (golang/go#27505), and Go ends a thread whenever a
// goroutine exits while locked to it, as network-namespace code does. etcd
// would be SIGKILLed at random. As PID 1, init cannot die without a kernel
// panic; in a container, the runtime kills the namespace when init exits.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

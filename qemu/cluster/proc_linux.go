package cluster

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// detached makes the network daemon the leader of a new session: no
// terminal signal (Ctrl-C in the shell that ran `cluster up`) reaches it.
func detached() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

// daemonAlive reports whether pid is a live process working in dir: the
// daemon runs with its socket directory as working directory, so a pid
// reused by another process does not count.
func daemonAlive(pid int, dir string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X' {
		return false
	}
	cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	return err == nil && cwd == dir
}

// lockDir takes an exclusive lock on dir/.lock, so that two commands do
// not change one cluster at once; the returned function releases it.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(dir+"/"+lockFile, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("cluster in %s: another etcdbox command is changing it: %w", dir, err)
	}
	return func() { f.Close() }, nil
}

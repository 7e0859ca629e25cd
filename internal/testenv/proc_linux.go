package testenv

import "syscall"

// DieWithTest is the SysProcAttr of a process a test starts: in its own
// process group, and killed when the test binary dies, even on a timeout
// (Linux's parent-death signal).
func DieWithTest() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

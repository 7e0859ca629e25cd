//go:build !linux

package testenv

import "syscall"

// DieWithTest is the SysProcAttr of a process a test starts: in its own
// process group. Outside Linux there is no parent-death signal, so a test
// binary killed on a timeout leaves it running.
func DieWithTest() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

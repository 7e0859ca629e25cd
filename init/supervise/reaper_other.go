//go:build !linux

package supervise

import (
	"errors"
	"syscall"
)

func (r *reaper) start() error {
	return errors.New("supervise: reaping children needs Linux")
}

func sysProcAttr() *syscall.SysProcAttr { return nil }

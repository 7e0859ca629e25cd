//go:build !linux

package cluster

import (
	"errors"
	"syscall"
)

func detached() *syscall.SysProcAttr { return nil }

func daemonAlive(int, string) bool { return false }

func lockDir(string) (func(), error) { return nil, errors.New("clusters need Linux") }

//go:build !linux

package qemu

import (
	"context"
	"net"
	"syscall"
)

// The harness runs QEMU on Linux; elsewhere the package builds (for vet
// and unit tests) but finds no running VMs.

func detached() *syscall.SysProcAttr { return nil }

func alive(pid int) bool { return false }

func processDir(pid int) string { return "" }

func dialUnix(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", path)
}

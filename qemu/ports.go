package qemu

import (
	"fmt"
	"net"
)

// FreePort asks the kernel for a TCP port that is free on addr (an IP
// address) and returns it. The port is free when FreePort returns; QEMU
// binds it moments later, so a race with another process is possible
// though unlikely (the kernel hands out ports in sequence).
func FreePort(addr string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		return 0, fmt.Errorf("find a free port on %s: %w", addr, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

package kmod

import (
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ueventBuffer is the receive buffer asked for: room for thousands of
// announcements (each a few hundred bytes), so that a driver that makes
// many devices appear at once (a SAS adapter's disks) does not overflow
// it. Should it overflow anyway, Added says so and Coldplug rescans.
const ueventBuffer = 4 << 20

// KernelEvents opens the kernel's uevent socket (netlink, the group the
// kernel broadcasts on, the one udev listens to), non-blocking. sysDir
// is where sysfs is mounted: the devices' Dir is under it.
func KernelEvents(sysDir string) (DeviceEvents, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_KOBJECT_UEVENT)
	if err != nil {
		return nil, fmt.Errorf("uevent socket: %w", err)
	}
	// SO_RCVBUFFORCE goes past rmem_max, with CAP_NET_ADMIN (PID 1 has
	// it); without, SO_RCVBUF gets what rmem_max allows.
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, ueventBuffer) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, ueventBuffer)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind uevent socket: %w", err)
	}
	return &kernelEvents{fd: fd, sysDir: sysDir, buf: make([]byte, 16<<10)}, nil
}

type kernelEvents struct {
	fd     int
	sysDir string
	buf    []byte
}

// Added reads every message waiting. Only the kernel's count (sender
// port 0): any process may send to the group's listeners.
func (k *kernelEvents) Added() ([]Device, bool, error) {
	var out []Device
	lost := false
	for {
		n, from, err := unix.Recvfrom(k.fd, k.buf, 0)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return out, lost, nil
		case errors.Is(err, unix.ENOBUFS):
			lost = true
			continue
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return out, lost, fmt.Errorf("read uevent socket: %w", err)
		}
		if nl, ok := from.(*unix.SockaddrNetlink); !ok || nl.Pid != 0 {
			continue
		}
		if d, ok := parseUevent(k.buf[:n]); ok {
			d.Dir = filepath.Join(k.sysDir, d.Dir)
			out = append(out, d)
		}
	}
}

func (k *kernelEvents) Close() error { return unix.Close(k.fd) }

package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// pseudoMounts are the kernel filesystems PID 1 mounts first, in order.
var pseudoMounts = []struct {
	source, target, fstype string
	flags                  uintptr
	data                   string
}{
	{"proc", "/proc", "proc", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
	{"sysfs", "/sys", "sysfs", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
	{"devtmpfs", "/dev", "devtmpfs", unix.MS_NOSUID, "mode=0755"},
	{"tmpfs", "/run", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=0755"},
	{"tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777"},
	{"cgroup2", "/sys/fs/cgroup", "cgroup2", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
}

// mountPseudo mounts /proc, /sys, /dev, /run, /tmp and cgroup2, then
// attaches kmsg to the logger. A mount that is already there (the kernel
// may mount devtmpfs itself) is fine.
func (n *node) mountPseudo(context.Context) error {
	for _, m := range pseudoMounts {
		if err := os.MkdirAll(m.target, 0o755); err != nil {
			return fmt.Errorf("mkdir %s: %w", m.target, err)
		}
		err := unix.Mount(m.source, m.target, m.fstype, m.flags, m.data)
		if err != nil && !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("mount %s on %s: %w", m.fstype, m.target, err)
		}
	}
	n.attachKmsg()
	return nil
}

// mountReadOnly mounts a filesystem read-only, without devices or setuid.
func mountReadOnly(dev, dir, fstype string) error {
	return unix.Mount(dev, dir, fstype, unix.MS_RDONLY|unix.MS_NODEV|unix.MS_NOSUID|unix.MS_NOEXEC, "")
}

// unmount detaches a mount; errors are of no consequence to the caller.
func unmount(dir string) { _ = unix.Unmount(dir, unix.MNT_DETACH) }

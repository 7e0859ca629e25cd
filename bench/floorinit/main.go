//go:build linux

// Command floorinit is the "floor" PID 1 of `make bench`: the least an
// init can do to serve etcd, so that boot-to-healthy of the etcdbox init
// can be read against it as a ratio. It mounts /proc, /sys and /dev,
// loads the modules the devices need (modalias coldplug, the same loader
// the etcdbox init uses), gives the first NIC QEMU's user-network address
// 10.0.2.15/24 statically, and execs /usr/bin/etcd with plain-http
// listeners and its data on a tmpfs: no TLS, no disk, no DHCP, no
// supervision.
//
// It is built static for the guest and put in an image as /init:
//
//	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -o floorinit ./bench/floorinit
//
// It is not for production: when something fails it says so on the
// console and sleeps, so the bench times out with the reason visible.
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/etcdbox/etcdbox/init/kmod"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The guest's address on QEMU's user network (slirp hands out the same
// one by DHCP); the bench reaches it through a forwarded host port.
const (
	guestAddr = "10.0.2.15/24"
	etcdBin   = "/usr/bin/etcd"
	dataDir   = "/var/lib/etcd"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "floorinit: fatal: %v\n", err)
	}
	// PID 1 must not exit (the kernel would panic); the bench reads the
	// console and gives up on its own.
	for {
		time.Sleep(time.Hour)
	}
}

func run() error {
	for _, m := range []struct{ src, target, fstype, data string }{
		{"proc", "/proc", "proc", ""},
		{"sysfs", "/sys", "sysfs", ""},
		{"devtmpfs", "/dev", "devtmpfs", "mode=0755"},
		{"tmpfs", dataDir, "tmpfs", "mode=0700"},
	} {
		if err := os.MkdirAll(m.target, 0o755); err != nil {
			return fmt.Errorf("mkdir %s: %w", m.target, err)
		}
		if err := unix.Mount(m.src, m.target, m.fstype, 0, m.data); err != nil && !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("mount %s on %s: %w", m.fstype, m.target, err)
		}
	}
	// Module failures for devices the floor does not use (watchdog,
	// input) are not fatal: only the NIC matters.
	if _, err := (&kmod.Loader{}).Coldplug("/sys"); err != nil {
		fmt.Fprintf(os.Stderr, "floorinit: coldplug: %v\n", err)
	}
	ip, err := configureNIC()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "floorinit: exec etcd on %s\n", ip)
	args := []string{
		etcdBin,
		"--name=floor",
		"--data-dir=" + dataDir,
		"--listen-client-urls=http://0.0.0.0:2379",
		"--advertise-client-urls=http://" + ip + ":2379",
		"--listen-peer-urls=http://0.0.0.0:2380",
		"--initial-advertise-peer-urls=http://" + ip + ":2380",
		"--initial-cluster=floor=http://" + ip + ":2380",
		"--initial-cluster-state=new",
		"--logger=zap",
		"--log-outputs=stderr",
	}
	env := []string{"PATH=/usr/bin:/usr/sbin:/bin:/sbin", "HOME=/"}
	return fmt.Errorf("exec %s: %w", etcdBin, syscall.Exec(etcdBin, args, env))
}

// configureNIC waits for the first non-loopback link, brings it and lo
// up, and gives it guestAddr. No route: forwarded connections come from
// the slirp gateway 10.0.2.2, on the link. It returns the address without
// its prefix length.
func configureNIC() (string, error) {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return "", fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	var nic netlink.Link
	for deadline := time.Now().Add(20 * time.Second); nic == nil; {
		links, err := h.LinkList()
		if err != nil {
			return "", fmt.Errorf("list links: %w", err)
		}
		for _, l := range links {
			if l.Attrs().Flags&net.FlagLoopback != 0 {
				if err := h.LinkSetUp(l); err != nil {
					return "", fmt.Errorf("set %s up: %w", l.Attrs().Name, err)
				}
				continue
			}
			if nic == nil {
				nic = l
			}
		}
		if nic == nil {
			if time.Now().After(deadline) {
				return "", errors.New("no network interface appeared within 20s")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	addr, err := netlink.ParseAddr(guestAddr)
	if err != nil {
		return "", err
	}
	name := nic.Attrs().Name
	if err := h.AddrReplace(nic, addr); err != nil {
		return "", fmt.Errorf("add %s to %s: %w", guestAddr, name, err)
	}
	if err := h.LinkSetUp(nic); err != nil {
		return "", fmt.Errorf("set %s up: %w", name, err)
	}
	return addr.IP.String(), nil
}

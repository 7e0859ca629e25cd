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
// In its cluster mode, chosen on the kernel command line
// (floor.cluster=f1=10.88.0.11,f2=10.88.0.12,f3=10.88.0.13; see
// cmdline.go), it is instead one member of a plain-http etcd cluster on
// a closed qemu/vnet network, the throughput bench's floor: its address
// is static, its member is the one whose name gives its NIC's MAC, and
// its data is on the image's DATA partition, grown, formatted ext4 and
// mounted by the same code (init/storage) and options as an etcdbox
// node's, since fsync dominates etcd's write path.
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
	// clusterData is etcd's data directory in the cluster mode, on DATA
	// mounted at dataDir.
	clusterData = dataDir + "/data"
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
	} {
		if err := mount(m.src, m.target, m.fstype, m.data); err != nil {
			return err
		}
	}
	cmdline, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return err
	}
	// Module failures for devices the floor does not use (watchdog,
	// input) are not fatal: only the NIC (and in the cluster mode the
	// disk) matters.
	loader := &kmod.Loader{Events: kmod.KernelEvents}
	if _, err := loader.Coldplug("/sys"); err != nil {
		fmt.Fprintf(os.Stderr, "floorinit: coldplug: %v\n", err)
	}
	h, nic, err := findNIC()
	if err != nil {
		return err
	}
	defer h.Close()
	cc, err := parseCmdline(string(cmdline), nic.Attrs().HardwareAddr)
	if err != nil {
		return err
	}
	if cc != nil {
		// ext4 has no modalias a device announces.
		if _, err := loader.Load("ext4"); err != nil {
			return fmt.Errorf("load ext4: %w", err)
		}
		return runMember(h, nic, *cc)
	}
	if err := mount("tmpfs", dataDir, "tmpfs", "mode=0700"); err != nil {
		return err
	}
	ip, err := configureNIC(h, nic, guestAddr)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "floorinit: exec etcd on %s\n", ip)
	return execEtcd(
		"--name=floor",
		"--data-dir="+dataDir,
		"--listen-client-urls=http://0.0.0.0:2379",
		"--advertise-client-urls=http://"+ip+":2379",
		"--listen-peer-urls=http://0.0.0.0:2380",
		"--initial-advertise-peer-urls=http://"+ip+":2380",
		"--initial-cluster=floor=http://"+ip+":2380",
		"--initial-cluster-state=new",
	)
}

// execEtcd replaces this process with etcd, logging to the console.
func execEtcd(args ...string) error {
	argv := append(append([]string{etcdBin}, args...), "--logger=zap", "--log-outputs=stderr")
	env := []string{"PATH=/usr/bin:/usr/sbin:/bin:/sbin", "HOME=/"}
	return fmt.Errorf("exec %s: %w", etcdBin, syscall.Exec(etcdBin, argv, env))
}

// mount mounts a filesystem on target, made when missing; one already
// there is fine.
func mount(src, target, fstype, data string) error {
	if err := os.MkdirAll(target, 0o755); err != nil {
		return fmt.Errorf("mkdir %s: %w", target, err)
	}
	if err := unix.Mount(src, target, fstype, 0, data); err != nil && !errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("mount %s on %s: %w", fstype, target, err)
	}
	return nil
}

// findNIC waits for the first non-loopback link and brings lo up.
func findNIC() (*netlink.Handle, netlink.Link, error) {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, nil, fmt.Errorf("netlink: %w", err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		links, err := h.LinkList()
		if err != nil {
			h.Close()
			return nil, nil, fmt.Errorf("list links: %w", err)
		}
		var nic netlink.Link
		for _, l := range links {
			if l.Attrs().Flags&net.FlagLoopback != 0 {
				if err := h.LinkSetUp(l); err != nil {
					h.Close()
					return nil, nil, fmt.Errorf("set %s up: %w", l.Attrs().Name, err)
				}
				continue
			}
			if nic == nil {
				nic = l
			}
		}
		if nic != nil {
			return h, nic, nil
		}
		if time.Now().After(deadline) {
			h.Close()
			return nil, nil, errors.New("no network interface appeared within 20s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// configureNIC gives nic the address cidr and brings it up. No route:
// the single node's forwarded connections come from the slirp gateway
// 10.0.2.2, and a cluster member's from its network's gateway, both on
// the link. It returns the address without its prefix length.
func configureNIC(h *netlink.Handle, nic netlink.Link, cidr string) (string, error) {
	addr, err := netlink.ParseAddr(cidr)
	if err != nil {
		return "", err
	}
	name := nic.Attrs().Name
	if err := h.AddrReplace(nic, addr); err != nil {
		return "", fmt.Errorf("add %s to %s: %w", cidr, name, err)
	}
	if err := h.LinkSetUp(nic); err != nil {
		return "", fmt.Errorf("set %s up: %w", name, err)
	}
	return addr.IP.String(), nil
}

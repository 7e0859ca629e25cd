package qemu

import (
	"crypto/sha256"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/hashicorp/go-multierror"
)

// Config describes one virtual machine.
type Config struct {
	// Name names the VM in errors and logs and seeds its MAC address.
	Name string
	// Dir is the VM's work directory (see the package doc); it is created
	// when missing.
	Dir string
	// Image is the base disk image, raw or qcow2. With Overlay the VM's
	// disk is a qcow2 overlay whose backing file is Image, which must then
	// stay unchanged while the VM's disk exists.
	Image string
	// Overlay selects a qcow2 overlay over Image instead of a (sparse)
	// copy of it.
	Overlay bool
	// DiskSize, when larger than the VM's disk, grows the disk to this
	// many bytes before boot (a cloud volume resize). Zero keeps the size.
	// A disk is never shrunk.
	DiskSize int64
	// OVMFCode and OVMFVars are the UEFI firmware and the template of its
	// variable store; each VM gets its own copy of the variables.
	OVMFCode, OVMFVars string
	// MemoryMiB is the guest memory; default 1024.
	MemoryMiB int
	// CPUs is the number of virtual CPUs; default 1.
	CPUs int
	// Forwards are host TCP ports forwarded to guest ports.
	Forwards []Forward
	// Network is the NIC's network; the zero value is NetUser.
	Network NetMode
	// Switch is the switch socket of a NetSwitch network.
	Switch string
	// ExtraDisks are raw images attached read-only as further virtio
	// disks after the boot disk, e.g. a NoCloud cidata seed volume.
	ExtraDisks []string
	// MAC is the NIC's address; nil derives one from Name (see MAC).
	MAC net.HardwareAddr
	// Accel is "kvm", "tcg", or "auto" or "" for $ETCDBOX_ACCEL, else KVM
	// when a test guest proves it works (see ChooseAccel).
	Accel string
	// CPU is QEMU's CPU model; default "host" under KVM, "max" under TCG
	// (both have RDRAND; "qemu64" has not).
	CPU string
	// NoRNG leaves out the virtio-rng-pci device every VM gets otherwise.
	NoRNG bool
	// NoWatchdog leaves out the i6300esb watchdog every VM gets
	// otherwise. The q35 chipset's own TCO watchdog stays: a guest reaches
	// it through lpc_ich and iTCO_wdt, as on an Intel machine, and it is
	// strapped to reset the machine when it expires (ICH9-LPC.noreboot,
	// which QEMU 7.2 sets by default: its TCO then only counts, and the
	// guest cannot tell).
	NoWatchdog bool
	// Args are appended to QEMU's command line verbatim.
	Args []string
}

// Forward forwards a host TCP port to a guest port.
type Forward struct {
	// HostAddr is the host address to listen on; default 127.0.0.1.
	HostAddr string
	// HostPort is the host port; 0 picks a free one at Start.
	HostPort int
	// GuestPort is the port inside the guest.
	GuestPort int
}

// NetMode selects what the VM's NIC is connected to.
type NetMode string

// NetUser is QEMU's user-mode network (slirp) with restrict=on: the guest
// gets an address by DHCP (10.0.2.15), can reach nothing outside, and is
// reachable only through Forwards.
const NetUser NetMode = "user"

// NetSwitch connects the NIC to a qemu/vnet network through its switch
// socket (Config.Switch): a closed network with the harness's DHCP and DNS,
// shared by the cluster's VMs. Host ports reach the guest through the
// network's forwards, not through QEMU, so Forwards must be empty.
const NetSwitch NetMode = "switch"

var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// withDefaults returns c with defaults filled in and paths made absolute,
// or every problem with it at once.
func (c Config) withDefaults() (Config, error) {
	var errs *multierror.Error
	if !nameRE.MatchString(c.Name) || len(c.Name) > 63 {
		errs = multierror.Append(errs, fmt.Errorf("name %q: want [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 characters", c.Name))
	}
	for _, p := range []struct {
		name string
		path *string
	}{{"dir", &c.Dir}, {"image", &c.Image}, {"OVMF code", &c.OVMFCode}, {"OVMF vars", &c.OVMFVars}} {
		if *p.path == "" {
			errs = multierror.Append(errs, fmt.Errorf("%s: missing", p.name))
			continue
		}
		abs, err := filepath.Abs(*p.path)
		if err != nil {
			errs = multierror.Append(errs, fmt.Errorf("%s %s: %w", p.name, *p.path, err))
			continue
		}
		*p.path = abs
	}
	if c.MemoryMiB == 0 {
		c.MemoryMiB = 1024
	}
	if c.MemoryMiB < 0 {
		errs = multierror.Append(errs, fmt.Errorf("memory %d MiB: negative", c.MemoryMiB))
	}
	if c.CPUs == 0 {
		c.CPUs = 1
	}
	if c.CPUs < 0 {
		errs = multierror.Append(errs, fmt.Errorf("cpus %d: negative", c.CPUs))
	}
	if c.DiskSize < 0 {
		errs = multierror.Append(errs, fmt.Errorf("disk size %d: negative", c.DiskSize))
	}
	errs = multierror.Append(errs, c.networkDefaults()...)
	disks := make([]string, len(c.ExtraDisks))
	for i, d := range c.ExtraDisks {
		abs, err := filepath.Abs(d)
		if err != nil {
			errs = multierror.Append(errs, fmt.Errorf("extra disk %d %s: %w", i, d, err))
		}
		disks[i] = abs
	}
	c.ExtraDisks = disks
	if c.MAC == nil && c.Name != "" {
		c.MAC = MAC(c.Name, 0)
	}
	if len(c.MAC) != 6 {
		errs = multierror.Append(errs, fmt.Errorf("mac %q: want 6 bytes", c.MAC))
	}
	switch c.Accel {
	case "", AccelAuto, AccelKVM, AccelTCG:
	default:
		errs = multierror.Append(errs, fmt.Errorf("accel %q: want auto, kvm or tcg", c.Accel))
	}
	errs = multierror.Append(errs, c.forwardDefaults()...)
	return c, errs.ErrorOrNil()
}

// networkDefaults defaults and checks the network mode.
func (c *Config) networkDefaults() []error {
	var errs []error
	if c.Network == "" {
		c.Network = NetUser
	}
	switch c.Network {
	case NetUser:
	case NetSwitch:
		if c.Switch == "" {
			errs = append(errs, fmt.Errorf("network %q: switch socket missing", c.Network))
		}
		if len(c.Forwards) > 0 {
			errs = append(errs, fmt.Errorf("network %q: forwards belong to the switch's network, not to QEMU", c.Network))
		}
	default:
		errs = append(errs, fmt.Errorf("network %q: want %q or %q", c.Network, NetUser, NetSwitch))
	}
	return errs
}

// forwardDefaults defaults and checks the host port forwards.
func (c *Config) forwardDefaults() []error {
	var errs []error
	fw := make([]Forward, len(c.Forwards))
	for i, f := range c.Forwards {
		if f.HostAddr == "" {
			f.HostAddr = "127.0.0.1"
		}
		if net.ParseIP(f.HostAddr) == nil {
			errs = append(errs, fmt.Errorf("forwards[%d]: host address %q: not an IP address", i, f.HostAddr))
		}
		if f.HostPort < 0 || f.HostPort > 65535 {
			errs = append(errs, fmt.Errorf("forwards[%d]: host port %d: out of range", i, f.HostPort))
		}
		if f.GuestPort <= 0 || f.GuestPort > 65535 {
			errs = append(errs, fmt.Errorf("forwards[%d]: guest port %d: out of range", i, f.GuestPort))
		}
		fw[i] = f
	}
	c.Forwards = fw
	return errs
}

// MAC returns the deterministic address of a VM's nic-th NIC: QEMU's
// locally administered prefix 52:54:00 and three bytes of a hash of name
// and nic, so a node keeps its address (and DHCP lease) across restarts.
func MAC(name string, nic int) net.HardwareAddr {
	sum := sha256.Sum256([]byte(name + "/" + strconv.Itoa(nic)))
	return net.HardwareAddr{0x52, 0x54, 0x00, sum[0], sum[1], sum[2]}
}

// disk is a prepared VM disk: its file name inside Dir and its format.
type disk struct {
	file   string
	format string // "qcow2" or "raw"
}

// Work directory file names; QEMU runs with Dir as its working directory
// and gets them relative, so a long Dir does not overflow the 108-byte
// limit of a unix socket path.
const (
	consoleFile = "console.log"
	qemuLogFile = "qemu.log"
	pidFile     = "qemu.pid"
	qmpFile     = "qmp.sock"
	varsFile    = "OVMF_VARS.fd"
)

// args returns QEMU's command line (without the binary) for c, which
// must have its defaults filled in and its host ports chosen.
func (c Config) args(accel string, d disk) []string {
	a := []string{
		"-name", "guest=" + c.Name,
		"-no-user-config", "-nodefaults", "-display", "none",
		"-machine", "q35",
		"-m", strconv.Itoa(c.MemoryMiB),
		"-smp", strconv.Itoa(c.CPUs),
		"-pidfile", pidFile,
		"-qmp", "unix:" + qmpFile + ",server=on,wait=off",
		"-chardev", "file,id=console0,path=" + consoleFile,
		"-serial", "chardev:console0",
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + escape(c.OVMFCode),
		"-drive", "if=pflash,format=raw,unit=1,file=" + varsFile,
		// writeback: the guest's flushes reach the host file, so a QEMU
		// kill behaves like a power cut, not like lost acknowledged writes.
		// The ids are the ones LimitDisk and DiskLimit name (disklimit.go).
		"-drive", "if=none,id=" + diskDrive + ",file=" + escape(d.file) + ",format=" + d.format + ",cache=writeback,discard=unmap",
		"-device", "virtio-blk-pci,drive=" + diskDrive + ",id=" + diskDevice + ",bootindex=0",
		"-netdev", c.netdev(),
		// romfile= drops the NIC's iPXE option ROM: no network boot attempts.
		"-device", "virtio-net-pci,netdev=net0,mac=" + c.MAC.String() + ",romfile=",
		// What a watchdog that expires does, the chipset's TCO's included.
		"-action", "watchdog=reset",
	}
	if c.NoWatchdog {
		a = append(a, "-global", "ICH9-LPC.noreboot=false")
	} else {
		a = append(a, "-device", "i6300esb")
	}
	for i, d := range c.ExtraDisks {
		id := "disk" + strconv.Itoa(i+1)
		a = append(a, "-drive", "if=none,id="+id+",file="+escape(d)+",format=raw,readonly=on",
			"-device", "virtio-blk-pci,drive="+id)
	}
	if !c.NoRNG {
		// A hardware random source: without RDRAND (older CPU models,
		// some hypervisors) the guest would wait for entropy.
		a = append(a, "-device", "virtio-rng-pci")
	}
	cpu := c.CPU
	switch accel {
	case AccelKVM:
		a = append(a, "-accel", "kvm", "-cpu", or(cpu, "host"))
	default:
		a = append(a, "-accel", tcgAccel, "-cpu", or(cpu, "max"))
	}
	return append(a, c.Args...)
}

// tcgAccel is the software emulator's setting: one host thread per vCPU,
// and a 64 MiB translation cache instead of QEMU's default 1 GiB.
//
// The cache size is about reboots. TCG keeps what it translated until the
// cache is full, and a guest reboot (or a kexec) does not empty it: one
// boot of a node leaves about 175 MB of translations behind (QMP "info
// jit": 292,000 blocks), so a 1 GiB cache is never flushed in a test's
// life. The next kernel then writes its initramfs, page tables and heap
// into pages that held the last boot's code, and every first write to
// such a page makes QEMU look up and drop the stale blocks there. The
// initramfs of the default image unpacked in 1.3 s on a fresh VM but in
// 3.9-6.2 s on the same VM's reboots, slower with every reboot; with a 64
// MiB cache, 1.1-2.7 s. One node, reboot request to "etcd ready" (two
// rounds of two reboots, software emulation, 2 cores): 17.5-22.2 s with
// 1 GiB, 16.0-19.6 s with 64 MiB; a fresh node's boot did not change
// (14.8-17.2 s, 15.1-15.2 s with 1 GiB). 32 MiB flushed 37-49 times in
// three boots and slowed the first one (17.2-18.6 s); 64 MiB flushes
// about 4 times a boot and rarely once etcd runs, whose working set
// stays far below it (+70 KB of translations in 30 s idle).
const tcgAccel = "tcg,thread=multi,tb-size=64"

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (c Config) netdev() string {
	if c.Network == NetSwitch {
		return "stream,id=net0,server=off,addr.type=unix,addr.path=" + escape(c.Switch)
	}
	var b strings.Builder
	b.WriteString("user,id=net0,restrict=on")
	for _, f := range c.Forwards {
		fmt.Fprintf(&b, ",hostfwd=tcp:%s-:%d", net.JoinHostPort(f.HostAddr, strconv.Itoa(f.HostPort)), f.GuestPort)
	}
	return b.String()
}

// escape doubles commas, QEMU's escape inside option values.
func escape(s string) string { return strings.ReplaceAll(s, ",", ",,") }

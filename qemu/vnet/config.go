package vnet

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"
)

// Config describes a network.
type Config struct {
	// Dir holds the network's unix sockets (see SwitchSocket and
	// ControlSocket); it is created when missing. Empty means no switch
	// socket: VMs then attach with Network.Attach.
	Dir string `json:"dir,omitempty"`
	// Subnet is the network's IPv4 prefix; default 10.88.0.0/24. Its first
	// address is the gateway: the harness's own host, which serves DHCP
	// and DNS and dials forwarded ports. Nothing is routed beyond it.
	Subnet string `json:"subnet,omitempty"`
	// Domain is the cluster's DNS domain; default etcdbox.internal. Hosts
	// are <name>.<Domain>; the SRV records live under it.
	Domain string `json:"domain,omitempty"`
	// SRVName, when set, adds the service-name variants of the SRV records
	// (_etcd-server-ssl-<SRVName>._tcp, as etcd's --discovery-srv-name
	// looks them up) next to the plain ones.
	SRVName string `json:"srvName,omitempty"`
	// Hosts are the network's hosts at start; AddHost adds more.
	Hosts []Host `json:"hosts,omitempty"`
	// LeaseTime is the DHCP lease time; default one hour.
	LeaseTime time.Duration `json:"leaseTime,omitempty"`
	// Logf receives one line per event worth a look (a VM attached or
	// left, a lease, a refused query). Nil discards them.
	Logf func(format string, args ...any) `json:"-"`
	// Started, when set, is called by Serve once the network runs and
	// before its control socket listens, e.g. to serve a registry on the
	// gateway with Listen. An error stops Serve.
	Started func(n *Network) error `json:"-"`
}

// Host is one guest: its DHCP lease (MAC to IP, with Name as the DHCP
// host name) and its DNS records.
type Host struct {
	// Name is the host's DNS label and DHCP host name (option 12), from
	// which the guest takes its node name.
	Name string
	// MAC is the guest NIC's address; the lease is static for it.
	MAC net.HardwareAddr
	// IP is the guest's address, inside the subnet.
	IP netip.Addr
	// SkipSRV leaves the host out of the generated SRV records while it
	// keeps its A record, to model a node the SRV records do not list
	// (yet). See also Network.SetSRV.
	SkipSRV bool
	// Next, when valid, is the address of the host's next lease: a
	// booting guest is offered Next instead of IP, and once it takes
	// that lease, Next becomes IP (its A record and forwards follow).
	// A running guest that renews keeps IP until then. This models a
	// DHCP server that renumbers its clients: each moves on its next boot.
	Next netip.Addr
}

// hostJSON is Host on the wire: the MAC as text.
type hostJSON struct {
	Name    string     `json:"name"`
	MAC     string     `json:"mac"`
	IP      netip.Addr `json:"ip"`
	SkipSRV bool       `json:"skipSRV,omitempty"`
	Next    netip.Addr `json:"next,omitzero"`
}

// MarshalJSON writes the MAC as 52:54:00:... text.
func (h Host) MarshalJSON() ([]byte, error) {
	return json.Marshal(hostJSON{Name: h.Name, MAC: h.MAC.String(), IP: h.IP, SkipSRV: h.SkipSRV, Next: h.Next})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (h *Host) UnmarshalJSON(b []byte) error {
	var j hostJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*h = Host{Name: j.Name, IP: j.IP, SkipSRV: j.SkipSRV, Next: j.Next}
	if j.MAC != "" {
		mac, err := net.ParseMAC(j.MAC)
		if err != nil {
			return fmt.Errorf("host %s: %w", j.Name, err)
		}
		h.MAC = mac
	}
	return nil
}

// SRV is one raw SRV record (see Network.SetSRV). Name and Target are
// relative to the domain unless they end with a dot, as in a zone file.
type SRV struct {
	Name     string `json:"name"`   // "_etcd-server-ssl._tcp"
	Target   string `json:"target"` // "n1", or "." for "no such service"
	Port     uint16 `json:"port"`
	Priority uint16 `json:"priority,omitempty"`
	Weight   uint16 `json:"weight,omitempty"`
}

// Defaults.
const (
	DefaultSubnet    = "10.88.0.0/24"
	DefaultDomain    = "etcdbox.internal"
	DefaultLeaseTime = time.Hour
)

// Ports in the generated SRV records: etcd's peer and client ports.
const (
	PeerPort   = 2380
	ClientPort = 2379
)

// Socket names inside Config.Dir. They are short because a unix socket
// path has at most 107 bytes.
const (
	switchSocket  = "net.sock"
	controlSocket = "ctl.sock"
)

// maxSocketPath is the longest unix socket path Linux takes (sun_path is
// 108 bytes with its NUL).
const maxSocketPath = 107

// SwitchSocket returns the path of the socket VMs connect to in dir.
func SwitchSocket(dir string) string { return filepath.Join(dir, switchSocket) }

// ControlSocket returns the path of the control API's socket in dir.
func ControlSocket(dir string) string { return filepath.Join(dir, controlSocket) }

// QEMUArgs returns the QEMU arguments that give a VM a virtio NIC with
// address mac on the network whose switch socket is sock. id names the
// netdev; it must be unique in the VM. QEMU 7.2 connects once, at start,
// and does not reconnect: the network must listen before QEMU starts
// and outlive it.
func QEMUArgs(sock, id string, mac net.HardwareAddr) ([]string, error) {
	if len(sock) > maxSocketPath {
		return nil, fmt.Errorf("switch socket %s: path longer than %d bytes", sock, maxSocketPath)
	}
	if len(mac) != 6 {
		return nil, fmt.Errorf("mac %q: want 6 bytes", mac)
	}
	esc := strings.ReplaceAll(sock, ",", ",,")
	return []string{
		"-netdev", "stream,id=" + id + ",server=off,addr.type=unix,addr.path=" + esc,
		// romfile= drops the NIC's iPXE option ROM: no network boot attempts.
		"-device", "virtio-net-pci,netdev=" + id + ",mac=" + mac.String() + ",romfile=",
	}, nil
}

var labelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// validName reports whether s is a lowercase DNS label.
func validName(s string) bool { return len(s) <= 63 && labelRE.MatchString(s) }

// validDomain reports whether s is a lowercase DNS name without a
// trailing dot.
func validDomain(s string) bool {
	if s == "" || len(s) > 200 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !validName(l) {
			return false
		}
	}
	return true
}

// resolved is a checked Config with its defaults and derived values.
type resolved struct {
	Config
	prefix  netip.Prefix
	gateway netip.Addr
}

// resolve fills in defaults and checks cfg, reporting every problem at
// once.
func resolve(cfg Config) (resolved, error) {
	r := resolved{Config: cfg}
	var errs *multierror.Error
	if r.Subnet == "" {
		r.Subnet = DefaultSubnet
	}
	p, err := netip.ParsePrefix(r.Subnet)
	switch {
	case err != nil:
		errs = multierror.Append(errs, fmt.Errorf("subnet %q: %w", r.Subnet, err))
	case !p.Addr().Is4() || p.Bits() > 30 || p.Bits() < 8:
		errs = multierror.Append(errs, fmt.Errorf("subnet %q: want an IPv4 prefix from /8 to /30", r.Subnet))
	default:
		r.prefix = p.Masked()
		r.gateway = r.prefix.Addr().Next()
	}
	if r.Domain == "" {
		r.Domain = DefaultDomain
	}
	r.Domain = strings.TrimSuffix(strings.ToLower(r.Domain), ".")
	if !validDomain(r.Domain) {
		errs = multierror.Append(errs, fmt.Errorf("domain %q: not a DNS name", cfg.Domain))
	}
	if r.SRVName != "" && !validName(r.SRVName) {
		errs = multierror.Append(errs, fmt.Errorf("srv name %q: want a DNS label", r.SRVName))
	}
	if r.LeaseTime == 0 {
		r.LeaseTime = DefaultLeaseTime
	}
	if r.LeaseTime < time.Minute {
		errs = multierror.Append(errs, fmt.Errorf("lease time %s: shorter than a minute", r.LeaseTime))
	}
	if r.Dir != "" {
		abs, err := filepath.Abs(r.Dir)
		if err != nil {
			errs = multierror.Append(errs, fmt.Errorf("dir %s: %w", r.Dir, err))
		}
		r.Dir = abs
		for _, s := range []string{SwitchSocket(abs), ControlSocket(abs)} {
			if len(s) > maxSocketPath {
				errs = multierror.Append(errs, fmt.Errorf("dir %s: socket path %s is longer than %d bytes", r.Dir, s, maxSocketPath))
				break
			}
		}
	}
	if r.Logf == nil {
		r.Logf = func(string, ...any) {}
	}
	if errs != nil {
		return r, errs.ErrorOrNil()
	}
	var hosts []Host
	for i, h := range cfg.Hosts {
		h, err := r.checkHost(h, hosts)
		if err != nil {
			errs = multierror.Append(errs, fmt.Errorf("hosts[%d]: %w", i, err))
			continue
		}
		hosts = append(hosts, h)
	}
	r.Hosts = hosts
	return r, errs.ErrorOrNil()
}

// ErrConflict means a host's name, MAC or IP is taken by another host.
var ErrConflict = errors.New("conflicts with another host")

// checkHost checks h against the network and against others (which it
// may replace: same name).
func (r resolved) checkHost(h Host, others []Host) (Host, error) {
	h.Name = strings.ToLower(h.Name)
	if !validName(h.Name) {
		return h, fmt.Errorf("host name %q: want [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 characters", h.Name)
	}
	if len(h.MAC) != 6 || h.MAC[0]&1 != 0 {
		return h, fmt.Errorf("host %s: mac %q: want a unicast Ethernet address", h.Name, h.MAC)
	}
	h.MAC = append(net.HardwareAddr(nil), h.MAC...)
	h.IP = h.IP.Unmap()
	h.Next = h.Next.Unmap()
	if h.Next == h.IP {
		h.Next = netip.Addr{}
	}
	last := broadcastOf(r.prefix)
	for _, a := range []struct {
		what string
		ip   netip.Addr
	}{{"ip", h.IP}, {"next ip", h.Next}} {
		switch {
		case a.what == "next ip" && !a.ip.IsValid():
		case !r.prefix.Contains(a.ip):
			return h, fmt.Errorf("host %s: %s %s: not in subnet %s", h.Name, a.what, a.ip, r.prefix)
		case a.ip == r.prefix.Addr() || a.ip == last:
			return h, fmt.Errorf("host %s: %s %s: the subnet's network or broadcast address", h.Name, a.what, a.ip)
		case a.ip == r.gateway:
			return h, fmt.Errorf("host %s: %s %s: the gateway's address", h.Name, a.what, a.ip)
		}
	}
	for _, o := range others {
		if o.Name == h.Name {
			continue
		}
		if o.MAC.String() == h.MAC.String() {
			return h, fmt.Errorf("host %s: mac %s: %w %s", h.Name, h.MAC, ErrConflict, o.Name)
		}
		for _, mine := range []netip.Addr{h.IP, h.Next} {
			if mine.IsValid() && (o.IP == mine || o.Next == mine) {
				return h, fmt.Errorf("host %s: ip %s: %w %s", h.Name, mine, ErrConflict, o.Name)
			}
		}
	}
	return h, nil
}

// broadcastOf returns the last address of an IPv4 prefix.
func broadcastOf(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	for i := p.Bits(); i < 32; i++ {
		a[i/8] |= 0x80 >> (i % 8)
	}
	return netip.AddrFrom4(a)
}

// maskOf returns the netmask of an IPv4 prefix.
func maskOf(p netip.Prefix) net.IPMask { return net.CIDRMask(p.Bits(), 32) }

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/etcdbox/etcdbox/init/netconf"
	"github.com/etcdbox/etcdbox/init/supervise"
	"github.com/etcdbox/etcdbox/seed"
	"github.com/vishvananda/netlink"
)

// configureNetwork brings up the NICs the seed names (or the first NIC with
// DHCP), then names the node (nameNode) and writes its resolver files
// (writeResolver).
func (n *node) configureNetwork(ctx context.Context) error {
	h, err := netconf.Open()
	if err != nil {
		return err
	}
	links, err := waitLinks(ctx, h, 20*time.Second)
	if err != nil {
		return err
	}
	ifaces := toNetconf(n.seed.Network.Interfaces)
	if len(ifaces) == 0 {
		ifaces = []netconf.Interface{{DHCP: true}}
	}
	var plans []netconf.Plan
	var mac net.HardwareAddr
	for i, in := range ifaces {
		l, err := netconf.Match(links, in)
		if err != nil {
			return fmt.Errorf("seed network.interfaces[%d]: %w", i, err)
		}
		name := l.Attrs().Name
		if mac == nil {
			mac = l.Attrs().HardwareAddr
		}
		if err := netconf.Up(h, name); err != nil {
			return err
		}
		var p netconf.Plan
		if in.DHCP {
			var lease *netconf.Lease
			p, lease, err = dhcpWithRetry(ctx, name, n.log.Printf)
			if err != nil {
				return err
			}
			supervise.Go(ctx, "DHCP lease renewal on "+name, n.log.Printf, func(ctx context.Context) { n.renewLease(ctx, h, name, lease, p.Lease) })
		} else {
			p, err = netconf.StaticPlan(name, in, n.seed.Network.DNS, n.seed.Network.Search)
			if err != nil {
				return fmt.Errorf("seed network.interfaces[%d]: %w", i, err)
			}
		}
		if err := netconf.Apply(h, p); err != nil {
			return err
		}
		n.log.Printf("network: %s %v via %v", name, p.Addrs, routesOf(p))
		plans = append(plans, p)
	}

	if err := n.nameNode(plans, mac); err != nil {
		return err
	}
	return n.writeResolver(plans)
}

// downLinks sets the NICs down just before the init halts or jumps into
// another kernel (what names which, for the log). A node of a chaos run
// hung in a kexec under emulation: virtio-net's receive poll spun for good
// in ksoftirqd (a soft lockup in virtnet_poll) after the kernel's shutdown
// had stopped the device under it (a kexec also clears every PCI device's
// bus mastering there), once in about 60 jumps, and only the watchdog
// left running could get it back. A link that is down has its polling
// disabled (virtnet_close), so nothing polls a device the shutdown stops.
// Nothing needs the network by then: etcd is stopped, the API answered,
// the disks are unmounted.
func (n *node) downLinks(what string) {
	h, err := netconf.Open()
	if err != nil {
		n.log.Printf("network: before the %s: %v", what, err)
		return
	}
	defer h.Close()
	links, err := netconf.Links(h)
	if err != nil {
		n.log.Printf("network: before the %s: %v", what, err)
		return
	}
	names := make([]string, 0, len(links))
	for _, l := range links {
		names = append(names, l.Attrs().Name)
	}
	if err := netconf.Down(h, links); err != nil {
		n.log.Printf("network: before the %s: %v", what, err)
	}
	if len(names) > 0 {
		n.log.Printf("network: %s down before the %s", strings.Join(names, ", "), what)
	}
}

// nameNode sets the node's name, and the kernel's hostname to it: the
// seed's name, else the one DHCP gave, else the kernel's hostname, else
// one made from the MAC address.
func (n *node) nameNode(plans []netconf.Plan, mac net.HardwareAddr) error {
	hostname, _ := os.Hostname()
	for _, p := range plans {
		if p.Hostname != "" && seed.ValidName(p.Hostname) {
			hostname = p.Hostname
			break
		}
	}
	if hostname == "(none)" {
		hostname = ""
	}
	n.name = n.seed.Name
	if n.name == "" {
		n.name = seed.DefaultNodeName(hostname, mac)
	}
	return setHostname(n.name)
}

// writeResolver writes /etc/resolv.conf (the seed's DNS servers and search
// domains, else the leases') and /etc/hosts (this node's name on its
// addresses), and notes the node's addresses and SRV domain.
func (n *node) writeResolver(plans []netconf.Plan) error {
	n.domain = n.seed.Discovery.SRV
	resolv := netconf.Plan{DNS: parseIPs(n.seed.Network.DNS), Search: n.seed.Network.Search}
	for _, p := range plans {
		n.ips = append(n.ips, p.IPs()...)
		if len(resolv.DNS) == 0 {
			resolv.DNS = p.DNS
		}
		if len(resolv.Search) == 0 {
			resolv.Search = p.Search
		}
	}
	if err := os.WriteFile("/etc/resolv.conf", []byte(resolv.ResolvConf()), 0o644); err != nil {
		return fmt.Errorf("write /etc/resolv.conf: %w", err)
	}
	if err := os.WriteFile("/etc/hosts", []byte(netconf.Hosts(n.name, n.domain, n.ips)), 0o644); err != nil {
		return fmt.Errorf("write /etc/hosts: %w", err)
	}
	return nil
}

// waitLinks waits until the kernel shows at least one NIC: drivers bind
// asynchronously after their modules load.
func waitLinks(ctx context.Context, h *netlink.Handle, limit time.Duration) ([]netlink.Link, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		links, err := netconf.Links(h)
		if err == nil && len(links) > 0 {
			return links, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no network interface appeared within %s (is its driver in the image?)", limit)
		case <-t.C:
		}
	}
}

// dhcpWithRetry asks for a lease until one comes, backing off to 10 s.
func dhcpWithRetry(ctx context.Context, link string, logf func(string, ...any)) (netconf.Plan, *netconf.Lease, error) {
	wait := 500 * time.Millisecond
	for attempt := 1; ; attempt++ {
		p, lease, err := netconf.DHCP(ctx, link, "")
		if err == nil {
			return p, lease, nil
		}
		logf("network: %v (attempt %d, retrying in %s)", err, attempt, wait)
		beatStep(ctx) // a legitimate wait: no DHCP server answers yet
		select {
		case <-ctx.Done():
			return netconf.Plan{}, nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 10*time.Second)
	}
}

// renewLease keeps a DHCP lease alive: it renews at half its life and
// re-applies the plan it gets back.
func (n *node) renewLease(ctx context.Context, h *netlink.Handle, link string, lease *netconf.Lease, secs uint32) {
	for secs > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(secs) * time.Second / 2):
		}
		p, nl, err := netconf.Renew(ctx, link, lease)
		if err != nil {
			n.log.Printf("network: %v; keeping the current address", err)
			secs /= 2
			if secs < 60 {
				secs = 60
			}
			continue
		}
		if err := netconf.Apply(h, p); err != nil {
			n.log.Printf("network: apply renewed lease: %v", err)
		}
		lease, secs = nl, p.Lease
	}
}

func toNetconf(in []seed.Interface) []netconf.Interface {
	var out []netconf.Interface
	for _, i := range in {
		out = append(out, netconf.Interface{Name: i.Name, MAC: i.MAC, DHCP: i.DHCP, Addresses: i.Addresses, Gateway: i.Gateway, MTU: i.MTU})
	}
	return out
}

func parseIPs(ss []string) []net.IP {
	var out []net.IP
	for _, s := range ss {
		if ip := net.ParseIP(s); ip != nil {
			out = append(out, ip)
		}
	}
	return out
}

func routesOf(p netconf.Plan) []string {
	var out []string
	for _, r := range p.Routes {
		out = append(out, fmt.Sprintf("%s via %s", r.Dst, r.Gw))
	}
	return out
}

// containerAddresses takes the node's name from the seed (or the host's
// name) and its addresses from the listen address or the host's NICs.
func (n *node) containerAddresses(context.Context) error {
	hostname, _ := os.Hostname()
	n.name = n.seed.Name
	if n.name == "" {
		n.name = seed.DefaultNodeName(hostname, nil)
	}
	n.domain = n.seed.Discovery.SRV
	if ip := net.ParseIP(n.listenIP); ip != nil && !ip.IsUnspecified() {
		n.ips = []net.IP{ip}
		return nil
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return fmt.Errorf("list addresses: %w", err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
			n.ips = append(n.ips, ipn.IP)
		}
	}
	if len(n.ips) == 0 {
		n.ips = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	return nil
}

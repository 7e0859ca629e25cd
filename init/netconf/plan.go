// Package netconf turns a node's network settings into netlink addresses
// and routes, and applies them idempotently.
//
// It follows "plan, then apply": a Plan is plain data (tested as data), and
// Apply makes the kernel match it with AddrReplace and RouteReplace on an
// explicit netlink handle. DHCPv4 produces a Plan from a lease.
package netconf

import (
	"fmt"
	"net"
	"strings"

	"github.com/hashicorp/go-multierror"
	"github.com/vishvananda/netlink"
)

// Interface is one NIC's settings as the seed states them.
type Interface struct {
	Name      string   // kernel name, e.g. eth0 (empty: match by MAC, or the first NIC)
	MAC       string   // hardware address, e.g. 52:54:00:12:34:56
	DHCP      bool     // lease addresses, gateway and DNS over DHCPv4
	Addresses []string // static addresses in CIDR form
	Gateway   string   // static default gateway
	MTU       int      // 0 keeps the driver's default
}

// Plan is what one link should look like once configured.
type Plan struct {
	Link   string
	MTU    int
	Addrs  []netlink.Addr
	Routes []netlink.Route // LinkIndex is filled in by Apply
	DNS    []net.IP
	Search []string
	// Lease is the DHCP lease duration in seconds, 0 for static plans.
	Lease uint32
	// Hostname is the host name the DHCP server gave (option 12), if any.
	Hostname string
}

// StaticPlan checks a static interface description and turns it into a
// Plan for link. Each problem names its field.
func StaticPlan(link string, in Interface, dns []string, search []string) (Plan, error) {
	p := Plan{Link: link, MTU: in.MTU, Search: search}
	var errs *multierror.Error
	for i, a := range in.Addresses {
		ip, ipnet, err := net.ParseCIDR(a)
		if err != nil {
			errs = multierror.Append(errs, fmt.Errorf("addresses[%d]: invalid CIDR %q", i, a))
			continue
		}
		ipnet.IP = ip
		p.Addrs = append(p.Addrs, netlink.Addr{IPNet: ipnet})
	}
	if in.Gateway != "" {
		gw := net.ParseIP(in.Gateway)
		switch {
		case gw == nil:
			errs = multierror.Append(errs, fmt.Errorf("gateway: invalid address %q", in.Gateway))
		case !onLink(gw, p.Addrs):
			errs = multierror.Append(errs, fmt.Errorf("gateway: %s is on none of the interface's subnets", gw))
		default:
			p.Routes = append(p.Routes, defaultRoute(gw))
		}
	}
	for i, d := range dns {
		ip := net.ParseIP(d)
		if ip == nil {
			errs = multierror.Append(errs, fmt.Errorf("dns[%d]: invalid address %q", i, d))
			continue
		}
		p.DNS = append(p.DNS, ip)
	}
	if len(p.Addrs) == 0 {
		errs = multierror.Append(errs, fmt.Errorf("addresses: a static interface needs at least one"))
	}
	return p, errs.ErrorOrNil()
}

func onLink(gw net.IP, addrs []netlink.Addr) bool {
	for _, a := range addrs {
		if a.IPNet.Contains(gw) {
			return true
		}
	}
	return false
}

func defaultRoute(gw net.IP) netlink.Route {
	dst := &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}
	if gw.To4() == nil {
		dst = &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
	}
	return netlink.Route{Dst: dst, Gw: gw}
}

// IPs returns the plan's addresses without their masks.
func (p Plan) IPs() []net.IP {
	var ips []net.IP
	for _, a := range p.Addrs {
		ips = append(ips, a.IP)
	}
	return ips
}

// ResolvConf renders /etc/resolv.conf for the plan's DNS servers.
func (p Plan) ResolvConf() string {
	var b strings.Builder
	if len(p.Search) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(p.Search, " "))
	}
	for _, d := range p.DNS {
		fmt.Fprintf(&b, "nameserver %s\n", d)
	}
	return b.String()
}

// Hosts renders /etc/hosts naming this node at its addresses.
func Hosts(name string, domain string, ips []net.IP) string {
	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost\n")
	names := name
	if domain != "" {
		names = name + "." + domain + "\t" + name
	}
	for _, ip := range ips {
		fmt.Fprintf(&b, "%s\t%s\n", ip, names)
	}
	return b.String()
}

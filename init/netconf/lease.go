package netconf

import (
	"net"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/vishvananda/netlink"
)

// LeasePlan turns a DHCP ACK into a Plan: the address with its mask, a
// default route through the first router, DNS servers and search domains.
// Classless static routes (option 121, RFC 3442) come first: clouds use
// them for the metadata service's /32 (169.254.169.254 through the
// gateway, or on the link), and, as the RFC says, a server that sends
// them means them instead of its routers (option 3), which are then
// ignored.
func LeasePlan(link string, ack *dhcpv4.DHCPv4) Plan {
	mask := ack.SubnetMask()
	if mask == nil {
		mask = ack.YourIPAddr.DefaultMask()
	}
	p := Plan{Link: link, DNS: ack.DNS(), Hostname: ack.HostName()}
	p.Addrs = []netlink.Addr{{IPNet: &net.IPNet{IP: ack.YourIPAddr.To4(), Mask: mask}}}
	if lt := ack.IPAddressLeaseTime(0); lt > 0 {
		p.Lease = uint32(lt / time.Second)
		p.Addrs[0].ValidLft = int(p.Lease)
		p.Addrs[0].PreferedLft = int(p.Lease)
	}
	if cs := ack.ClasslessStaticRoute(); len(cs) > 0 {
		for _, r := range cs {
			p.Routes = append(p.Routes, staticRoute(r))
		}
	} else if rs := ack.Router(); len(rs) > 0 {
		p.Routes = append(p.Routes, defaultRoute(rs[0]))
	}
	if ds := ack.DomainSearch(); ds != nil {
		p.Search = ds.Labels
	} else if dn := ack.DomainName(); dn != "" {
		p.Search = []string{dn}
	}
	if m := ack.GetOneOption(dhcpv4.OptionInterfaceMTU); len(m) == 2 {
		p.MTU = int(m[0])<<8 | int(m[1])
	}
	return p
}

// staticRoute is one route of option 121: through its router, or on the
// link when the router is 0.0.0.0.
func staticRoute(r *dhcpv4.Route) netlink.Route {
	if r.Router == nil || r.Router.IsUnspecified() {
		return netlink.Route{Dst: r.Dest, Scope: scopeLink}
	}
	return netlink.Route{Dst: r.Dest, Gw: r.Router}
}

// scopeLink is RT_SCOPE_LINK, which netlink names on Linux only.
const scopeLink netlink.Scope = 253

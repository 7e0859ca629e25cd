package netconf

import (
	"net"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/vishvananda/netlink"
)

// LeasePlan turns a DHCP ACK into a Plan: the address with its mask, a
// default route through the first router, DNS servers and search domains.
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
	if rs := ack.Router(); len(rs) > 0 {
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

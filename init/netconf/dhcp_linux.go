package netconf

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/vishvananda/netlink"
)

// DHCP leases an IPv4 address for link and returns the plan it gives, with
// the lease so that Renew can extend it. The link must be up.
func DHCP(ctx context.Context, link, hostname string) (Plan, *nclient4.Lease, error) {
	c, err := nclient4.New(link, nclient4.WithTimeout(2*time.Second), nclient4.WithRetry(3))
	if err != nil {
		return Plan{}, nil, fmt.Errorf("dhcp on %s: %w", link, err)
	}
	defer c.Close()
	var mods []dhcpv4.Modifier
	if hostname != "" {
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptHostName(hostname)))
	}
	mods = append(mods, dhcpv4.WithRequestedOptions(dhcpv4.OptionDomainName, dhcpv4.OptionDNSDomainSearchList))
	lease, err := c.Request(ctx, mods...)
	if err != nil {
		return Plan{}, nil, fmt.Errorf("dhcp on %s: %w", link, err)
	}
	return LeasePlan(link, lease.ACK), lease, nil
}

// Renew extends a lease on link, returning the renewed plan.
func Renew(ctx context.Context, link string, lease *nclient4.Lease) (Plan, *nclient4.Lease, error) {
	c, err := nclient4.New(link, nclient4.WithTimeout(2*time.Second), nclient4.WithRetry(3))
	if err != nil {
		return Plan{}, nil, fmt.Errorf("dhcp renew on %s: %w", link, err)
	}
	defer c.Close()
	nl, err := c.Renew(ctx, lease)
	if err != nil {
		return Plan{}, nil, fmt.Errorf("dhcp renew on %s: %w", link, err)
	}
	return LeasePlan(link, nl.ACK), nl, nil
}

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

package netconf

import (
	"context"
	"fmt"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
)

// A Lease is a DHCP lease, which Renew extends.
type Lease struct{ l *nclient4.Lease }

// DHCP leases an IPv4 address for link and returns the plan it gives, with
// the lease so that Renew can extend it. The link must be up.
func DHCP(ctx context.Context, link, hostname string) (Plan, *Lease, error) {
	c, err := nclient4.New(link, nclient4.WithTimeout(2*time.Second), nclient4.WithRetry(3))
	if err != nil {
		return Plan{}, nil, fmt.Errorf("dhcp on %s: %w", link, err)
	}
	defer c.Close()
	var mods []dhcpv4.Modifier
	if hostname != "" {
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptHostName(hostname)))
	}
	mods = append(mods, dhcpv4.WithRequestedOptions(dhcpv4.OptionDomainName, dhcpv4.OptionDNSDomainSearchList, dhcpv4.OptionClasslessStaticRoute))
	lease, err := c.Request(ctx, mods...)
	if err != nil {
		return Plan{}, nil, fmt.Errorf("dhcp on %s: %w", link, err)
	}
	return LeasePlan(link, lease.ACK), &Lease{lease}, nil
}

// Renew extends a lease on link, returning the renewed plan.
func Renew(ctx context.Context, link string, lease *Lease) (Plan, *Lease, error) {
	c, err := nclient4.New(link, nclient4.WithTimeout(2*time.Second), nclient4.WithRetry(3))
	if err != nil {
		return Plan{}, nil, fmt.Errorf("dhcp renew on %s: %w", link, err)
	}
	defer c.Close()
	nl, err := c.Renew(ctx, lease.l)
	if err != nil {
		return Plan{}, nil, fmt.Errorf("dhcp renew on %s: %w", link, err)
	}
	return LeasePlan(link, nl.ACK), &Lease{nl}, nil
}

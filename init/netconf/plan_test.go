package netconf

import (
	"net"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStaticPlan(t *testing.T) {
	tests := []struct {
		name      string
		in        Interface
		dns       []string
		addrs     []string
		gw        string
		wantErrIn []string // each must appear in the error
	}{
		{
			name:  "address and gateway",
			in:    Interface{Addresses: []string{"10.0.0.11/24"}, Gateway: "10.0.0.1"},
			dns:   []string{"10.0.0.1"},
			addrs: []string{"10.0.0.11/24"},
			gw:    "10.0.0.1",
		},
		{
			name:  "two addresses, v6 too, no gateway",
			in:    Interface{Addresses: []string{"10.0.0.11/24", "fd00::11/64"}},
			addrs: []string{"10.0.0.11/24", "fd00::11/64"},
		},
		{
			name:      "bad cidr and bad dns named",
			in:        Interface{Addresses: []string{"10.0.0.11/24", "10.0.0.300/24"}},
			dns:       []string{"nope"},
			wantErrIn: []string{`addresses[1]: invalid CIDR "10.0.0.300/24"`, `dns[0]: invalid address "nope"`},
		},
		{
			name:      "gateway off-link",
			in:        Interface{Addresses: []string{"10.0.0.11/24"}, Gateway: "10.9.0.1"},
			wantErrIn: []string{"gateway: 10.9.0.1 is on none"},
		},
		{
			name:      "no address",
			in:        Interface{},
			wantErrIn: []string{"addresses: a static interface needs at least one"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := StaticPlan("eth0", tt.in, tt.dns, []string{"example.internal"})
			if len(tt.wantErrIn) > 0 {
				require.Error(t, err)
				for _, w := range tt.wantErrIn {
					assert.Contains(t, err.Error(), w)
				}
				return
			}
			require.NoError(t, err)
			var got []string
			for _, a := range p.Addrs {
				got = append(got, a.IPNet.String())
			}
			assert.Equal(t, tt.addrs, got)
			if tt.gw == "" {
				assert.Empty(t, p.Routes)
			} else {
				require.Len(t, p.Routes, 1)
				assert.Equal(t, tt.gw, p.Routes[0].Gw.String())
				assert.Equal(t, "0.0.0.0/0", p.Routes[0].Dst.String())
			}
			assert.Len(t, p.DNS, len(tt.dns))
		})
	}
}

func TestLeasePlan(t *testing.T) {
	ack, err := dhcpv4.New(
		dhcpv4.WithYourIP(net.IPv4(10, 0, 2, 15)),
		dhcpv4.WithNetmask(net.CIDRMask(24, 32)),
		dhcpv4.WithRouter(net.IPv4(10, 0, 2, 2)),
		dhcpv4.WithDNS(net.IPv4(10, 0, 2, 3)),
		dhcpv4.WithLeaseTime(3600),
		dhcpv4.WithDomainSearchList("cluster.internal"),
		dhcpv4.WithOption(dhcpv4.OptHostName("n2")),
	)
	require.NoError(t, err)
	p := LeasePlan("eth0", ack)
	require.Len(t, p.Addrs, 1)
	assert.Equal(t, "10.0.2.15/24", p.Addrs[0].IPNet.String())
	assert.Equal(t, uint32(3600), p.Lease)
	assert.Equal(t, "n2", p.Hostname)
	require.Len(t, p.Routes, 1)
	assert.Equal(t, "10.0.2.2", p.Routes[0].Gw.String())
	assert.Equal(t, "search cluster.internal\nnameserver 10.0.2.3\n", p.ResolvConf())
	assert.Equal(t, []string{"10.0.2.15"}, []string{p.IPs()[0].String()})
}

// TestLeasePlanStaticRoutes: option 121's routes, through a router or on
// the link, replace the routers of option 3.
func TestLeasePlanStaticRoutes(t *testing.T) {
	meta := &net.IPNet{IP: net.IPv4(169, 254, 169, 254).To4(), Mask: net.CIDRMask(32, 32)}
	link := &net.IPNet{IP: net.IPv4(10, 0, 3, 0).To4(), Mask: net.CIDRMask(24, 32)}
	ack, err := dhcpv4.New(
		dhcpv4.WithYourIP(net.IPv4(10, 0, 2, 15)),
		dhcpv4.WithNetmask(net.CIDRMask(24, 32)),
		dhcpv4.WithRouter(net.IPv4(10, 0, 2, 2)),
		dhcpv4.WithOption(dhcpv4.OptClasslessStaticRoute(
			&dhcpv4.Route{Dest: meta, Router: net.IPv4(10, 0, 2, 1)},
			&dhcpv4.Route{Dest: link, Router: net.IPv4zero},
		)),
	)
	require.NoError(t, err)
	p := LeasePlan("eth0", ack)
	require.Len(t, p.Routes, 2, "the router of option 3 is ignored when option 121 is there")
	assert.Equal(t, "169.254.169.254/32", p.Routes[0].Dst.String())
	assert.Equal(t, "10.0.2.1", p.Routes[0].Gw.String())
	assert.Equal(t, "10.0.3.0/24", p.Routes[1].Dst.String())
	assert.Nil(t, p.Routes[1].Gw)
	assert.Equal(t, scopeLink, p.Routes[1].Scope)
}

func TestHosts(t *testing.T) {
	got := Hosts("n1", "cluster.internal", []net.IP{net.IPv4(10, 0, 0, 11)})
	assert.Equal(t, "127.0.0.1\tlocalhost\n::1\tlocalhost\n10.0.0.11\tn1.cluster.internal\tn1\n", got)
}

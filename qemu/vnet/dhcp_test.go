package vnet

import (
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDHCPReply(t *testing.T) {
	var z atomic.Pointer[zone]
	z.Store(buildZone("demo.internal", "", []Host{{Name: "n1", MAC: mac1, IP: ip1}}, nil, 1))
	s := &dhcpServer{zone: &z, gateway: gw, prefix: netip.MustParsePrefix("10.88.0.0/24"), leaseTime: time.Hour, logf: t.Logf}
	stranger := net.HardwareAddr{0x52, 0x54, 0, 9, 9, 9}

	msg := func(hw net.HardwareAddr, typ dhcpv4.MessageType, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
		m, err := dhcpv4.New(append([]dhcpv4.Modifier{dhcpv4.WithHwAddr(hw), dhcpv4.WithMessageType(typ)}, mods...)...)
		require.NoError(t, err)
		return m
	}
	requested := func(ip string) dhcpv4.Modifier {
		return dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP(ip)))
	}
	tests := []struct {
		name string
		req  *dhcpv4.DHCPv4
		want dhcpv4.MessageType // MessageTypeNone: no reply
	}{
		{"discover", msg(mac1, dhcpv4.MessageTypeDiscover), dhcpv4.MessageTypeOffer},
		{"discover from a stranger", msg(stranger, dhcpv4.MessageTypeDiscover), dhcpv4.MessageTypeNone},
		{"request", msg(mac1, dhcpv4.MessageTypeRequest, requested("10.88.0.11"), dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.ParseIP("10.88.0.1")))), dhcpv4.MessageTypeAck},
		{"renew", msg(mac1, dhcpv4.MessageTypeRequest, dhcpv4.WithClientIP(net.ParseIP("10.88.0.11"))), dhcpv4.MessageTypeAck},
		{"request for another address", msg(mac1, dhcpv4.MessageTypeRequest, requested("10.88.0.99")), dhcpv4.MessageTypeNak},
		{"request from a stranger", msg(stranger, dhcpv4.MessageTypeRequest, requested("10.88.0.11")), dhcpv4.MessageTypeNak},
		{"request to another server", msg(mac1, dhcpv4.MessageTypeRequest, requested("10.88.0.11"), dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.ParseIP("10.88.0.254")))), dhcpv4.MessageTypeNone},
		{"release", msg(mac1, dhcpv4.MessageTypeRelease), dhcpv4.MessageTypeNone},
		{"decline", msg(mac1, dhcpv4.MessageTypeDecline), dhcpv4.MessageTypeNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.reply(tt.req)
			if tt.want == dhcpv4.MessageTypeNone {
				assert.Nil(t, r, "reply(%s)", tt.req.MessageType())
				return
			}
			require.NotNil(t, r, "reply(%s) = none, want %s", tt.req.MessageType(), tt.want)
			assert.Equal(t, tt.want, r.MessageType())
			assert.Equal(t, tt.req.TransactionID, r.TransactionID)
			assert.Equal(t, "10.88.0.1", r.ServerIdentifier().String())
			if tt.want == dhcpv4.MessageTypeNak {
				assert.True(t, r.YourIPAddr.IsUnspecified(), "a nak with an address")
				return
			}
			assert.Equal(t, "10.88.0.11", r.YourIPAddr.String())
			assert.Equal(t, "n1", r.HostName())
			assert.Equal(t, "10.88.0.255", net.IP(r.GetOneOption(dhcpv4.OptionBroadcastAddress)).String())
			assert.Equal(t, 30*time.Minute, r.IPAddressRenewalTime(0))
			assert.False(t, r.Options.Has(dhcpv4.OptionRouter), "router option")
		})
	}
	st := s.stats()
	assert.Equal(t, DHCPStats{Offers: 1, Acks: 2, Naks: 2, Ignored: 4}, st)
}

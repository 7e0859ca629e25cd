package vnet

import (
	"errors"
	"fmt"
	"net/netip"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/link/ethernet"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// nicID is the gateway stack's only NIC.
const nicID tcpip.NICID = 1

// newStack builds the gateway's gVisor stack: one NIC on link with the
// gateway's address, a route to the subnet and nothing else.
//
// What makes the network closed, compared with gvisor-tap-vsock's
// virtualnetwork.New (which this deliberately does not use):
//   - no transport protocol handlers (SetTransportProtocolHandler): a
//     guest's TCP or UDP to any address other than the gateway's own
//     listeners is not forwarded to the host; there is no NAT;
//   - no promiscuous mode and no spoofing: the stack takes only packets
//     for its own address, and sends only from it;
//   - forwarding stays off and the only route is the subnet: packets for
//     other addresses are dropped (counted in Stats.Gateway);
//   - the DNS server has no upstream (see dnsServer).
func newStack(link stack.LinkEndpoint, gateway netip.Addr, prefix netip.Prefix) (*stack.Stack, error) {
	s := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, arp.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol},
	})
	if err := s.CreateNIC(nicID, ethernet.New(link)); err != nil {
		s.Destroy()
		return nil, fmt.Errorf("create gateway nic: %s", err)
	}
	addr := tcpip.ProtocolAddress{
		Protocol:          ipv4.ProtocolNumber,
		AddressWithPrefix: tcpip.AddressWithPrefix{Address: tcpAddr(gateway), PrefixLen: prefix.Bits()},
	}
	if err := s.AddProtocolAddress(nicID, addr, stack.AddressProperties{}); err != nil {
		s.Destroy()
		return nil, fmt.Errorf("add gateway address %s: %s", gateway, err)
	}
	subnet, err := tcpip.NewSubnet(tcpAddr(prefix.Addr()), tcpip.MaskFromBytes(maskOf(prefix)))
	if err != nil {
		s.Destroy()
		return nil, fmt.Errorf("subnet %s: %w", prefix, err)
	}
	s.SetRouteTable([]tcpip.Route{{Destination: subnet, NIC: nicID}})
	return s, nil
}

func tcpAddr(a netip.Addr) tcpip.Address { return tcpip.AddrFrom4(a.As4()) }

func fullAddr(a netip.Addr, port uint16) tcpip.FullAddress {
	return tcpip.FullAddress{NIC: nicID, Addr: tcpAddr(a), Port: port}
}

// listenUDP binds a UDP socket on the gateway stack. With broadcast set
// it also takes packets to 255.255.255.255 and may send them (DHCP).
func listenUDP(s *stack.Stack, addr tcpip.FullAddress, broadcast bool) (*gonet.UDPConn, error) {
	var wq waiter.Queue
	ep, terr := s.NewEndpoint(udp.ProtocolNumber, ipv4.ProtocolNumber, &wq)
	if terr != nil {
		return nil, errors.New(terr.String())
	}
	ep.SocketOptions().SetBroadcast(broadcast)
	if terr := ep.Bind(addr); terr != nil {
		ep.Close()
		return nil, fmt.Errorf("bind udp %s:%d: %s", addr.Addr, addr.Port, terr)
	}
	return gonet.NewUDPConn(&wq, ep), nil
}

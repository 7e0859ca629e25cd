package vnet

import (
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
	"github.com/insomniacslk/dhcp/rfc1035label"
)

// DHCPStats counts the DHCP server's replies.
type DHCPStats struct {
	Offers uint64 `json:"offers"`
	Acks   uint64 `json:"acks"`
	Naks   uint64 `json:"naks"`
	// Ignored counts requests with no reply: from MACs with no lease,
	// releases, declines, malformed packets.
	Ignored uint64 `json:"ignored"`
}

// dhcpServer hands out static leases: a known MAC gets its host's
// address; an unknown one gets nothing (there is no dynamic pool).
type dhcpServer struct {
	zone      *atomic.Pointer[zone]
	gateway   netip.Addr
	prefix    netip.Prefix
	leaseTime time.Duration
	logf      func(string, ...any)
	// moved is told when a host takes the lease of its Next address.
	moved func(h Host)
	// routes are the classless static routes (option 121) of every
	// lease; nil for none (ServeMetadata sets them).
	routes                      atomic.Pointer[[]staticRoute]
	offers, acks, naks, ignored atomic.Uint64
}

func (s *dhcpServer) stats() DHCPStats {
	return DHCPStats{Offers: s.offers.Load(), Acks: s.acks.Load(), Naks: s.naks.Load(), Ignored: s.ignored.Load()}
}

// serve answers DHCP requests on conn (UDP port 67 on the gateway, with
// broadcast allowed) until it is closed.
func (s *dhcpServer) serve(conn net.PacketConn) {
	buf := make([]byte, 4096)
	for {
		n, _, err := conn.ReadFrom(buf)
		if err != nil {
			return
		}
		req, err := dhcpv4.FromBytes(buf[:n])
		if err != nil {
			s.ignored.Add(1)
			continue
		}
		reply := s.reply(req)
		if reply == nil {
			continue
		}
		// A client without an address cannot take unicast (its ARP
		// would not answer yet): broadcast, as RFC 2131 4.1 allows. A
		// renewing client has its address and gets unicast.
		dst := &net.UDPAddr{IP: net.IPv4bcast, Port: dhcpv4.ClientPort}
		if !req.ClientIPAddr.IsUnspecified() && reply.MessageType() == dhcpv4.MessageTypeAck {
			dst.IP = req.ClientIPAddr
		}
		if _, err := conn.WriteTo(reply.ToBytes(), dst); err != nil {
			s.logf("dhcp: reply to %s: %v", req.ClientHWAddr, err)
		}
	}
}

// reply returns the answer to req, or nil for none.
func (s *dhcpServer) reply(req *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
	if req.OpCode != dhcpv4.OpcodeBootRequest || req.HWType != iana.HWTypeEthernet || len(req.ClientHWAddr) != 6 {
		s.ignored.Add(1)
		return nil
	}
	z := s.zone.Load()
	h, known := z.leases[req.ClientHWAddr.String()]
	switch req.MessageType() {
	case dhcpv4.MessageTypeDiscover:
		if !known {
			s.ignored.Add(1)
			s.logf("dhcp: no lease for %s (discover)", req.ClientHWAddr)
			return nil
		}
		s.offers.Add(1)
		return s.lease(req, h, offered(h), dhcpv4.MessageTypeOffer)
	case dhcpv4.MessageTypeRequest:
		if sid := req.ServerIdentifier(); sid != nil && !sid.Equal(s.gateway.AsSlice()) {
			s.ignored.Add(1) // the client chose another server
			return nil
		}
		want := req.RequestedIPAddress()
		renewing := want == nil || want.IsUnspecified()
		if renewing {
			want = req.ClientIPAddr // renewing or rebinding
		}
		ip, ok := netip.AddrFromSlice(want.To4())
		switch {
		case !known:
			ok = false
		case h.Next.IsValid() && ip == h.Next:
			// The guest takes its new address: from now on it is the
			// host's address.
			s.acks.Add(1)
			s.logf("dhcp: lease %s to %s (%s), renumbered from %s", h.Next, h.Name, h.MAC, h.IP)
			if s.moved != nil {
				s.moved(h)
			}
			return s.lease(req, h, h.Next, dhcpv4.MessageTypeAck)
		case h.Next.IsValid() && !renewing:
			// A booting guest asks for its old address: it must move.
			ok = false
		default:
			ok = ok && ip == h.IP
		}
		if !ok {
			s.naks.Add(1)
			s.logf("dhcp: nak %s for %s", want, req.ClientHWAddr)
			return s.nak(req)
		}
		s.acks.Add(1)
		s.logf("dhcp: lease %s to %s (%s)", h.IP, h.Name, h.MAC)
		return s.lease(req, h, h.IP, dhcpv4.MessageTypeAck)
	default: // release, decline, inform: nothing to do with static leases
		s.ignored.Add(1)
		return nil
	}
}

// lease is an offer or ack for h: address, mask, the gateway as DNS
// server, the domain as domain name and search list, the host's name.
// There is no router option: nothing is reachable beyond the subnet; with
// a metadata service (ServeMetadata), a static route to its /32 alone.
func (s *dhcpServer) lease(req *dhcpv4.DHCPv4, h Host, ip netip.Addr, typ dhcpv4.MessageType) *dhcpv4.DHCPv4 {
	domain := s.zone.Load().domain
	domain = domain[:len(domain)-1]
	gw := net.IP(s.gateway.AsSlice())
	r, err := dhcpv4.NewReplyFromRequest(req,
		dhcpv4.WithMessageType(typ),
		dhcpv4.WithYourIP(ip.AsSlice()),
		dhcpv4.WithServerIP(gw),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(gw)),
		dhcpv4.WithOption(dhcpv4.OptSubnetMask(maskOf(s.prefix))),
		dhcpv4.WithOption(dhcpv4.OptBroadcastAddress(broadcastOf(s.prefix).AsSlice())),
		dhcpv4.WithOption(dhcpv4.OptIPAddressLeaseTime(s.leaseTime)),
		dhcpv4.WithOption(dhcpv4.OptRenewTimeValue(s.leaseTime/2)),
		dhcpv4.WithOption(dhcpv4.OptRebindingTimeValue(s.leaseTime*7/8)),
		dhcpv4.WithOption(dhcpv4.OptDNS(gw)),
		dhcpv4.WithOption(dhcpv4.OptDomainName(domain)),
		dhcpv4.WithOption(dhcpv4.OptDomainSearch(&rfc1035label.Labels{Labels: []string{domain}})),
		dhcpv4.WithOption(dhcpv4.OptHostName(h.Name)),
	)
	if err != nil { // only for a request without transaction state; not reached
		s.logf("dhcp: reply to %s: %v", req.ClientHWAddr, err)
		return nil
	}
	if rs := s.routes.Load(); rs != nil {
		var opt []*dhcpv4.Route
		for _, rt := range *rs {
			opt = append(opt, &dhcpv4.Route{
				Dest:   &net.IPNet{IP: rt.dst.Addr().AsSlice(), Mask: net.CIDRMask(rt.dst.Bits(), 32)},
				Router: rt.via.AsSlice(),
			})
		}
		r.UpdateOption(dhcpv4.OptClasslessStaticRoute(opt...))
	}
	return r
}

// offered is the address a booting h is offered: Next when it is set.
func offered(h Host) netip.Addr {
	if h.Next.IsValid() {
		return h.Next
	}
	return h.IP
}

func (s *dhcpServer) nak(req *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
	r, err := dhcpv4.NewReplyFromRequest(req,
		dhcpv4.WithMessageType(dhcpv4.MessageTypeNak),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(s.gateway.AsSlice())),
	)
	if err != nil {
		return nil
	}
	return r
}

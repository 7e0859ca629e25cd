package vnet

import (
	"bufio"
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/ethernet"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
)

// guest is a fake VM: a connection to the switch socket that speaks
// QEMU's stream framing, with a gVisor stack of its own on it (its
// "kernel"), and raw access to the DHCP frames it receives.
type guest struct {
	t     *testing.T
	mac   mac
	conn  net.Conn
	stack *stack.Stack
	dhcp  chan *dhcpv4.DHCPv4 // DHCP messages to port 68

	wmu sync.Mutex
	w   *bufio.Writer
}

// newGuest connects a guest with address m to a switch socket.
func newGuest(t *testing.T, sock string, m net.HardwareAddr) *guest {
	t.Helper()
	conn, err := net.Dial("unix", sock)
	require.NoError(t, err)
	return newGuestOn(t, conn, m)
}

// newGuestOn runs a guest with address m on conn, a switch port.
func newGuestOn(t *testing.T, conn net.Conn, m net.HardwareAddr) *guest {
	t.Helper()
	g := &guest{t: t, mac: toMAC(m), conn: conn, w: bufio.NewWriter(conn), dhcp: make(chan *dhcpv4.DHCPv4, 16)}
	link := &frameLink{addr: tcpip.LinkAddress(m), send: g.send}
	g.stack = stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, arp.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol},
	})
	require.Nil(t, g.stack.CreateNIC(1, ethernet.New(link)))
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := bufio.NewReader(conn)
		for {
			f, err := readFrame(r)
			if err != nil {
				return
			}
			g.sniff(f)
			link.deliver(f)
		}
	}()
	t.Cleanup(func() {
		conn.Close()
		<-done
		g.stack.Close()
		g.stack.Wait()
	})
	return g
}

// send writes one frame to the switch.
func (g *guest) send(f []byte) {
	g.wmu.Lock()
	defer g.wmu.Unlock()
	if writeFrame(g.w, f) == nil {
		g.w.Flush()
	}
}

// sniff passes DHCP replies (UDP to port 68) to g.dhcp.
func (g *guest) sniff(f []byte) {
	eth := header.Ethernet(f)
	if len(f) < header.EthernetMinimumSize+header.IPv4MinimumSize+header.UDPMinimumSize || eth.Type() != header.IPv4ProtocolNumber {
		return
	}
	ip := header.IPv4(f[header.EthernetMinimumSize:])
	if !ip.IsValid(len(ip)) || ip.TransportProtocol() != header.UDPProtocolNumber {
		return
	}
	u := header.UDP(ip.Payload())
	if u.DestinationPort() != dhcpv4.ClientPort {
		return
	}
	if m, err := dhcpv4.FromBytes(u.Payload()); err == nil {
		g.dhcp <- m
	}
}

// sendUDP sends one raw UDP datagram, as a DHCP client without an
// address does. The UDP checksum is 0 ("none"), which IPv4 allows.
func (g *guest) sendUDP(dstMAC mac, src, dst netip.AddrPort, payload []byte) {
	ipLen := header.IPv4MinimumSize + header.UDPMinimumSize + len(payload)
	f := make([]byte, header.EthernetMinimumSize+ipLen)
	header.Ethernet(f).Encode(&header.EthernetFields{SrcAddr: tcpip.LinkAddress(g.mac[:]), DstAddr: tcpip.LinkAddress(dstMAC[:]), Type: header.IPv4ProtocolNumber})
	ip := header.IPv4(f[header.EthernetMinimumSize:])
	ip.Encode(&header.IPv4Fields{
		TotalLength: uint16(ipLen), TTL: 64, Protocol: uint8(header.UDPProtocolNumber),
		SrcAddr: tcpAddr(src.Addr()), DstAddr: tcpAddr(dst.Addr()),
	})
	ip.SetChecksum(^ip.CalculateChecksum())
	u := header.UDP(ip.Payload())
	u.Encode(&header.UDPFields{SrcPort: src.Port(), DstPort: dst.Port(), Length: uint16(header.UDPMinimumSize + len(payload))})
	copy(u.Payload(), payload)
	g.send(f)
}

var broadcastMAC = mac{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// dhcpSend broadcasts a DHCP message from 0.0.0.0:68.
func (g *guest) dhcpSend(m *dhcpv4.DHCPv4) {
	g.sendUDP(broadcastMAC, netip.AddrPortFrom(netip.IPv4Unspecified(), 68), netip.MustParseAddrPort("255.255.255.255:67"), m.ToBytes())
}

// dhcpAwait waits for the DHCP reply to transaction xid.
func (g *guest) dhcpAwait(ctx context.Context, xid dhcpv4.TransactionID) *dhcpv4.DHCPv4 {
	g.t.Helper()
	for {
		select {
		case m := <-g.dhcp:
			if m.TransactionID == xid {
				return m
			}
		case <-ctx.Done():
			g.t.Fatalf("no DHCP reply to %s: %v", xid, ctx.Err())
		}
	}
}

// lease runs DISCOVER, OFFER, REQUEST, ACK and returns offer and ack.
func (g *guest) lease(ctx context.Context) (offer, ack *dhcpv4.DHCPv4) {
	g.t.Helper()
	disc, err := dhcpv4.NewDiscovery(net.HardwareAddr(g.mac[:]),
		dhcpv4.WithRequestedOptions(dhcpv4.OptionDomainName, dhcpv4.OptionDNSDomainSearchList, dhcpv4.OptionHostName))
	require.NoError(g.t, err)
	g.dhcpSend(disc)
	offer = g.dhcpAwait(ctx, disc.TransactionID)
	require.Equal(g.t, dhcpv4.MessageTypeOffer, offer.MessageType(), "reply to discover: %s", offer.Summary())
	req, err := dhcpv4.NewRequestFromOffer(offer)
	require.NoError(g.t, err)
	g.dhcpSend(req)
	ack = g.dhcpAwait(ctx, req.TransactionID)
	return offer, ack
}

// configure gives the guest's stack an address on the subnet and, with
// a router, a default route through it (to test that nothing is routed).
func (g *guest) configure(p netip.Prefix, router netip.Addr) {
	g.t.Helper()
	require.Nil(g.t, g.stack.AddProtocolAddress(1, tcpip.ProtocolAddress{
		Protocol:          ipv4.ProtocolNumber,
		AddressWithPrefix: tcpip.AddressWithPrefix{Address: tcpAddr(p.Addr()), PrefixLen: p.Bits()},
	}, stack.AddressProperties{}))
	subnet, err := tcpip.NewSubnet(tcpAddr(p.Masked().Addr()), tcpip.MaskFromBytes(maskOf(p)))
	require.NoError(g.t, err)
	routes := []tcpip.Route{{Destination: subnet, NIC: 1}}
	if router.IsValid() {
		routes = append(routes, tcpip.Route{Destination: header.IPv4EmptySubnet, Gateway: tcpAddr(router), NIC: 1})
	}
	g.stack.SetRouteTable(routes)
}

// dial opens a TCP connection from the guest.
func (g *guest) dial(ctx context.Context, to netip.AddrPort) (net.Conn, error) {
	return gonet.DialContextTCP(ctx, g.stack, tcpip.FullAddress{NIC: 1, Addr: tcpAddr(to.Addr()), Port: to.Port()}, ipv4.ProtocolNumber)
}

// listen listens on a TCP port of the guest's address.
func (g *guest) listen(port uint16) net.Listener {
	g.t.Helper()
	ln, err := gonet.ListenTCP(g.stack, tcpip.FullAddress{NIC: 1, Port: port}, ipv4.ProtocolNumber)
	require.NoError(g.t, err)
	g.t.Cleanup(func() { ln.Close() })
	return ln
}

// query asks server a DNS question over proto ("udp" or "tcp") from the
// guest's stack.
func (g *guest) query(ctx context.Context, proto string, server netip.Addr, name string, qtype uint16) (*dns.Msg, error) {
	var c net.Conn
	var err error
	to := tcpip.FullAddress{NIC: 1, Addr: tcpAddr(server), Port: 53}
	if proto == "tcp" {
		c, err = gonet.DialContextTCP(ctx, g.stack, to, ipv4.ProtocolNumber)
	} else {
		c, err = gonet.DialUDP(g.stack, nil, &to, ipv4.ProtocolNumber)
	}
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if d, ok := ctx.Deadline(); ok {
		c.SetDeadline(d)
	}
	co := &dns.Conn{Conn: c}
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	if err := co.WriteMsg(m); err != nil {
		return nil, err
	}
	return co.ReadMsg()
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

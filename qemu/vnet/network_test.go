package vnet

import (
	"bufio"
	"io"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	mac1 = net.HardwareAddr{0x52, 0x54, 0x00, 0, 0, 1}
	mac2 = net.HardwareAddr{0x52, 0x54, 0x00, 0, 0, 2}
	mac3 = net.HardwareAddr{0x52, 0x54, 0x00, 0, 0, 3}
	ip1  = netip.MustParseAddr("10.88.0.11")
	ip2  = netip.MustParseAddr("10.88.0.12")
	ip3  = netip.MustParseAddr("10.88.0.13")
	gw   = netip.MustParseAddr("10.88.0.1")
)

// testNetwork starts a network on a socket in a temporary directory
// with hosts n1 and n2 in domain demo.internal.
func testNetwork(t *testing.T) *Network {
	t.Helper()
	n, err := New(Config{
		Dir:    t.TempDir(),
		Domain: "demo.internal",
		Hosts:  []Host{{Name: "n1", MAC: mac1, IP: ip1}, {Name: "n2", MAC: mac2, IP: ip2}},
		Logf:   t.Logf,
	})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, n.Close()) })
	return n
}

// leased connects a guest with mac, leases its address over DHCP and
// configures its stack with it.
func leased(t *testing.T, n *Network, m net.HardwareAddr) *guest {
	t.Helper()
	g := newGuest(t, SwitchSocket(n.Dir()), m)
	_, ack := g.lease(ctxT(t, 10*time.Second))
	require.Equal(t, dhcpv4.MessageTypeAck, ack.MessageType(), ack.Summary())
	ip, _ := netip.AddrFromSlice(ack.YourIPAddr.To4())
	ones, _ := ack.SubnetMask().Size()
	g.configure(netip.PrefixFrom(ip, ones), netip.Addr{})
	return g
}

func TestDHCPLeaseOverSwitch(t *testing.T) {
	n := testNetwork(t)
	g := newGuest(t, SwitchSocket(n.Dir()), mac2)
	offer, ack := g.lease(ctxT(t, 10*time.Second))

	for _, m := range []*dhcpv4.DHCPv4{offer, ack} {
		name := m.MessageType().String()
		assert.Equal(t, "10.88.0.12", m.YourIPAddr.String(), name)
		assert.Equal(t, "255.255.255.0", net.IP(m.SubnetMask()).String(), name)
		assert.Equal(t, "10.88.0.1", m.ServerIdentifier().String(), name)
		assert.Equal(t, []net.IP{net.IPv4(10, 88, 0, 1).To4()}, m.DNS(), name)
		assert.Equal(t, "demo.internal", m.DomainName(), name)
		require.NotNil(t, m.DomainSearch(), name)
		assert.Equal(t, []string{"demo.internal"}, m.DomainSearch().Labels, name)
		assert.Equal(t, "n2", m.HostName(), name)
		assert.Equal(t, time.Hour, m.IPAddressLeaseTime(0), name)
		assert.Nil(t, m.Router(), "%s: a router option, but nothing is routed", name)
		assert.False(t, m.Options.Has(dhcpv4.OptionRouter), name)
	}
	assert.Equal(t, dhcpv4.MessageTypeAck, ack.MessageType())
	st := n.Stats()
	assert.Equal(t, uint64(1), st.DHCP.Offers)
	assert.Equal(t, uint64(1), st.DHCP.Acks)
	assert.Equal(t, 1, st.Switch.Ports)

	// A renewal goes by unicast, from the leased address to the server's,
	// and so does its answer.
	renew := func() *dhcpv4.DHCPv4 {
		req, err := dhcpv4.NewRenewFromAck(ack)
		require.NoError(t, err)
		g.sendUDP(gatewayMAC, netip.AddrPortFrom(ip2, 68), netip.AddrPortFrom(gw, 67), req.ToBytes())
		return g.dhcpAwait(ctxT(t, 10*time.Second), req.TransactionID)
	}
	r := renew()
	assert.Equal(t, dhcpv4.MessageTypeAck, r.MessageType(), r.Summary())
	assert.Equal(t, "10.88.0.12", r.YourIPAddr.String())
	// A removed host's renewal is refused: it loses its address.
	require.NoError(t, n.RemoveHost("n2"))
	assert.Equal(t, dhcpv4.MessageTypeNak, renew().MessageType())

	// A MAC with no host gets no lease: the server stays silent.
	stranger := newGuest(t, SwitchSocket(n.Dir()), net.HardwareAddr{0x52, 0x54, 0x00, 9, 9, 9})
	disc, err := dhcpv4.NewDiscovery(net.HardwareAddr(stranger.mac[:]))
	require.NoError(t, err)
	stranger.dhcpSend(disc)
	require.Eventually(t, func() bool { return n.Stats().DHCP.Ignored == 1 }, 10*time.Second, 10*time.Millisecond)
	assert.Empty(t, stranger.dhcp, "a stranger got a DHCP reply")
	assert.Equal(t, uint64(1), n.Stats().DHCP.Offers)
	assert.Equal(t, uint64(2), n.Stats().DHCP.Acks)
}

// TestAttach runs a network without a socket directory: the caller
// attaches VMs itself.
func TestAttach(t *testing.T) {
	n, err := New(Config{Hosts: []Host{{Name: "n1", MAC: mac1, IP: ip1}}})
	require.NoError(t, err)
	vm, port := net.Pipe()
	attached := make(chan error, 1)
	go func() { attached <- n.Attach(port) }()
	g := newGuestOn(t, vm, mac1)
	_, ack := g.lease(ctxT(t, 10*time.Second))
	assert.Equal(t, "10.88.0.11", ack.YourIPAddr.String())
	assert.Equal(t, "n1", ack.HostName())
	assert.Equal(t, DefaultDomain, ack.DomainName())

	require.NoError(t, n.Close())
	assert.NoError(t, <-attached, "the port ends with the network")
	assert.ErrorIs(t, n.Attach(port), ErrClosed)
	assert.ErrorIs(t, n.AddHost(Host{Name: "n2", MAC: mac2, IP: ip2}), ErrClosed)
}

func TestDNSFromGuest(t *testing.T) {
	n := testNetwork(t)
	g := leased(t, n, mac1)
	ctx := ctxT(t, 30*time.Second)

	for _, proto := range []string{"udp", "tcp"} {
		m, err := g.query(ctx, proto, gw, "n2.demo.internal.", dns.TypeA)
		require.NoError(t, err, proto)
		require.Equal(t, dns.RcodeSuccess, m.Rcode, proto)
		require.Len(t, m.Answer, 1, proto)
		assert.Equal(t, "10.88.0.12", m.Answer[0].(*dns.A).A.String(), proto)
		assert.True(t, m.Authoritative, proto)

		m, err = g.query(ctx, proto, gw, "_etcd-server-ssl._tcp.demo.internal.", dns.TypeSRV)
		require.NoError(t, err, proto)
		assert.Equal(t, []string{"n1.demo.internal.:2380", "n2.demo.internal.:2380"}, srvTargets(m), proto)
	}

	// Outside names are refused at once, never forwarded: not even the
	// host resolver's own localhost comes back.
	before := n.Stats().DNS.Refused
	for _, name := range []string{"example.com.", "localhost.", "demo.internal.example.com."} {
		start := time.Now()
		m, err := g.query(ctx, "udp", gw, name, dns.TypeA)
		require.NoError(t, err, name)
		assert.Equal(t, dns.RcodeRefused, m.Rcode, "%s: %s", name, dns.RcodeToString[m.Rcode])
		assert.Empty(t, m.Answer, name)
		assert.Less(t, time.Since(start), time.Second, "%s: refused slowly", name)
	}
	assert.Equal(t, before+3, n.Stats().DNS.Refused)

	// Hosts come and go at run time.
	require.NoError(t, n.AddHost(Host{Name: "n3", MAC: mac3, IP: ip3}))
	m, err := g.query(ctx, "udp", gw, "_etcd-client-ssl._tcp.demo.internal.", dns.TypeSRV)
	require.NoError(t, err)
	assert.Equal(t, []string{"n1.demo.internal.:2379", "n2.demo.internal.:2379", "n3.demo.internal.:2379"}, srvTargets(m))
	require.NoError(t, n.RemoveHost("n2"))
	m, err = g.query(ctx, "udp", gw, "n2.demo.internal.", dns.TypeA)
	require.NoError(t, err)
	assert.Equal(t, dns.RcodeNameError, m.Rcode)
	m, err = g.query(ctx, "udp", gw, "_etcd-server-ssl._tcp.demo.internal.", dns.TypeSRV)
	require.NoError(t, err)
	assert.Equal(t, []string{"n1.demo.internal.:2380", "n3.demo.internal.:2380"}, srvTargets(m))
}

// TestClosed shows that a guest that routes through the gateway reaches
// nothing: the gateway takes the packets and drops them.
func TestClosed(t *testing.T) {
	n := testNetwork(t)
	g := newGuest(t, SwitchSocket(n.Dir()), mac1)
	g.configure(netip.PrefixFrom(ip1, 24), gw) // a default route via the gateway, which DHCP never gives

	// Both wait one second for an answer that must not come; they run
	// side by side.
	ctx := ctxT(t, time.Second)
	dialed, queried := make(chan error, 1), make(chan error, 1)
	go func() {
		c, err := g.dial(ctx, netip.MustParseAddrPort("1.1.1.1:443"))
		if err == nil {
			c.Close()
		}
		dialed <- err
	}()
	go func() {
		_, err := g.query(ctx, "udp", netip.MustParseAddr("8.8.8.8"), "example.com.", dns.TypeA)
		queried <- err
	}()
	require.Eventually(t, func() bool { return n.Stats().Gateway.NotForUs >= 2 }, 10*time.Second, 10*time.Millisecond,
		"the packets to 1.1.1.1 and 8.8.8.8 never reached the gateway")
	assert.Error(t, <-dialed, "a guest connected outside the network")
	assert.Error(t, <-queried, "a DNS server outside the network answered")
	assert.Zero(t, n.Stats().DNS.Queries, "the gateway answered a query sent elsewhere")
}

func TestForward(t *testing.T) {
	n := testNetwork(t)
	g := leased(t, n, mac1)
	ln := g.listen(2379)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				// Echo until the host half-closes, then say goodbye: the
				// half-close must cross the forward.
				b, _ := io.ReadAll(c)
				c.Write([]byte("echo " + string(b) + " bye"))
			}()
		}
	}()

	host, err := n.Forward("127.0.0.1:0", netip.AddrPortFrom(ip1, 2379))
	require.NoError(t, err)
	require.True(t, host.Addr().IsLoopback())
	c, err := net.Dial("tcp", host.String())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte("hello"))
	require.NoError(t, err)
	require.NoError(t, c.(*net.TCPConn).CloseWrite())
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c)
	require.NoError(t, err)
	assert.Equal(t, "echo hello bye", string(got))
	assert.Equal(t, []Forward{{Host: host, Guest: netip.AddrPortFrom(ip1, 2379)}}, n.Forwards())

	// A guest port nothing listens on: the host's connection closes.
	closed, err := n.Forward("127.0.0.1:0", netip.AddrPortFrom(ip1, 9))
	require.NoError(t, err)
	c2, err := net.Dial("tcp", closed.String())
	require.NoError(t, err)
	defer c2.Close()
	c2.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = bufio.NewReader(c2).ReadByte()
	assert.Error(t, err)
	assert.Equal(t, uint64(1), n.Stats().Forward.Failed)

	require.NoError(t, n.RemoveForward(host))
	_, err = net.Dial("tcp", host.String())
	assert.Error(t, err, "a removed forward still listens")
	assert.ErrorIs(t, n.RemoveForward(host), ErrNoForward)

	for _, bad := range []struct{ host, guest string }{
		{"0.0.0.0:0", "10.88.0.11:2379"},    // not loopback
		{"127.0.0.1:0", "10.88.0.1:53"},     // the gateway itself
		{"127.0.0.1:0", "192.168.1.1:2379"}, // outside the network
		{"127.0.0.1:0", "10.88.0.11:0"},     // no port
		{"localhost:0", "10.88.0.11:2379"},  // not an address
	} {
		_, err := n.Forward(bad.host, netip.MustParseAddrPort(bad.guest))
		assert.Error(t, err, "Forward(%s, %s)", bad.host, bad.guest)
	}
}

func TestPartition(t *testing.T) {
	n := testNetwork(t)
	g1 := leased(t, n, mac1)
	exchange := peerExchange(t, g1, leased(t, n, mac2))
	reach := func(d time.Duration) error { _, err := exchange(d); return err }
	require.NoError(t, reach(10*time.Second), "peers on one network")

	require.NoError(t, n.Partition([]string{"n1"}, []string{"n2"}))
	assert.Equal(t, [][]string{{"n1"}, {"n2"}}, n.Status().Partition)
	assert.Error(t, reach(time.Second), "a peer across the partition answered")
	assert.NotZero(t, n.Stats().Switch.Partitioned)
	// The gateway still serves both sides.
	m, err := g1.query(ctxT(t, 10*time.Second), "udp", gw, "n2.demo.internal.", dns.TypeA)
	require.NoError(t, err)
	assert.Equal(t, dns.RcodeSuccess, m.Rcode)

	require.NoError(t, n.Partition())
	require.NoError(t, reach(10*time.Second), "healed")

	assert.ErrorIs(t, n.Partition([]string{"n1", "n9"}), ErrUnknownHost)
	assert.Error(t, n.Partition([]string{"n1"}, []string{"n1"}))

	// A one-way cut, either way, stops TCP between them (it needs both
	// directions); Partition() heals it too.
	for _, c := range []OneWay{{From: []string{"n1"}, To: []string{"n2"}}, {From: []string{"n2"}, To: []string{"n1"}}} {
		require.NoError(t, n.CutOneWay(c))
		assert.Equal(t, []OneWay{c}, n.Status().OneWay)
		assert.Error(t, reach(time.Second), "a peer across the one-way cut %v answered", c)
		require.NoError(t, n.Partition())
		assert.Empty(t, n.Status().OneWay)
		require.NoError(t, reach(10*time.Second), "healed")
	}
	assert.ErrorIs(t, n.CutOneWay(OneWay{From: []string{"n1"}, To: []string{"n9"}}), ErrUnknownHost)
	assert.ErrorContains(t, n.CutOneWay(OneWay{From: []string{"n1"}, To: []string{"n1", "n2"}}), `host "n1" is on both sides`)
	assert.ErrorContains(t, n.CutOneWay(OneWay{From: []string{"n1"}}), "name the hosts on both sides")
}

// srvTargets returns the answer's SRV records as sorted target:port.
func srvTargets(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		if s, ok := rr.(*dns.SRV); ok {
			out = append(out, s.Target+":"+strconv.Itoa(int(s.Port)))
		}
	}
	sort.Strings(out)
	return out
}

// TestRenumber gives a host its next address: a renewal keeps the old
// one, a booting guest is moved to the new one, and once it takes that
// lease the A record and the forwards follow.
func TestRenumber(t *testing.T) {
	n := testNetwork(t)
	g := newGuest(t, SwitchSocket(n.Dir()), mac2)
	_, ack := g.lease(ctxT(t, 10*time.Second))
	require.Equal(t, "10.88.0.12", ack.YourIPAddr.String())
	fwd, err := n.Forward("127.0.0.1:0", netip.AddrPortFrom(ip2, 2379))
	require.NoError(t, err)

	next := netip.MustParseAddr("10.88.0.42")
	require.NoError(t, n.AddHost(Host{Name: "n2", MAC: mac2, IP: ip2, Next: next}))
	// The next address may not be another host's.
	err = n.AddHost(Host{Name: "n1", MAC: mac1, IP: ip1, Next: next})
	require.ErrorIs(t, err, ErrConflict)

	a := func() string {
		ans, _, _ := n.zone.Load().lookup("n2.demo.internal.", dns.TypeA)
		require.Len(t, ans, 1)
		return ans[0].(*dns.A).A.String()
	}
	// The running guest renews: it keeps its address, and so does DNS.
	req, err := dhcpv4.NewRenewFromAck(ack)
	require.NoError(t, err)
	g.sendUDP(gatewayMAC, netip.AddrPortFrom(ip2, 68), netip.AddrPortFrom(gw, 67), req.ToBytes())
	r := g.dhcpAwait(ctxT(t, 10*time.Second), req.TransactionID)
	assert.Equal(t, dhcpv4.MessageTypeAck, r.MessageType(), r.Summary())
	assert.Equal(t, "10.88.0.12", r.YourIPAddr.String())
	assert.Equal(t, "10.88.0.12", a())

	// The guest boots again: it is offered and given the next address.
	g2 := newGuest(t, SwitchSocket(n.Dir()), mac2)
	offer, ack2 := g2.lease(ctxT(t, 10*time.Second))
	assert.Equal(t, "10.88.0.42", offer.YourIPAddr.String())
	require.Equal(t, dhcpv4.MessageTypeAck, ack2.MessageType(), ack2.Summary())
	assert.Equal(t, "10.88.0.42", ack2.YourIPAddr.String())
	assert.Equal(t, "10.88.0.42", a())
	h := n.Hosts()[1]
	assert.Equal(t, next, h.IP)
	assert.False(t, h.Next.IsValid(), "next address still set after the move: %v", h.Next)
	fw := n.Forwards()
	require.Len(t, fw, 1)
	assert.Equal(t, fwd, fw[0].Host)
	assert.Equal(t, netip.AddrPortFrom(next, 2379), fw[0].Guest, "the forward did not follow the host")
}

// peerExchange makes g2 answer "peer" on its port 2380 to every
// connection, and returns a function that connects from g1 within d and
// reads the answer: it returns how long the connection took to open.
func peerExchange(t *testing.T, g1, g2 *guest) func(d time.Duration) (time.Duration, error) {
	ln := g2.listen(2380)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("peer"))
			c.Close()
		}
	}()
	return func(d time.Duration) (time.Duration, error) {
		start := time.Now()
		c, err := g1.dial(ctxT(t, d), netip.AddrPortFrom(ip2, 2380))
		if err != nil {
			return 0, err
		}
		took := time.Since(start)
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(d))
		b, err := io.ReadAll(c)
		if err == nil && string(b) != "peer" {
			t.Fatalf("read %q from the peer", b)
		}
		return took, err
	}
}

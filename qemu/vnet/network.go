package vnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-multierror"
	"github.com/miekg/dns"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// gatewayMAC is the gateway's Ethernet address: locally administered and
// outside QEMU's 52:54:00 range, so no VM's derived address takes it.
var gatewayMAC = mac{0x02, 0x65, 0x62, 0x00, 0x00, 0x01}

var (
	// ErrUnknownHost means no host has the name.
	ErrUnknownHost = errors.New("no such host")
	// ErrRunning means another network already serves the directory.
	ErrRunning = errors.New("a network already serves this directory")
	// ErrClosed means the network was closed.
	ErrClosed = errors.New("network closed")
)

// Network is a closed virtual Ethernet for VMs, with the harness's own
// host on it as the gateway: DHCP with static leases, DNS for the
// cluster's names only, and forwards from host loopback ports to guest
// ports. Its methods are safe for concurrent use.
type Network struct {
	cfg    resolved
	sw     *ethSwitch
	gwPort *port
	stack  *stack.Stack
	zone   atomic.Pointer[zone]
	dns    *dnsServer
	dhcp   *dhcpServer
	dnsUDP *dns.Server
	dnsTCP *dns.Server
	dhcpC  net.PacketConn
	ln     net.Listener // the switch socket; nil without Dir
	wg     sync.WaitGroup

	mu                  sync.Mutex
	closed              bool
	hosts               []Host
	srv                 []SRV // nil: generated from hosts
	groups              [][]string
	oneWay              []OneWay
	impaired            map[string]impair // by host name (Impair)
	serial              uint32
	forwards            map[netip.AddrPort]*forward
	conns               map[net.Conn]struct{}
	closers             []func() error // servers on the gateway (ServeMetadata)
	fwdConns, fwdFailed atomic.Uint64
}

// New starts a network: the gateway's stack with its DHCP and DNS
// servers and, when cfg.Dir is set, the switch socket VMs connect to.
// When New returns, a VM can connect and get its lease. Close stops it.
func New(cfg Config) (*Network, error) {
	r, err := resolve(cfg)
	if err != nil {
		return nil, fmt.Errorf("network: %w", err)
	}
	n := &Network{
		cfg:      r,
		sw:       newSwitch(gatewayMAC),
		hosts:    r.Hosts,
		forwards: map[netip.AddrPort]*forward{},
		conns:    map[net.Conn]struct{}{},
	}
	n.dns = &dnsServer{zone: &n.zone, logf: r.Logf}
	n.dhcp = &dhcpServer{zone: &n.zone, gateway: r.gateway, prefix: r.prefix, leaseTime: r.LeaseTime, logf: r.Logf, moved: n.moved}
	n.rebuild()

	gw := gatewayMAC
	n.gwPort = n.sw.add("gateway", &gw)
	link := &frameLink{addr: tcpip.LinkAddress(gw[:]), send: func(f []byte) { n.sw.ingress(n.gwPort, f) }}
	if n.stack, err = newStack(link, r.gateway, r.prefix); err != nil {
		return nil, fmt.Errorf("network: %w", err)
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for {
			select {
			case <-n.gwPort.done:
				return
			case f := <-n.gwPort.out:
				// Floods of unknown unicast reach every port; the
				// gateway takes only its own and group frames.
				if dst := toMAC(f); dst == gatewayMAC || dst.multicast() {
					link.deliver(f)
				}
			}
		}
	}()
	for _, h := range n.hosts {
		n.stack.AddStaticNeighbor(nicID, ipv4.ProtocolNumber, tcpAddr(h.IP), tcpip.LinkAddress(h.MAC))
	}
	if err := n.startServices(); err != nil {
		n.Close()
		return nil, fmt.Errorf("network: %w", err)
	}
	if r.Dir != "" {
		if err := os.MkdirAll(r.Dir, 0o755); err != nil {
			n.Close()
			return nil, fmt.Errorf("network: %w", err)
		}
		if n.ln, err = listenUnix(SwitchSocket(r.Dir)); err != nil {
			n.Close()
			return nil, fmt.Errorf("network: %w", err)
		}
		n.wg.Add(1)
		go n.acceptVMs()
	}
	r.Logf("network %s on %s: gateway %s, domain %s, %d hosts", r.prefix, r.Dir, r.gateway, r.Domain, len(n.hosts))
	return n, nil
}

// startServices starts DNS (UDP and TCP port 53) and DHCP (UDP port 67)
// on the gateway, returning once they serve.
func (n *Network) startServices() error {
	pc, err := listenUDP(n.stack, fullAddr(n.cfg.gateway, 53), false)
	if err != nil {
		return fmt.Errorf("dns: %w", err)
	}
	ln, err := gonet.ListenTCP(n.stack, fullAddr(n.cfg.gateway, 53), ipv4.ProtocolNumber)
	if err != nil {
		pc.Close()
		return fmt.Errorf("dns: %w", err)
	}
	n.dnsUDP = &dns.Server{PacketConn: pc, Handler: n.dns}
	n.dnsTCP = &dns.Server{Listener: ln, Handler: n.dns}
	for _, srv := range []*dns.Server{n.dnsUDP, n.dnsTCP} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		errc := make(chan error, 1)
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			errc <- srv.ActivateAndServe()
		}()
		select {
		case <-started:
		case err := <-errc:
			return fmt.Errorf("dns: %w", err)
		}
	}
	// Port 67 on any address: DHCP requests go to 255.255.255.255.
	if n.dhcpC, err = listenUDP(n.stack, tcpip.FullAddress{NIC: nicID, Port: 67}, true); err != nil {
		return fmt.Errorf("dhcp: %w", err)
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.dhcp.serve(n.dhcpC)
	}()
	return nil
}

// listenUnix listens on a unix socket path, replacing a stale socket
// that nobody serves and refusing one that somebody does.
func listenUnix(path string) (net.Listener, error) {
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("listen on %s: %w", path, ErrRunning)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return ln, nil
}

func (n *Network) acceptVMs() {
	defer n.wg.Done()
	for {
		c, err := n.ln.Accept()
		if err != nil {
			return
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			if err := n.Attach(c); err != nil {
				n.cfg.Logf("switch: %v", err)
			}
		}()
	}
}

// Attach runs conn, a QEMU stream netdev connection (or anything that
// speaks its framing), as a switch port until either end closes it. The
// switch socket does this for each VM; tests call it directly.
func (n *Network) Attach(conn net.Conn) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		conn.Close()
		return ErrClosed
	}
	n.conns[conn] = struct{}{}
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		delete(n.conns, conn)
		n.mu.Unlock()
	}()
	p := n.sw.add("vm", nil)
	err := n.sw.serveStream(p, conn)
	name := "a vm that sent nothing"
	if p.hasMAC { // the port is removed: nothing writes p.mac any more
		name = p.mac.String()
		if h, ok := n.zone.Load().leases[name]; ok {
			name = h.Name + " (" + name + ")"
		}
	}
	n.cfg.Logf("switch: %s left", name)
	if err != nil {
		return fmt.Errorf("port of %s: %w", name, err)
	}
	return nil
}

// Close stops the network: VMs lose their connection (QEMU 7.2 does not
// reconnect), forwards stop listening, the sockets are removed.
func (n *Network) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	conns := make([]net.Conn, 0, len(n.conns))
	for c := range n.conns {
		conns = append(conns, c)
	}
	fwds := n.forwards
	n.forwards = map[netip.AddrPort]*forward{}
	closers := n.closers
	n.mu.Unlock()

	var errs *multierror.Error
	if n.ln != nil {
		n.ln.Close() // also removes the socket file
	}
	for _, c := range conns {
		c.Close()
	}
	for _, f := range fwds {
		f.close()
	}
	for _, c := range closers {
		_ = c()
	}
	for _, srv := range []*dns.Server{n.dnsUDP, n.dnsTCP} {
		if srv != nil {
			if err := srv.Shutdown(); err != nil {
				errs = multierror.Append(errs, fmt.Errorf("stop dns: %w", err))
			}
		}
	}
	if n.dhcpC != nil {
		n.dhcpC.Close()
	}
	n.sw.remove(n.gwPort)
	if n.stack != nil {
		n.stack.Close()
		n.stack.Wait()
	}
	n.wg.Wait()
	return errs.ErrorOrNil()
}

// Gateway returns the gateway's address: the guests' DNS server and the
// source of forwarded connections.
func (n *Network) Gateway() netip.Addr { return n.cfg.gateway }

// Subnet returns the network's prefix.
func (n *Network) Subnet() netip.Prefix { return n.cfg.prefix }

// Domain returns the cluster's DNS domain (without a trailing dot).
func (n *Network) Domain() string { return n.cfg.Domain }

// Dir returns the directory of the network's sockets ("" without one).
func (n *Network) Dir() string { return n.cfg.Dir }

// Stats are the network's counters.
type Stats struct {
	Switch  SwitchStats  `json:"switch"`
	DNS     DNSStats     `json:"dns"`
	DHCP    DHCPStats    `json:"dhcp"`
	Gateway GatewayStats `json:"gateway"`
	Forward ForwardStats `json:"forward"`
}

// GatewayStats counts what the gateway's stack did not take.
type GatewayStats struct {
	// NotForUs counts IP packets sent to the gateway's MAC for another
	// address: a guest that tried to route through it. The gateway routes
	// nothing; they are dropped.
	NotForUs uint64 `json:"notForUs"`
}

// ForwardStats counts forwarded connections.
type ForwardStats struct {
	Conns  uint64 `json:"conns"`  // accepted on the host
	Failed uint64 `json:"failed"` // whose guest end could not be dialed
}

// Stats returns the network's counters.
func (n *Network) Stats() Stats {
	st := n.stack.Stats()
	return Stats{
		Switch:  n.sw.stats(),
		DNS:     n.dns.stats(),
		DHCP:    n.dhcp.stats(),
		Gateway: GatewayStats{NotForUs: st.IP.InvalidDestinationAddressesReceived.Value()},
		Forward: ForwardStats{Conns: n.fwdConns.Load(), Failed: n.fwdFailed.Load()},
	}
}

// Listen listens for TCP connections on the gateway's address inside the
// network, e.g. for a registry the guests pull upgrade images from. Only
// the guests can reach it; the caller serves and closes it.
func (n *Network) Listen(port uint16) (net.Listener, error) {
	ln, err := gonet.ListenTCP(n.stack, fullAddr(n.cfg.gateway, port), ipv4.ProtocolNumber)
	if err != nil {
		return nil, fmt.Errorf("listen on %s:%d: %s", n.cfg.gateway, port, err)
	}
	return ln, nil
}

package vnet

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// MetadataAddr is the link-local address every cloud serves its instance
// metadata on (EC2, GCE, Azure, OpenStack alike).
var MetadataAddr = netip.MustParseAddr("169.254.169.254")

// ServeMetadata serves h on MetadataAddr port 80 inside the network, as a
// cloud's metadata service: the gateway takes the address as its own
// (answering ARP for it), and from then on every lease carries a
// classless static route (DHCP option 121) to it through the gateway, as
// GCE's DHCP does, since the network gives no default route. Without it
// a guest has no route to MetadataAddr and its probe fails at once, as
// on a machine outside any cloud. Nothing else about the network
// changes: the gateway still routes nothing. The server stops with the
// network.
func (n *Network) ServeMetadata(h http.Handler) error {
	addr := tcpip.ProtocolAddress{
		Protocol:          ipv4.ProtocolNumber,
		AddressWithPrefix: tcpip.AddressWithPrefix{Address: tcpAddr(MetadataAddr), PrefixLen: 32},
	}
	if err := n.stack.AddProtocolAddress(nicID, addr, stack.AddressProperties{}); err != nil {
		return fmt.Errorf("metadata: add %s to the gateway: %s", MetadataAddr, err)
	}
	ln, err := gonet.ListenTCP(n.stack, fullAddr(MetadataAddr, 80), ipv4.ProtocolNumber)
	if err != nil {
		return fmt.Errorf("metadata: listen on %s:80: %s", MetadataAddr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		_ = srv.Serve(ln)
	}()
	n.mu.Lock()
	n.closers = append(n.closers, srv.Close)
	n.mu.Unlock()
	n.dhcp.routes.Store(&[]staticRoute{{dst: netip.PrefixFrom(MetadataAddr, 32), via: n.cfg.gateway}})
	n.cfg.Logf("metadata: serving on %s:80; leases route it through %s", MetadataAddr, n.cfg.gateway)
	return nil
}

// staticRoute is one route of DHCP option 121.
type staticRoute struct {
	dst netip.Prefix
	via netip.Addr
}

// HostByIP returns the network's host with address ip (its current one),
// e.g. to tell which instance asks the metadata service.
func (n *Network) HostByIP(ip netip.Addr) (Host, bool) {
	for _, h := range n.Hosts() {
		if h.IP == ip {
			return h, true
		}
	}
	return Host{}, false
}

// RemoteHost is HostByIP of an HTTP request's remote address.
func (n *Network) RemoteHost(r *http.Request) (Host, bool) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			return Host{}, false
		}
		a, err := netip.ParseAddr(host)
		if err != nil {
			return Host{}, false
		}
		return n.HostByIP(a.Unmap())
	}
	return n.HostByIP(ap.Addr().Unmap())
}

package vnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
)

// dialTimeout bounds the gateway's dial to a guest port. A guest that is
// down does not answer its SYN; the host's client sees its connection
// closed when this runs out.
const dialTimeout = 10 * time.Second

// Forward is a host TCP address forwarded to a guest address.
type Forward struct {
	Host  netip.AddrPort `json:"host"`
	Guest netip.AddrPort `json:"guest"`
}

// forward is a running Forward: a host listener whose connections the
// gateway's stack relays to the guest.
type forward struct {
	Forward
	ln     net.Listener
	ctx    context.Context // ends with the forward
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[io.Closer]struct{}
}

// Forward listens on host, a loopback address with a port (port 0 picks
// a free one), and relays each connection to guest through the network,
// from the gateway's address. It returns the address it listens on.
// Loopback only: the cluster is never exposed beyond this machine.
func (n *Network) Forward(host string, guest netip.AddrPort) (netip.AddrPort, error) {
	ha, err := netip.ParseAddrPort(host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("forward %s: %w", host, err)
	}
	switch g := guest.Addr().Unmap(); {
	case !ha.Addr().IsLoopback():
		return netip.AddrPort{}, fmt.Errorf("forward %s: not a loopback address", host)
	case !n.cfg.prefix.Contains(g) || g == n.cfg.gateway || guest.Port() == 0:
		return netip.AddrPort{}, fmt.Errorf("forward %s to %s: not a guest address in %s", host, guest, n.cfg.prefix)
	}
	guest = netip.AddrPortFrom(guest.Addr().Unmap(), guest.Port())
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return netip.AddrPort{}, ErrClosed
	}
	ln, err := net.Listen("tcp", host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("forward to %s: %w", guest, err)
	}
	f := &forward{ln: ln, conns: map[io.Closer]struct{}{}}
	f.Host = ln.Addr().(*net.TCPAddr).AddrPort()
	f.Guest = guest
	f.ctx, f.cancel = context.WithCancel(context.Background())
	n.forwards[f.Host] = f
	f.wg.Add(1)
	go n.acceptForward(f)
	n.cfg.Logf("forward: %s to %s", f.Host, f.Guest)
	return f.Host, nil
}

// guest is where new connections go; a renumbered host moves it.
func (f *forward) guest() netip.AddrPort {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.Guest
}

// setGuest points new connections at g; the caller holds the network's mu.
func (f *forward) setGuest(g netip.AddrPort) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Guest = g
}

// Forwards returns the current forwards.
func (n *Network) Forwards() []Forward {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []Forward
	for _, f := range n.forwards {
		out = append(out, f.Forward)
	}
	slices.SortFunc(out, func(a, b Forward) int { return a.Host.Compare(b.Host) })
	return out
}

// ErrNoForward means no forward listens on the address.
var ErrNoForward = errors.New("no such forward")

// RemoveForward stops the forward listening on host and closes its
// connections.
func (n *Network) RemoveForward(host netip.AddrPort) error {
	n.mu.Lock()
	f, ok := n.forwards[host]
	delete(n.forwards, host)
	n.mu.Unlock()
	if !ok {
		return fmt.Errorf("remove forward %s: %w", host, ErrNoForward)
	}
	f.close()
	return nil
}

func (f *forward) close() {
	f.cancel()
	f.ln.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// track registers c to be closed with the forward; it reports false (and
// closes c) when the forward is already closing.
func (f *forward) track(c io.Closer) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ctx.Err() != nil {
		c.Close()
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *forward) untrack(c io.Closer) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	c.Close()
}

func (n *Network) acceptForward(f *forward) {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		n.fwdConns.Add(1)
		if !f.track(c) {
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer f.untrack(c)
			n.relay(f, c.(*net.TCPConn))
		}()
	}
}

// relay dials the guest and copies both ways, passing half-closes on.
func (n *Network) relay(f *forward, c *net.TCPConn) {
	ctx, cancel := context.WithTimeout(f.ctx, dialTimeout)
	guest := f.guest()
	g, err := gonet.DialContextTCP(ctx, n.stack, fullAddr(guest.Addr(), guest.Port()), ipv4.ProtocolNumber)
	cancel()
	if err != nil {
		n.fwdFailed.Add(1)
		n.cfg.Logf("forward %s: dial %s: %v", f.Host, guest, err)
		return
	}
	if !f.track(g) {
		return
	}
	defer f.untrack(g)
	errc := make(chan error, 2)
	go func() {
		_, err := io.Copy(g, c)
		g.CloseWrite()
		errc <- err
	}()
	go func() {
		_, err := io.Copy(c, g)
		c.CloseWrite()
		errc <- err
	}()
	// A clean EOF one way leaves the other way open (a half-close); an
	// error either way ends both.
	if err := <-errc; err != nil {
		c.Close()
		g.Close()
	}
	<-errc
}

package netconf

import (
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Open returns a handle on the kernel's routing netlink socket.
func Open() (*netlink.Handle, error) {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	return h, nil
}

// Apply makes the link match the plan. It is idempotent: addresses and
// routes are replaced, not added twice.
func Apply(h *netlink.Handle, p Plan) error {
	l, err := h.LinkByName(p.Link)
	if err != nil {
		return fmt.Errorf("find link %s: %w", p.Link, err)
	}
	if p.MTU > 0 {
		if err := h.LinkSetMTU(l, p.MTU); err != nil {
			return fmt.Errorf("set %s mtu %d: %w", p.Link, p.MTU, err)
		}
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s up: %w", p.Link, err)
	}
	for _, a := range p.Addrs {
		a := a
		if err := h.AddrReplace(l, &a); err != nil {
			return fmt.Errorf("add address %s to %s: %w", a.IPNet, p.Link, err)
		}
	}
	for _, r := range p.Routes {
		r := r
		r.LinkIndex = l.Attrs().Index
		if err := h.RouteReplace(&r); err != nil {
			return fmt.Errorf("add route %s via %s on %s: %w", r.Dst, r.Gw, p.Link, err)
		}
	}
	return nil
}

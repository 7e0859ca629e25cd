package metadata

import (
	"context"
	"fmt"
	"time"

	"github.com/etcdbox/etcdbox/init/netconf"
	"github.com/vishvananda/netlink"
)

// Link brings up the first NIC with a DHCP lease, so that the node can
// ask the metadata services before it has a seed (the seed says how its
// network is configured; the metadata services are reached over DHCP's).
// It gives up when ctx ends. release takes the lease's routes and
// addresses off again: the network step then configures the link as the
// seed says.
func Link(ctx context.Context) (release func(), err error) {
	h, err := netconf.Open()
	if err != nil {
		return nil, err
	}
	var links []netlink.Link
	for {
		if links, err = netconf.Links(h); err == nil && len(links) > 0 {
			break
		}
		select {
		case <-ctx.Done():
			h.Close()
			return nil, fmt.Errorf("no network interface: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	name := links[0].Attrs().Name
	if err := netconf.Up(h, name); err != nil {
		h.Close()
		return nil, err
	}
	p, _, err := netconf.DHCP(ctx, name, "")
	if err == nil {
		err = netconf.Apply(h, p)
	}
	release = func() {
		if l, err := h.LinkByName(name); err == nil {
			for _, r := range p.Routes {
				r.LinkIndex = l.Attrs().Index
				_ = h.RouteDel(&r)
			}
			for _, a := range p.Addrs {
				_ = h.AddrDel(l, &a)
			}
		}
		h.Close()
	}
	if err != nil {
		release()
		return nil, err
	}
	return release, nil
}

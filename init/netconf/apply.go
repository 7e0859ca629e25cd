package netconf

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/vishvananda/netlink"
)

// Links lists the non-loopback links, in index order.
func Links(h *netlink.Handle) ([]netlink.Link, error) {
	all, err := h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	var out []netlink.Link
	for _, l := range all {
		if l.Attrs().Flags&net.FlagLoopback != 0 || l.Type() != "device" {
			continue
		}
		out = append(out, l)
	}
	return out, nil
}

// Match picks the link an Interface names: by Name, by MAC, or the first
// NIC when it names neither.
func Match(links []netlink.Link, in Interface) (netlink.Link, error) {
	for _, l := range links {
		a := l.Attrs()
		switch {
		case in.Name != "" && a.Name == in.Name:
			return l, nil
		case in.Name == "" && in.MAC != "" && strings.EqualFold(a.HardwareAddr.String(), in.MAC):
			return l, nil
		case in.Name == "" && in.MAC == "":
			return l, nil
		}
	}
	want := in.Name
	if want == "" {
		want = in.MAC
	}
	if want == "" {
		return nil, fmt.Errorf("no network interface found")
	}
	return nil, fmt.Errorf("no network interface matches %q", want)
}

// Up sets the loopback and the named link up.
func Up(h *netlink.Handle, link string) error {
	for _, name := range []string{"lo", link} {
		l, err := h.LinkByName(name)
		if err != nil {
			return fmt.Errorf("find link %s: %w", name, err)
		}
		if err := h.LinkSetUp(l); err != nil {
			return fmt.Errorf("set %s up: %w", name, err)
		}
	}
	return nil
}

// Down sets links down, each it can, and returns every failure joined.
// The init calls it on the NICs just before it halts or jumps into
// another kernel (see the init's downLinks).
func Down(h *netlink.Handle, links []netlink.Link) error {
	var errs []error
	for _, l := range links {
		if err := h.LinkSetDown(l); err != nil {
			errs = append(errs, fmt.Errorf("set %s down: %w", l.Attrs().Name, err))
		}
	}
	return errors.Join(errs...)
}

package vnet

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/miekg/dns"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
)

// Hosts returns the current hosts.
func (n *Network) Hosts() []Host {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]Host, len(n.hosts))
	for i, h := range n.hosts {
		h.MAC = slices.Clone(h.MAC)
		out[i] = h
	}
	return out
}

// AddHost adds h, or replaces the host of the same name. Its lease and
// DNS records take effect at once; a guest already holding another
// lease gets the new one when it renews.
func (n *Network) AddHost(h Host) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return ErrClosed
	}
	h, err := n.cfg.checkHost(h, n.hosts)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(n.hosts, func(o Host) bool { return o.Name == h.Name })
	if i >= 0 {
		n.stack.RemoveNeighbor(nicID, ipv4.ProtocolNumber, tcpAddr(n.hosts[i].IP))
		n.hosts[i] = h
	} else {
		n.hosts = append(n.hosts, h)
	}
	// The gateway knows every host's MAC: no ARP for it, and no guest
	// can redirect the gateway's traffic with forged ARP replies.
	n.stack.AddStaticNeighbor(nicID, ipv4.ProtocolNumber, tcpAddr(h.IP), tcpip.LinkAddress(h.MAC))
	n.rebuild()
	n.cfg.Logf("hosts: %s is %s at %s", h.Name, h.IP, h.MAC)
	return nil
}

// moved makes a host's Next address its address, once its guest took
// that lease: the A record and the forwards to the old address follow.
func (n *Network) moved(lease Host) {
	n.mu.Lock()
	defer n.mu.Unlock()
	i := slices.IndexFunc(n.hosts, func(o Host) bool { return o.Name == lease.Name })
	if i < 0 || n.hosts[i].Next != lease.Next || !lease.Next.IsValid() {
		return // changed meanwhile
	}
	h := &n.hosts[i]
	old := h.IP
	n.stack.RemoveNeighbor(nicID, ipv4.ProtocolNumber, tcpAddr(old))
	h.IP, h.Next = h.Next, netip.Addr{}
	n.stack.AddStaticNeighbor(nicID, ipv4.ProtocolNumber, tcpAddr(h.IP), tcpip.LinkAddress(h.MAC))
	for _, f := range n.forwards {
		if f.Guest.Addr() == old {
			f.setGuest(netip.AddrPortFrom(h.IP, f.Guest.Port()))
		}
	}
	n.rebuild()
	n.cfg.Logf("hosts: %s moved from %s to %s (its new lease)", h.Name, old, h.IP)
}

// RemoveHost removes a host's lease and DNS records. Its VM, if it still
// runs, stays on the switch; its lease renewal is refused.
func (n *Network) RemoveHost(name string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return ErrClosed
	}
	i := slices.IndexFunc(n.hosts, func(o Host) bool { return o.Name == name })
	if i < 0 {
		return fmt.Errorf("remove host %q: %w", name, ErrUnknownHost)
	}
	n.stack.RemoveNeighbor(nicID, ipv4.ProtocolNumber, tcpAddr(n.hosts[i].IP))
	n.hosts = slices.Delete(n.hosts, i, i+1)
	n.rebuild()
	n.cfg.Logf("hosts: removed %s", name)
	return nil
}

// SetSRV replaces every SRV record with records, for tests of bad
// discovery data: duplicates, targets that do not exist, "." targets, no
// records at all (an empty, non-nil slice: the SRV names then do not
// exist). nil goes back to the records generated from the hosts. Names
// must be under the domain.
func (n *Network) SetSRV(records []SRV) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	z := n.zone.Load()
	for i, r := range records {
		if !z.inZone(z.abs(r.Name)) {
			return fmt.Errorf("srv[%d]: name %q is not under %s", i, r.Name, z.domain)
		}
		if _, ok := dns.IsDomainName(z.abs(r.Target)); !ok {
			return fmt.Errorf("srv[%d]: target %q is not a DNS name", i, r.Target)
		}
	}
	if records != nil {
		records = slices.Clone(records)
		if records == nil {
			records = []SRV{}
		}
	}
	n.srv = records
	n.rebuild()
	return nil
}

// Partition splits the network: hosts in different groups exchange no
// frames, and hosts named in no group form one more group together. The
// gateway reaches every host (DHCP, DNS and forwards keep working).
// Partition() with no groups heals the network: the groups, every
// one-way cut (CutOneWay) and every impaired link (Impair).
func (n *Network) Partition(groups ...[]string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	seen := map[string]bool{}
	for _, g := range groups {
		for _, name := range g {
			if !n.hasHost(name) {
				return fmt.Errorf("partition: host %q: %w", name, ErrUnknownHost)
			}
			if seen[name] {
				return fmt.Errorf("partition: host %q is in two groups", name)
			}
			seen[name] = true
		}
	}
	n.groups = nil
	for _, g := range groups {
		n.groups = append(n.groups, slices.Clone(g))
	}
	if len(groups) == 0 {
		n.oneWay, n.impaired = nil, nil
	}
	n.applyPartition()
	if len(groups) == 0 {
		n.cfg.Logf("partition: healed")
	} else {
		n.cfg.Logf("partition: %v", groups)
	}
	return nil
}

// OneWay is a one-way cut: no frame from a host of From reaches a host of
// To; frames the other way pass.
type OneWay struct {
	From []string `json:"from"`
	To   []string `json:"to"`
}

// CutOneWay adds a one-way cut, on top of any partition and earlier cuts:
// the frames of c.From's hosts to c.To's are dropped, as a link that
// loses one direction does (a NIC whose transmit or receive side fails, a
// firewall rule on one side). TCP needs both directions, so new
// connections between them fail both ways, while data already under way
// in the open direction still arrives, unacknowledged. The gateway is
// never cut. Partition() heals it.
func (n *Network) CutOneWay(c OneWay) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(c.From) == 0 || len(c.To) == 0 {
		return errors.New("one-way cut: name the hosts on both sides")
	}
	for _, name := range append(slices.Clone(c.From), c.To...) {
		if !n.hasHost(name) {
			return fmt.Errorf("one-way cut: host %q: %w", name, ErrUnknownHost)
		}
	}
	for _, name := range c.From {
		if slices.Contains(c.To, name) {
			return fmt.Errorf("one-way cut: host %q is on both sides", name)
		}
	}
	n.oneWay = append(n.oneWay, OneWay{From: slices.Clone(c.From), To: slices.Clone(c.To)})
	n.applyPartition()
	n.cfg.Logf("one-way cut: %v -> %v", c.From, c.To)
	return nil
}

// hasHost reports whether a host is called name. Caller holds mu.
func (n *Network) hasHost(name string) bool {
	return slices.ContainsFunc(n.hosts, func(h Host) bool { return h.Name == name })
}

// hostMAC returns the MAC of the host called name. Caller holds mu.
func (n *Network) hostMAC(name string) (mac, bool) {
	j := slices.IndexFunc(n.hosts, func(h Host) bool { return h.Name == name })
	if j < 0 {
		return mac{}, false
	}
	return toMAC(n.hosts[j].MAC), true
}

// applyPartition turns the named groups, one-way cuts and impaired links
// into the switch's by MAC. Caller holds mu.
func (n *Network) applyPartition() {
	n.applyImpair()
	var cuts map[cut]bool
	for _, c := range n.oneWay {
		for _, from := range c.From {
			for _, to := range c.To {
				f, ok1 := n.hostMAC(from)
				t, ok2 := n.hostMAC(to)
				if ok1 && ok2 {
					if cuts == nil {
						cuts = map[cut]bool{}
					}
					cuts[cut{f, t}] = true
				}
			}
		}
	}
	n.sw.cutOneWay(cuts)
	if len(n.groups) == 0 {
		n.sw.partition(nil)
		return
	}
	m := map[mac]int{}
	for i, g := range n.groups {
		for _, name := range g {
			if a, ok := n.hostMAC(name); ok {
				m[a] = i + 1
			}
		}
	}
	n.sw.partition(m)
}

// rebuild publishes a new zone for the current hosts and SRV records,
// and re-applies the partition to the hosts' current MACs. Caller holds
// mu (or owns n alone).
func (n *Network) rebuild() {
	n.serial++
	n.zone.Store(buildZone(n.cfg.Domain, n.cfg.SRVName, slices.Clone(n.hosts), n.srv, n.serial))
	n.applyPartition()
}

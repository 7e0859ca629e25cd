package vnet

import (
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
// Partition() with no groups heals the network.
func (n *Network) Partition(groups ...[]string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	seen := map[string]bool{}
	for _, g := range groups {
		for _, name := range g {
			if !slices.ContainsFunc(n.hosts, func(h Host) bool { return h.Name == name }) {
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
	n.applyPartition()
	if len(groups) == 0 {
		n.cfg.Logf("partition: healed")
	} else {
		n.cfg.Logf("partition: %v", groups)
	}
	return nil
}

// applyPartition turns the named groups into the switch's MAC groups.
// Caller holds mu.
func (n *Network) applyPartition() {
	if len(n.groups) == 0 {
		n.sw.partition(nil)
		return
	}
	m := map[mac]int{}
	for i, g := range n.groups {
		for _, name := range g {
			if j := slices.IndexFunc(n.hosts, func(h Host) bool { return h.Name == name }); j >= 0 {
				m[toMAC(n.hosts[j].MAC)] = i + 1
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

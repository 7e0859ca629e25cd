package vnet

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Impairment degrades hosts' links to the other hosts, as a flaky NIC or
// a congested path does: each frame a host of Hosts sends to another host
// or receives from one is lost with probability Loss, and the others wait
// Delay before they are delivered (a frame between two impaired hosts
// gets both). The gateway's links are never impaired, so DHCP, DNS and
// the forwards to the host keep working. Partition() heals it.
type Impairment struct {
	Hosts []string `json:"hosts"`
	// Loss is the share of frames lost, at least 0 and under 1 (all of
	// them would be a partition).
	Loss float64 `json:"loss,omitempty"`
	// Delay is how long each frame that is not lost waits, up to
	// MaxImpairDelay.
	Delay time.Duration `json:"delay,omitempty"`
}

// MaxImpairDelay bounds Impairment.Delay: a path slower than that is a
// partition in all but name.
const MaxImpairDelay = 10 * time.Second

// Impair degrades the links of im.Hosts, replacing what an earlier Impair
// set for them. It refuses an unknown host, a loss outside [0, 1), a
// delay outside [0, MaxImpairDelay] and an impairment that changes
// nothing.
func (n *Network) Impair(im Impairment) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case len(im.Hosts) == 0:
		return errors.New("impair: name the hosts")
	case im.Loss < 0 || im.Loss >= 1 || im.Loss != im.Loss:
		return fmt.Errorf("impair: loss %v: want at least 0 and under 1 (all frames lost is a partition)", im.Loss)
	case im.Delay < 0 || im.Delay > MaxImpairDelay:
		return fmt.Errorf("impair: delay %s: want 0 to %s", im.Delay, MaxImpairDelay)
	case im.Loss == 0 && im.Delay == 0:
		return errors.New("impair: no loss and no delay: nothing to impair (heal undoes an impairment)")
	}
	for _, name := range im.Hosts {
		if !n.hasHost(name) {
			return fmt.Errorf("impair: host %q: %w", name, ErrUnknownHost)
		}
	}
	if n.impaired == nil {
		n.impaired = map[string]impair{}
	}
	for _, name := range im.Hosts {
		n.impaired[name] = impair{loss: im.Loss, delay: im.Delay}
	}
	n.applyPartition()
	n.cfg.Logf("impair: %v: loss %.0f%%, delay %s", im.Hosts, 100*im.Loss, im.Delay)
	return nil
}

// impairments lists the impaired hosts, one Impairment each, by name.
// Caller holds mu.
func (n *Network) impairments() []Impairment {
	var out []Impairment
	for name, im := range n.impaired {
		out = append(out, Impairment{Hosts: []string{name}, Loss: im.loss, Delay: im.delay})
	}
	slices.SortFunc(out, func(a, b Impairment) int { return cmp.Compare(a.Hosts[0], b.Hosts[0]) })
	return out
}

// applyImpair gives the switch the impaired hosts' MACs. Caller holds mu.
func (n *Network) applyImpair() {
	var m map[mac]impair
	for name, im := range n.impaired {
		if a, ok := n.hostMAC(name); ok {
			if m == nil {
				m = map[mac]impair{}
			}
			m[a] = im
		}
	}
	n.sw.setImpair(m)
}

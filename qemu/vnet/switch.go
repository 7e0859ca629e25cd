package vnet

import (
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// This is a learning Ethernet switch of our own rather than
// gvisor-tap-vsock's tap.Switch, for these reasons (v0.8.9,
// pkg/tap/switch.go):
//   - tap.Switch writes to every VM's socket while holding its connection
//     lock, so one VM that stops reading blocks all traffic, the
//     gateway's included. QEMU 7.2 stops reading its stream socket
//     whenever the guest cannot take frames: while the VM is paused, and
//     while it boots, before the guest's virtio-net driver is up (seen
//     here: QEMU stops after about 36 KB either way). Here each port has
//     its own bounded queue and writer; a stuck port drops its own frames
//     and nobody else's.
//   - a frame shorter than an Ethernet header makes it index out of range
//     (a panic that takes the whole network down);
//   - a failed write during a broadcast ends the broadcast for the ports
//     after it;
//   - it has no way to partition the network, which fault tests need.
// It also pulls in logrus and gopacket. The framing (4-byte big-endian
// length, then the frame) is the same.

// Frame limits. QEMU's stream netdev without a vnet header sends plain
// frames of at most 1514 bytes (1518 with a VLAN tag); the upper bound
// only guards against a desynchronized stream.
const (
	minFrame   = 14
	maxFrame   = 65535
	queueDepth = 1024 // frames queued per port before the port drops
)

type mac [6]byte

func toMAC(b []byte) (m mac) { copy(m[:], b); return m }

func (m mac) String() string { return net.HardwareAddr(m[:]).String() }

// multicast reports whether m is a group address (broadcast included).
func (m mac) multicast() bool { return m[0]&1 != 0 }

// SwitchStats counts frames through the switch.
type SwitchStats struct {
	Ports  int    `json:"ports"`  // attached VMs, not counting the gateway
	Frames uint64 `json:"frames"` // frames received from ports
	// Dropped counts frames lost to a full port queue (a VM that does not
	// read) and malformed frames.
	Dropped uint64 `json:"dropped"`
	// Spoofed counts frames whose source MAC differs from the first one
	// the port sent: one port is one NIC with one address.
	Spoofed uint64 `json:"spoofed"`
	// Partitioned counts frames withheld by a partition or a one-way
	// cut.
	Partitioned uint64 `json:"partitioned"`
	// Lost counts frames an impaired link lost; Delayed those it held
	// back before delivery.
	Lost    uint64 `json:"lost"`
	Delayed uint64 `json:"delayed"`
}

// port is one switch port: a VM's connection, or the gateway.
type port struct {
	name string
	out  chan []byte   // frames to deliver; never closed
	done chan struct{} // closed when the port is removed

	// Guarded by the switch's mu.
	mac    mac
	hasMAC bool
}

// enqueue queues f for delivery without blocking; it reports false when
// the port's queue is full.
func (p *port) enqueue(f []byte) bool {
	select {
	case p.out <- f:
		return true
	default:
		return false
	}
}

type ethSwitch struct {
	gateway mac

	mu     sync.Mutex
	ports  map[*port]struct{}
	cam    map[mac]*port
	group  map[mac]int    // partition: MAC to group; nil when healed
	cuts   map[cut]bool   // one-way cuts: frames from one MAC to another dropped
	impair map[mac]impair // impaired links: of the hosts' MACs; nil when healed

	frames, dropped, spoofed, partitioned, lost, delayed atomic.Uint64
}

func newSwitch(gateway mac) *ethSwitch {
	return &ethSwitch{gateway: gateway, ports: map[*port]struct{}{}, cam: map[mac]*port{}}
}

// add attaches a new port. A port with a fixed MAC (the gateway) is
// pinned to it at once; a VM's port is pinned by its first frame.
func (s *ethSwitch) add(name string, fixed *mac) *port {
	p := &port{name: name, out: make(chan []byte, queueDepth), done: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	if fixed != nil {
		p.mac, p.hasMAC = *fixed, true
		s.cam[*fixed] = p
	}
	s.ports[p] = struct{}{}
	return p
}

// remove detaches p and forgets the addresses learned on it.
func (s *ethSwitch) remove(p *port) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.ports[p]; !ok {
		return
	}
	delete(s.ports, p)
	for m, q := range s.cam {
		if q == p {
			delete(s.cam, m)
		}
	}
	close(p.done)
}

// stats returns the counters; gateway ports are not counted in Ports.
func (s *ethSwitch) stats() SwitchStats {
	s.mu.Lock()
	n := len(s.ports)
	if _, ok := s.cam[s.gateway]; ok {
		n--
	}
	s.mu.Unlock()
	return SwitchStats{Ports: n, Frames: s.frames.Load(), Dropped: s.dropped.Load(), Spoofed: s.spoofed.Load(), Partitioned: s.partitioned.Load(),
		Lost: s.lost.Load(), Delayed: s.delayed.Load()}
}

// partition sets the partition: frames pass only between MACs of the
// same group, and to and from the gateway. A MAC in no group is in group
// 0. nil heals.
func (s *ethSwitch) partition(group map[mac]int) {
	s.mu.Lock()
	s.group = group
	s.mu.Unlock()
}

// cut is a one-way cut: frames from from to to are dropped, frames the
// other way pass.
type cut struct{ from, to mac }

// cutOneWay sets the one-way cuts; nil heals them.
func (s *ethSwitch) cutOneWay(cuts map[cut]bool) {
	s.mu.Lock()
	s.cuts = cuts
	s.mu.Unlock()
}

// allowed reports whether a frame from src may reach port q. Caller holds mu.
func (s *ethSwitch) allowed(src mac, q *port) bool {
	if src == s.gateway || q.mac == s.gateway {
		return true
	}
	if s.cuts[cut{src, q.mac}] {
		return false
	}
	return s.group == nil || s.group[src] == s.group[q.mac] // unpinned q: group of the zero MAC, 0
}

// ingress switches frame f received on port p. f must not change
// afterwards: a broadcast shares it between ports.
func (s *ethSwitch) ingress(p *port, f []byte) {
	s.frames.Add(1)
	if len(f) < minFrame || len(f) > maxFrame {
		s.dropped.Add(1)
		return
	}
	dst, src := toMAC(f[0:6]), toMAC(f[6:12])
	if src.multicast() {
		s.dropped.Add(1)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.ports[p]; !ok {
		return // removed meanwhile
	}
	if !p.hasMAC {
		p.mac, p.hasMAC = src, true
	} else if p.mac != src {
		s.spoofed.Add(1)
		return
	}
	// The newest port to send from a MAC owns it: a VM that restarts
	// reconnects with the same address before its old connection is gone.
	s.cam[src] = p
	if q, ok := s.cam[dst]; ok && !dst.multicast() {
		if q != p {
			s.send(src, q, f)
		}
		return
	}
	for q := range s.ports { // broadcast, multicast, unknown unicast: flood
		if q != p {
			s.send(src, q, f)
		}
	}
}

// impair is how a host's links to the other hosts are degraded: each
// frame it sends or receives is lost with probability loss, and waits
// delay before delivery.
type impair struct {
	loss  float64
	delay time.Duration
}

// setImpair sets the impaired links; nil heals them.
func (s *ethSwitch) setImpair(m map[mac]impair) {
	s.mu.Lock()
	s.impair = m
	s.mu.Unlock()
}

// linkImpair returns how the link from src to q is degraded: the
// impairments of both ends together. The gateway's links never are.
// Caller holds mu.
func (s *ethSwitch) linkImpair(src mac, q *port) impair {
	if src == s.gateway || q.mac == s.gateway || len(s.impair) == 0 {
		return impair{}
	}
	a, b := s.impair[src], s.impair[q.mac]
	return impair{loss: 1 - (1-a.loss)*(1-b.loss), delay: a.delay + b.delay}
}

// send queues f for q. Caller holds mu.
func (s *ethSwitch) send(src mac, q *port, f []byte) {
	if !s.allowed(src, q) {
		s.partitioned.Add(1)
		return
	}
	im := s.linkImpair(src, q)
	if im.loss > 0 && rand.Float64() < im.loss {
		s.lost.Add(1)
		return
	}
	if im.delay > 0 {
		// Held back outside the lock; frames of one link delayed alike
		// mostly keep their order, as on a longer path.
		s.delayed.Add(1)
		time.AfterFunc(im.delay, func() {
			if !q.enqueue(f) {
				s.dropped.Add(1)
			}
		})
		return
	}
	if !q.enqueue(f) {
		s.dropped.Add(1)
	}
}

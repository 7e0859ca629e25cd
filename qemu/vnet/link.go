package vnet

import (
	"sync"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// frameLink is the gateway's NIC in its gVisor stack: a raw link whose
// frames (Ethernet headers included; gVisor's ethernet.Endpoint wraps it
// to add and parse them) go to and come from a function. It stands in
// for gvisor-tap-vsock's tap.LinkEndpoint, minus its switch coupling.
type frameLink struct {
	addr tcpip.LinkAddress
	send func(frame []byte) // hands an outgoing frame to the switch

	mu         sync.RWMutex
	dispatcher stack.NetworkDispatcher
}

var _ stack.LinkEndpoint = (*frameLink)(nil)

// deliver passes an incoming frame up the stack.
func (l *frameLink) deliver(frame []byte) {
	l.mu.RLock()
	d := l.dispatcher
	l.mu.RUnlock()
	if d == nil {
		return
	}
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
	defer pkt.DecRef()
	d.DeliverNetworkPacket(0, pkt) // ethernet.Endpoint reads the type from the header
}

// WritePackets sends frames out; it never blocks (the switch queues).
func (l *frameLink) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	n := 0
	for _, pkt := range pkts.AsSlice() {
		v := pkt.ToView()
		f := append([]byte(nil), v.AsSlice()...)
		v.Release()
		l.send(f)
		n++
	}
	return n, nil
}

// MTU is the Ethernet payload plus its header: ethernet.Endpoint takes
// the header off again.
func (l *frameLink) MTU() uint32                      { return 1500 + header.EthernetMinimumSize }
func (l *frameLink) SetMTU(uint32)                    {}
func (l *frameLink) MaxHeaderLength() uint16          { return 0 }
func (l *frameLink) LinkAddress() tcpip.LinkAddress   { return l.addr }
func (l *frameLink) SetLinkAddress(tcpip.LinkAddress) {}

// Capabilities claims no offloads: guests send full checksums (QEMU
// offers no checksum offload without a vnet header), and the stack checks
// them.
func (l *frameLink) Capabilities() stack.LinkEndpointCapabilities { return 0 }

func (l *frameLink) Attach(d stack.NetworkDispatcher) {
	l.mu.Lock()
	l.dispatcher = d
	l.mu.Unlock()
}

func (l *frameLink) IsAttached() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.dispatcher != nil
}

func (l *frameLink) Wait()                                   {}
func (l *frameLink) ARPHardwareType() header.ARPHardwareType { return header.ARPHardwareNone }
func (l *frameLink) AddHeader(*stack.PacketBuffer)           {}
func (l *frameLink) ParseHeader(*stack.PacketBuffer) bool    { return true }
func (l *frameLink) Close()                                  {}
func (l *frameLink) SetOnCloseAction(func())                 {}

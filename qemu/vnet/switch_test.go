package vnet

import (
	"bufio"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rawPort is the VM end of a switch port: framed frames over a pipe.
type rawPort struct {
	t    *testing.T
	c    net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	done chan error // serveStream's result
}

func attachRaw(t *testing.T, s *ethSwitch) *rawPort {
	vm, sw := net.Pipe()
	p := &rawPort{t: t, c: vm, r: bufio.NewReader(vm), w: bufio.NewWriter(vm), done: make(chan error, 1)}
	port := s.add("test", nil) // now: a frame sent next must find this port
	go func() { p.done <- s.serveStream(port, sw) }()
	t.Cleanup(func() { vm.Close() })
	return p
}

func (p *rawPort) send(dst, src mac, payload string) {
	p.t.Helper()
	require.NoError(p.t, writeFrame(p.w, frame(dst, src, payload)))
	require.NoError(p.t, p.w.Flush())
}

// recv reads the next frame, failing after a deadline.
func (p *rawPort) recv() []byte {
	p.t.Helper()
	p.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := readFrame(p.r)
	require.NoError(p.t, err)
	return f
}

func frame(dst, src mac, payload string) []byte {
	f := make([]byte, 14, 14+len(payload))
	copy(f[0:6], dst[:])
	copy(f[6:12], src[:])
	binary.BigEndian.PutUint16(f[12:14], 0x88b5) // local experimental ethertype
	return append(f, payload...)
}

var (
	macA = mac{0x52, 0x54, 0, 0, 0, 0xa}
	macB = mac{0x52, 0x54, 0, 0, 0, 0xb}
	macC = mac{0x52, 0x54, 0, 0, 0, 0xc}
)

// TestStuckPortDropsOnlyItsOwn: a VM that stops reading (QEMU does, when
// its guest is paused) loses its own frames; everyone else's keep
// flowing.
func TestStuckPortDropsOnlyItsOwn(t *testing.T) {
	s := newSwitch(gatewayMAC)
	a, b, _ := attachRaw(t, s), attachRaw(t, s), attachRaw(t, s) // the third never reads

	// Broadcasts in lockstep: each must reach b before the next goes.
	// The stuck port's writer takes frames until it blocks: at once on
	// its first flush when it keeps up, or, when it was kept from running
	// while frames queued, once its buffer is full. So it holds at most
	// a buffer's worth (plus the frame it blocks in) beyond its queue;
	// enough frames go that it must drop at least twice its queue.
	wire := 4 + len(frame(broadcastMAC, macA, "frame a")) // length prefix and frame
	held := streamBuffer/wire + 1
	n := 3*queueDepth + held
	for i := range n {
		want := "frame " + string(rune('a'+i%26))
		a.send(broadcastMAC, macA, want)
		got := b.recv()
		require.Equal(t, want, string(got[14:]), "frame %d", i)
	}
	st := s.stats()
	assert.Equal(t, 3, st.Ports)
	assert.Equal(t, uint64(n), st.Frames)
	// The stuck port took its queue's worth and what its writer holds,
	// and dropped the rest.
	assert.LessOrEqual(t, st.Dropped, uint64(n-queueDepth))
	assert.GreaterOrEqual(t, st.Dropped, uint64(n-queueDepth-held))
}

func TestSwitchLearnsAndFilters(t *testing.T) {
	s := newSwitch(gatewayMAC)
	a, b, c := attachRaw(t, s), attachRaw(t, s), attachRaw(t, s)

	// Unknown unicast floods; then the switch knows where B and C are.
	a.send(macB, macA, "who")
	assert.Equal(t, "who", string(b.recv()[14:]))
	assert.Equal(t, "who", string(c.recv()[14:]))
	b.send(macA, macB, "b")
	assert.Equal(t, "b", string(a.recv()[14:]))
	c.send(macA, macC, "c")
	assert.Equal(t, "c", string(a.recv()[14:]))
	a.send(macC, macA, "to c")
	assert.Equal(t, "to c", string(c.recv()[14:]), "unicast to a learned address")

	// A port is pinned to its first source address: b cannot pose as c.
	b.send(macA, macC, "spoofed")
	b.send(macA, macB, "honest")
	assert.Equal(t, "honest", string(a.recv()[14:]))
	assert.Equal(t, uint64(1), s.stats().Spoofed)

	// A runt frame and a group source address are dropped; the port
	// lives on.
	require.NoError(t, writeFrame(a.w, []byte{1, 2, 3}))
	require.NoError(t, a.w.Flush())
	a.send(macB, broadcastMAC, "bad source")
	a.send(macB, macA, "after")
	assert.Equal(t, "after", string(b.recv()[14:]))
	assert.Equal(t, uint64(2), s.stats().Dropped)

	// A length beyond any frame means the stream is out of step: the
	// port is closed.
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], maxFrame+1)
	a.w.Write(hdr[:])
	a.w.Flush()
	select {
	case err := <-a.done:
		assert.ErrorContains(t, err, "longer than")
	case <-time.After(10 * time.Second):
		t.Fatal("the port survived a bad frame length")
	}
	assert.Equal(t, 2, s.stats().Ports)
}

// TestSwitchOneWayCut: a one-way cut drops the frames from one MAC to
// another and lets the other direction and every other pair through;
// the gateway is never cut.
func TestSwitchOneWayCut(t *testing.T) {
	s := newSwitch(gatewayMAC)
	a, b, c := attachRaw(t, s), attachRaw(t, s), attachRaw(t, s)
	gw := s.add("gateway", &gatewayMAC)
	// Pin each port to its MAC, a's first, so that later unicasts to it
	// do not flood.
	a.send(broadcastMAC, macA, "hello")
	for _, p := range []*rawPort{b, c} {
		assert.Equal(t, "hello", string(p.recv()[14:]))
	}
	assert.Equal(t, "hello", string((<-gw.out)[14:]))
	b.send(macA, macB, "b")
	assert.Equal(t, "b", string(a.recv()[14:]))
	c.send(macA, macC, "c")
	assert.Equal(t, "c", string(a.recv()[14:]))
	a.send(macB, macA, "a")
	assert.Equal(t, "a", string(b.recv()[14:]))

	s.cutOneWay(map[cut]bool{{macA, macB}: true})
	a.send(macB, macA, "cut")
	// a's frames are switched in order: once c has the next one, the cut
	// one was switched too.
	a.send(macC, macA, "to c")
	assert.Equal(t, "to c", string(c.recv()[14:]))
	c.send(macB, macC, "from c")
	assert.Equal(t, "from c", string(b.recv()[14:]), "a frame from a reached b across the cut")
	b.send(macA, macB, "back")
	assert.Equal(t, "back", string(a.recv()[14:]), "the other direction passes")
	a.send(broadcastMAC, macA, "all")
	assert.Equal(t, "all", string(c.recv()[14:]))
	c.send(macB, macC, "after the broadcast")
	assert.Equal(t, "after the broadcast", string(b.recv()[14:]), "a broadcast from a reached b across the cut")
	assert.Equal(t, "all", string((<-gw.out)[14:]), "the gateway is never cut")
	assert.Equal(t, uint64(2), s.stats().Partitioned)

	s.cutOneWay(nil)
	a.send(macB, macA, "healed")
	assert.Equal(t, "healed", string(b.recv()[14:]))
}

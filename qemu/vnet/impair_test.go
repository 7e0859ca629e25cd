package vnet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSwitchImpair: an impaired host's frames to and from the other hosts
// are lost at its rate or held back by its delay; the gateway's never.
func TestSwitchImpair(t *testing.T) {
	s := newSwitch(gatewayMAC)
	a, b := attachRaw(t, s), attachRaw(t, s)
	gw := s.add("gateway", &gatewayMAC)
	a.send(broadcastMAC, macA, "hello")
	assert.Equal(t, "hello", string(b.recv()[14:]))
	assert.Equal(t, "hello", string((<-gw.out)[14:]))
	b.send(macA, macB, "pin b")
	assert.Equal(t, "pin b", string(a.recv()[14:]))

	// Every frame lost (the network refuses a loss of 1; the switch
	// takes it): nothing between a and b either way, the gateway's pass.
	s.setImpair(map[mac]impair{macA: {loss: 1}})
	a.send(macB, macA, "lost")
	b.send(macA, macB, "lost too")
	a.send(gatewayMAC, macA, "to the gateway")
	assert.Equal(t, "to the gateway", string((<-gw.out)[14:]), "the gateway's link is never impaired")
	waitStat(t, s, func(st SwitchStats) bool { return st.Lost == 2 }, "two frames lost")

	// Half of them lost: of 400, about 200.
	s.setImpair(map[mac]impair{macA: {loss: 0.5}})
	before := s.stats()
	for range 400 {
		a.send(macB, macA, "coin")
	}
	waitStat(t, s, func(st SwitchStats) bool { return st.Frames-before.Frames == 400 }, "400 frames switched")
	lost := s.stats().Lost - before.Lost
	assert.InDelta(t, 200, float64(lost), 100, "lost %d of 400 at a loss of one half", lost)
	for range 400 - lost {
		assert.Equal(t, "coin", string(b.recv()[14:]))
	}

	// Delayed: a frame reaches b no sooner than the delay after it left.
	s.setImpair(map[mac]impair{macA: {delay: 300 * time.Millisecond}})
	sent := time.Now()
	a.send(macB, macA, "late")
	assert.Equal(t, "late", string(b.recv()[14:]))
	assert.GreaterOrEqual(t, time.Since(sent), 300*time.Millisecond, "delivered before its delay")
	assert.NotZero(t, s.stats().Delayed)

	s.setImpair(nil)
	a.send(macB, macA, "healed")
	assert.Equal(t, "healed", string(b.recv()[14:]))
}

// waitStat waits until the switch's counters satisfy ok.
func waitStat(t *testing.T, s *ethSwitch, ok func(SwitchStats) bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok(s.stats()) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s (stats %+v)", what, s.stats())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestImpair: TCP between two guests still works across an impaired link,
// each round trip no shorter than the delay both ways; the network refuses
// what is not an impairment; Partition() heals it.
func TestImpair(t *testing.T) {
	n := testNetwork(t)
	exchange := peerExchange(t, leased(t, n, mac1), leased(t, n, mac2))

	// A slow link: the SYN and its answer each wait 100 ms. (Loss is
	// the switch's to prove, TestSwitchImpair: how soon TCP gets through
	// a lossy link is up to its retransmissions.)
	slow := Impairment{Hosts: []string{"n1"}, Delay: 100 * time.Millisecond}
	require.NoError(t, n.Impair(slow))
	took, err := exchange(30 * time.Second)
	require.NoError(t, err, "TCP across a slow link")
	assert.GreaterOrEqual(t, took, 200*time.Millisecond, "connected sooner than the delay allows")
	assert.NotZero(t, n.Stats().Switch.Delayed)

	// Impair again replaces the host's impairment.
	im := Impairment{Hosts: []string{"n1"}, Loss: 0.2, Delay: 50 * time.Millisecond}
	require.NoError(t, n.Impair(im))
	assert.Equal(t, []Impairment{im}, n.Status().Impaired)

	for _, tt := range []struct {
		im   Impairment
		want string
	}{
		{Impairment{Loss: 0.1}, "impair: name the hosts"},
		{Impairment{Hosts: []string{"n1"}, Loss: 1}, "impair: loss 1: want at least 0 and under 1 (all frames lost is a partition)"},
		{Impairment{Hosts: []string{"n1"}, Loss: -0.1}, "impair: loss -0.1: want at least 0 and under 1 (all frames lost is a partition)"},
		{Impairment{Hosts: []string{"n1"}, Delay: time.Minute}, "impair: delay 1m0s: want 0 to 10s"},
		{Impairment{Hosts: []string{"n1"}}, "impair: no loss and no delay: nothing to impair (heal undoes an impairment)"},
		{Impairment{Hosts: []string{"n9"}, Loss: 0.1}, `impair: host "n9": ` + ErrUnknownHost.Error()},
	} {
		assert.EqualError(t, n.Impair(tt.im), tt.want)
	}
	assert.Equal(t, []Impairment{im}, n.Status().Impaired, "a refused impairment changes nothing")

	require.NoError(t, n.Partition())
	assert.Empty(t, n.Status().Impaired)
	_, err = exchange(30 * time.Second)
	require.NoError(t, err, "healed")
}

package vnet

import (
	"context"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServeAndClient(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, Domain: "demo.internal", Hosts: []Host{{Name: "n1", MAC: mac1, IP: ip1}}, Logf: t.Logf}
	served := make(chan error, 1)
	go func() { served <- Serve(context.Background(), cfg) }()
	ctx := ctxT(t, 30*time.Second)
	c := NewClient(dir)
	require.NoError(t, c.Wait(ctx))

	// One network per directory.
	assert.ErrorIs(t, Serve(ctx, cfg), ErrRunning)

	// A guest on the switch socket, and a host added over the API that it
	// can then look up.
	g := newGuest(t, SwitchSocket(dir), mac1)
	g.configure(netip.PrefixFrom(ip1, 24), netip.Addr{})
	require.NoError(t, c.AddHost(ctx, Host{Name: "n2", MAC: mac2, IP: ip2, SkipSRV: true}))
	m, err := g.query(ctx, "udp", gw, "n2.demo.internal.", dns.TypeA)
	require.NoError(t, err)
	require.Len(t, m.Answer, 1)
	assert.Equal(t, "10.88.0.12", m.Answer[0].(*dns.A).A.String())

	require.NoError(t, c.SetSRV(ctx, []SRV{{Name: "_etcd-server-ssl._tcp", Target: "ghost", Port: 2380}}))
	require.NoError(t, c.Partition(ctx, []string{"n1"}))
	require.NoError(t, c.CutOneWay(ctx, OneWay{From: []string{"n2"}, To: []string{"n1"}}))
	require.NoError(t, c.Impair(ctx, Impairment{Hosts: []string{"n2"}, Loss: 0.25, Delay: 20 * time.Millisecond}))
	host, err := c.Forward(ctx, "", netip.AddrPortFrom(ip1, 2379))
	require.NoError(t, err)

	st, err := c.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, "10.88.0.0/24", st.Subnet)
	assert.Equal(t, gw, st.Gateway)
	assert.Equal(t, []Host{{Name: "n1", MAC: mac1, IP: ip1}, {Name: "n2", MAC: mac2, IP: ip2, SkipSRV: true}}, st.Hosts)
	assert.Equal(t, []SRV{{Name: "_etcd-server-ssl._tcp", Target: "ghost", Port: 2380}}, st.SRV)
	assert.Equal(t, [][]string{{"n1"}}, st.Partition)
	assert.Equal(t, []OneWay{{From: []string{"n2"}, To: []string{"n1"}}}, st.OneWay)
	assert.Equal(t, []Impairment{{Hosts: []string{"n2"}, Loss: 0.25, Delay: 20 * time.Millisecond}}, st.Impaired)
	assert.Equal(t, []Forward{{Host: host, Guest: netip.AddrPortFrom(ip1, 2379)}}, st.Forwards)
	assert.Equal(t, 1, st.Stats.Switch.Ports)
	assert.Equal(t, uint64(1), st.Stats.DNS.Answers)

	// null restores the generated records; [] removes them all.
	require.NoError(t, c.SetSRV(ctx, nil))
	st, err = c.Status(ctx)
	require.NoError(t, err)
	assert.Nil(t, st.SRV)
	require.NoError(t, c.SetSRV(ctx, []SRV{}))
	st, err = c.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, []SRV{}, st.SRV)

	// Errors come back as the package's sentinels.
	assert.ErrorIs(t, c.RemoveHost(ctx, "n9"), ErrUnknownHost)
	assert.ErrorIs(t, c.Partition(ctx, []string{"n9"}), ErrUnknownHost)
	assert.ErrorIs(t, c.CutOneWay(ctx, OneWay{From: []string{"n9"}, To: []string{"n1"}}), ErrUnknownHost)
	assert.ErrorContains(t, c.CutOneWay(ctx, OneWay{From: []string{"n1"}, To: []string{"n1"}}), "on both sides")
	assert.ErrorIs(t, c.Impair(ctx, Impairment{Hosts: []string{"n9"}, Loss: 0.1}), ErrUnknownHost)
	assert.ErrorContains(t, c.Impair(ctx, Impairment{Hosts: []string{"n1"}, Loss: 1}), "all frames lost is a partition")
	assert.ErrorIs(t, c.AddHost(ctx, Host{Name: "n3", MAC: mac3, IP: ip1}), ErrConflict)
	assert.ErrorIs(t, c.RemoveForward(ctx, netip.MustParseAddrPort("127.0.0.1:1")), ErrNoForward)
	err = c.SetSRV(ctx, []SRV{{Name: "_etcd-server-ssl._tcp.example.com.", Target: "x", Port: 1}})
	assert.ErrorContains(t, err, "not under demo.internal.")
	require.NoError(t, c.Partition(ctx))
	require.NoError(t, c.RemoveHost(ctx, "n2"))
	require.NoError(t, c.RemoveForward(ctx, host))

	// Shutdown returns once the network is down: the guest is cut off and
	// the sockets are gone.
	require.NoError(t, c.Shutdown(ctx))
	select {
	case err := <-served:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("Serve did not return after Shutdown")
	}
	g.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = g.conn.Read(make([]byte, 1))
	assert.NotErrorIs(t, err, os.ErrDeadlineExceeded, "the guest's connection outlived the network")
	for _, s := range []string{SwitchSocket(dir), ControlSocket(dir)} {
		_, err := os.Stat(s)
		assert.ErrorIs(t, err, os.ErrNotExist, s)
	}
	_, err = net.Dial("tcp", host.String())
	assert.Error(t, err, "a forward outlived the network")
	assert.Error(t, c.Wait(ctxT(t, 100*time.Millisecond)))
}

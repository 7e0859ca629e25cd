// The real-QEMU test is in package vnet_test: package qemu is to import
// vnet (Config wiring), and an in-package test importing qemu would then
// be an import cycle.
package vnet_test

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/image"
	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/qemu"
	"github.com/etcdbox/etcdbox/qemu/vnet"
	"github.com/etcdbox/etcdbox/seed"
)

// bootDeadline bounds a boot to "etcd ready" under software emulation.
const bootDeadline = 4 * time.Minute

// TestVMOnNetwork boots a real image whose only configured NIC is on the
// network: the guest leases its static address over DHCP, etcd comes up
// on it, and the host reads from etcd over mutual TLS through a Forward.
func TestVMOnNetwork(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU; runs without -short")
	}
	const name = "n1"
	mac := qemu.MAC(name, 1)
	ip := netip.MustParseAddr("10.88.0.11")
	pkiDir, img := buildImage(t, mac)

	// Sockets go in a short directory: unix socket paths have 107 bytes.
	netDir, err := os.MkdirTemp("", "vnet-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(netDir) })
	n, err := vnet.New(vnet.Config{
		Dir: netDir, Domain: "vnet.internal",
		Hosts: []vnet.Host{{Name: name, MAC: mac, IP: ip}},
		Logf:  t.Logf,
	})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, n.Close()) })

	args, err := vnet.QEMUArgs(vnet.SwitchSocket(netDir), "vnet0", mac)
	require.NoError(t, err)
	code, vars := testenv.OVMF(t)
	ctx, cancel := context.WithTimeout(context.Background(), bootDeadline+time.Minute)
	defer cancel()
	// qemu.Config always adds a NIC on QEMU's user network (net0, the
	// guest's eth0); the seed makes the init configure this NIC, matched
	// by its MAC, instead.
	vm, err := qemu.Start(ctx, qemu.Config{
		Name: name, Dir: filepath.Join(t.TempDir(), "vm"), Image: img, Overlay: true,
		OVMFCode: code, OVMFVars: vars, Args: args,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		vm.Kill()
		<-vm.Done()
		if t.Failed() {
			t.Logf("console (last 60 lines):\n%s", vm.ConsoleTail(60))
		}
	})

	wait := func(text string) qemu.ConsoleMatch {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, bootDeadline)
		defer cancel()
		m, err := vm.WaitConsole(wctx, 0, text, "etcdbox: fatal:", "etcdbox: seed error:")
		require.NoError(t, err, "console tail:\n%s", vm.ConsoleTail(40))
		require.Equal(t, text, m.Text, "console: %s", m.Line)
		return m
	}
	m := wait("etcdbox: network: ")
	t.Logf("console: %s", qemu.Printable(m.Line))
	assert.Contains(t, m.Line, "[10.88.0.11/24]", "the guest's address is not its static lease")
	assert.Contains(t, m.Line, "via []", "the guest got a route: nothing should be routed")
	assert.GreaterOrEqual(t, n.Stats().DHCP.Acks, uint64(1))
	wait("etcdbox: etcd ready")

	host, err := n.Forward("127.0.0.1:0", netip.AddrPortFrom(ip, 2379))
	require.NoError(t, err)
	endpoint := "https://" + host.String()
	out, err := testenv.Etcdctl(t, pkiDir, endpoint, "put", "vnet", "works")
	require.NoError(t, err, out)
	out, err = testenv.Etcdctl(t, pkiDir, endpoint, "get", "vnet", "--print-value-only", "--consistency=l")
	require.NoError(t, err, out)
	assert.Equal(t, "works", out)
	out, err = testenv.Etcdctl(t, pkiDir, endpoint, "member", "list", "--write-out=simple")
	require.NoError(t, err, out)
	assert.Contains(t, out, name)
	st := n.Stats()
	t.Logf("network stats: %+v", st)
	assert.NotZero(t, st.Forward.Conns)
	assert.Zero(t, st.Forward.Failed)
	assert.Zero(t, st.Gateway.NotForUs, "the guest sent packets to be routed")
}

// buildImage builds a raw image whose seed names the network's NIC by
// MAC, with a fresh CA in the returned PKI directory.
func buildImage(t *testing.T, mac net.HardwareAddr) (pkiDir, img string) {
	t.Helper()
	dir := t.TempDir()
	pkiDir = filepath.Join(dir, "pki")
	require.NoError(t, pki.Init(pkiDir, false))
	s := &seed.Seed{
		Cluster: "vnet", Name: "n1",
		Network: seed.Network{Interfaces: []seed.Interface{{MAC: mac.String(), DHCP: true}}},
	}
	var err error
	s.PKI, _, err = seed.IssuingPKIFrom(pkiDir, s.NodeScope())
	require.NoError(t, err)
	data, err := s.Marshal()
	require.NoError(t, err)
	seedPath := filepath.Join(dir, "seed.yaml")
	require.NoError(t, os.WriteFile(seedPath, data, 0o600))
	vmlinuz, modules := testenv.Kernel(t)
	img = filepath.Join(dir, "etcdbox.img")
	_, err = image.Build(context.Background(), image.Config{
		Kernel: vmlinuz, Modules: modules,
		Init:       testenv.Bin(t, "init"), // and its own etcd
		Bootloader: testenv.Bootloader(t),
		Seed:       seedPath, Output: img, Version: "vnet-test",
		Compression: image.CompressionFast, // the e2e tier boots the default
	})
	require.NoError(t, err)
	return pkiDir, img
}

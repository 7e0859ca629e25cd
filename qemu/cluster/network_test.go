package cluster

import (
	"cmp"
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/qemu"
	"github.com/etcdbox/etcdbox/qemu/vnet"
)

// shortDir is a temporary directory with a short path: unix socket paths
// have at most 107 bytes, and t.TempDir's are long.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cl-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestNetworkDaemon starts the network as a detached daemon process (this
// test binary, see TestMain), registers a node twice (its forwards are
// reused), stops it, and starts a new daemon that gives the node its old
// host ports again, or new ones where the old ones are taken.
func TestNetworkDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes; not in -short")
	}
	t.Setenv(netdEnv, "1") // the daemon, a child, inherits it
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := shortDir(t)
	c, err := newCluster(Config{Dir: dir, Netd: []string{exe}, Log: t.Logf, GuestPorts: []int{9999}, Domain: "t.internal"},
		State{Domain: "t.internal"})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, c.ensureNetwork(ctx))
	pid := c.st.Network.PID
	t.Cleanup(func() { c.stopNetwork(context.Background()) })
	require.NotZero(t, pid)
	netDir := filepath.Join(dir, NetDir)
	assert.True(t, daemonAlive(pid, netDir))
	assert.NotEqual(t, os.Getpid(), pid)
	require.NoError(t, c.ensureNetwork(ctx), "a network that answers is kept")
	assert.Equal(t, pid, c.st.Network.PID)

	n := Node{Name: "n1", IP: nodeIP(1)}
	require.NoError(t, c.register(ctx, &n))
	assert.Equal(t, qemu.MAC("n1", 0).String(), n.MAC)
	assert.NotZero(t, n.ClientPort)
	assert.NotZero(t, n.APIPort)
	assert.NotZero(t, n.HostPort(9999))
	assert.NotZero(t, n.HostPort(HTTPPort))
	assert.Equal(t, "https://127.0.0.1:"+strconv.Itoa(n.HostPort(HTTPPort)), n.HTTPEndpoint())
	again := n
	require.NoError(t, c.register(ctx, &again))
	assert.Equal(t, n, again, "registering again keeps the forwards")
	st, err := c.net.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, "t.internal", st.Domain)
	require.Len(t, st.Hosts, 1)
	assert.Equal(t, "n1", st.Hosts[0].Name)
	assert.Len(t, st.Forwards, 4, "client, HTTP, API and 9999")

	require.NoError(t, c.stopNetwork(ctx))
	assert.False(t, daemonAlive(pid, netDir), "the daemon still runs after stop")
	_, err = c.net.Status(ctx)
	assert.Error(t, err)
	logText, err := os.ReadFile(filepath.Join(netDir, NetdLog))
	require.NoError(t, err)
	assert.Contains(t, string(logText), "netd: pid "+strconv.Itoa(pid))

	// Resume: a new daemon knows nothing; the node asks for its ports.
	// The API port is taken meanwhile, so it gets another.
	taken, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(n.APIPort))
	require.NoError(t, err)
	defer taken.Close()
	require.NoError(t, c.ensureNetwork(ctx))
	assert.NotEqual(t, pid, c.st.Network.PID)
	resumed := n
	require.NoError(t, c.register(ctx, &resumed))
	assert.Equal(t, n.ClientPort, resumed.ClientPort, "the client port comes back")
	assert.Equal(t, n.HostPort(9999), resumed.HostPort(9999))
	assert.NotEqual(t, n.APIPort, resumed.APIPort, "a taken port is replaced")
	require.NoError(t, c.stopNetwork(ctx))
}

// TestNetworkInProcess serves the network inside the test process
// (Config.Netd nil), as the end-to-end tests do.
func TestNetworkInProcess(t *testing.T) {
	dir := shortDir(t)
	c, err := newCluster(Config{Dir: dir, Log: t.Logf}, State{Domain: DefaultDomain})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, c.ensureNetwork(ctx))
	assert.Zero(t, c.st.Network.PID)
	n := Node{Name: "n2", IP: nodeIP(2)}
	require.NoError(t, c.register(ctx, &n))
	st, err := c.net.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, []vnet.Forward{
		{Host: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(n.ClientPort)), Guest: netip.MustParseAddrPort("10.88.0.12:2379")},
		{Host: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(n.HostPort(HTTPPort))), Guest: netip.MustParseAddrPort("10.88.0.12:2382")},
		{Host: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(n.APIPort)), Guest: netip.MustParseAddrPort("10.88.0.12:9379")},
	}, sortForwards(st.Forwards))
	require.NoError(t, c.stopNetwork(ctx))
	assert.NoFileExists(t, vnet.SwitchSocket(filepath.Join(dir, NetDir)))
}

func TestNetworkDirTooLong(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a-directory-name-that-makes-the-socket-path-longer-than-a-sockaddr-holds-0123456789")
	c, err := newCluster(Config{Dir: dir}, State{})
	require.NoError(t, err)
	err = c.ensureNetwork(context.Background())
	assert.ErrorContains(t, err, "use a shorter directory")
}

func sortForwards(fs []vnet.Forward) []vnet.Forward {
	out := slices.Clone(fs)
	slices.SortFunc(out, func(a, b vnet.Forward) int { return cmp.Compare(a.Guest.Port(), b.Guest.Port()) })
	return out
}

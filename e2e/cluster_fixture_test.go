package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdbox/etcdbox/image"
	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/qemu/cluster"
)

// clusterDeadline bounds `up` of three nodes and each `add` under
// software emulation on two cores (about a minute each here).
const clusterDeadline = 5 * time.Minute

// clusterImage builds, in a directory removed when the test ends, an
// image with the test-hook init and no seed: every node of a cluster boots
// it, and gets its seed (no node name) from the cluster's cidata volume
// and its name from DHCP.
func clusterImage(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("QEMU tier: runs in make test, not in go test -short")
	}
	img := filepath.Join(t.TempDir(), "etcdbox.img")
	vmlinuz, modules := testenv.Kernel(t)
	start := time.Now()
	_, err := image.Build(context.Background(), image.Config{
		Kernel: vmlinuz, Modules: modules,
		Etcd: testenv.Bin(t, "etcd"), Init: testenv.Bin(t, "init-testhooks"),
		Bootloader: testenv.Bootloader(t),
		Output:     img, Version: "e2e-cluster",
	})
	require.NoError(t, err)
	t.Logf("built the cluster image in %s", time.Since(start).Round(time.Millisecond))
	return img
}

// upCluster brings up a cluster of n nodes in a fresh directory, with the
// network inside the test process and the test-hook port forwarded, and
// powers it off when the test ends (logging every console tail first
// when the test failed).
func upCluster(t *testing.T, n int) *cluster.Cluster {
	t.Helper()
	img := clusterImage(t)
	code, vars := testenv.OVMF(t)
	cfg := cluster.Config{
		Dir: t.TempDir(), Image: img, OVMFCode: code, OVMFVars: vars,
		MemoryMiB: 768, GuestPorts: []int{hookPort}, Log: t.Logf,
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterDeadline)
	defer cancel()
	start := time.Now()
	c, err := cluster.Up(ctx, cfg, n)
	if c != nil {
		t.Cleanup(func() {
			if t.Failed() {
				for _, node := range c.Nodes() {
					if vm, err := c.VM(node.Name); err == nil {
						t.Logf("console of %s (last 60 lines):\n%s", node.Name, vm.ConsoleTail(60))
					}
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := c.Down(ctx, 30*time.Second); err != nil {
				t.Errorf("down: %v", err)
			}
		})
	}
	require.NoError(t, err)
	t.Logf("up: %d voting members after %s", n, time.Since(start).Round(time.Second))
	return c
}

// client returns an etcd client of one node, closed when the test ends.
func client(t *testing.T, c *cluster.Cluster, name string) *clientv3.Client {
	t.Helper()
	n, ok := c.Node(name)
	require.True(t, ok, "no node %s", name)
	tc, err := c.TLS()
	require.NoError(t, err)
	cl, err := clientv3.New(clientv3.Config{
		Endpoints: []string{n.Endpoint()}, TLS: tc, DialTimeout: 10 * time.Second, Logger: zap.NewNop(),
	})
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	return cl
}

// processStart returns the start time of node's etcd process, as etcd's
// own process_start_time_seconds metric says: it changes with every etcd
// restart and every reboot, and with nothing else.
func processStart(t *testing.T, c *cluster.Cluster, name string) string {
	t.Helper()
	n, _ := c.Node(name)
	tc, err := c.TLS()
	require.NoError(t, err)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(n.Endpoint() + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "process_start_time_seconds "); ok {
			return v
		}
	}
	t.Fatalf("%s: no process_start_time_seconds in /metrics", name)
	return ""
}

// resolveResult is the answer of the test hook GET /hook/resolve.
type resolveResult struct {
	status  int
	body    string
	elapsed time.Duration // as the guest measured it
	wall    time.Duration // as the host measured it, forwarding included
}

// resolve asks node's own resolver (the network's DNS, from DHCP) for
// name through the test hook.
func resolve(t *testing.T, c *cluster.Cluster, node, name string) resolveResult {
	t.Helper()
	n, _ := c.Node(node)
	port := n.HostPort(hookPort)
	require.NotZero(t, port, "the hook port of %s is not forwarded", node)
	hc := &http.Client{Timeout: 30 * time.Second}
	start := time.Now()
	resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%s/hook/resolve?name=%s", strconv.Itoa(port), name))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	r := resolveResult{status: resp.StatusCode, body: strings.TrimSpace(string(b)), wall: time.Since(start)}
	r.elapsed, _ = time.ParseDuration(resp.Header.Get("X-Elapsed"))
	return r
}

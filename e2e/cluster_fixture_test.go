package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdbox/etcdbox/image"
	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/qemu/cluster"
	"github.com/etcdbox/etcdbox/seed"
)

// clusterDeadline bounds `up` of three nodes and each `add` under
// software emulation on two cores (about a minute each here).
const clusterDeadline = 5 * time.Minute

// clusterImage builds, in a directory removed when the test ends, an
// image with the test-hook init and no seed: every node of a cluster boots
// it, and gets its seed (no node name) from the cluster's cidata volume
// and its name from DHCP.
func clusterImage(t *testing.T) string { return clusterImageAs(t, image.FormatRaw, "etcdbox.img") }

// clusterImageAs builds the cluster's image in another format (TestCluster
// adds nodes from the qcow2 and VMDK forms), into a fresh directory.
func clusterImageAs(t *testing.T, format image.Format, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("QEMU tier: runs in make test, not in go test -short")
	}
	img := filepath.Join(t.TempDir(), name)
	vmlinuz, modules := testenv.Kernel(t)
	// The raw image is the one most steps boot, in the default setting;
	// the other formats wrap the same disk.
	compression := image.CompressionSmall
	if format != image.FormatRaw {
		compression = image.CompressionFast
	}
	start := time.Now()
	_, err := image.Build(context.Background(), image.Config{
		Kernel: vmlinuz, Modules: modules,
		Init:       testenv.Bin(t, "init-testhooks"), // and its own etcd
		Bootloader: testenv.Bootloader(t),
		Format:     format, Output: img, Version: "e2e-cluster",
		// The quorum watch's bound, 45 s in a release, at 15 s: the
		// kernel hands an unknown name=value to the init's environment,
		// and the test-hook init reads it (init/testhooks.go). The watch
		// only reports; TestCluster's recover waits on its report once
		// the quorum is gone, which took 55 s of the step's 172.
		Cmdline:     "ETCDBOX_TEST_QUORUM_BOUND=15s",
		Compression: compression, CacheDir: testenv.InitrdCache(t),
	})
	require.NoError(t, err)
	t.Logf("built the cluster image (%s) in %s", format, time.Since(start).Round(time.Millisecond))
	return img
}

// upCluster brings up a cluster of n nodes of the test-hook image in a
// fresh directory, with the network inside the test process and the
// test-hook port forwarded.
func upCluster(t *testing.T, n int) *running {
	t.Helper()
	code, vars := testenv.OVMF(t)
	cfg := cluster.Config{
		Dir: t.TempDir(), Image: clusterImage(t), OVMFCode: code, OVMFVars: vars,
		MemoryMiB: 768, GuestPorts: []int{hookPort, peerPort}, Log: t.Logf,
		// A backup a minute, each pushed to the cluster's registry:
		// TestCluster checks that one comes on time and pulls one back.
		Backup: seed.Backup{Interval: "1m", Keep: 3, Push: &seed.BackupPush{Repository: cluster.GuestRegistry() + "/" + backupRepo, Insecure: true}},
	}
	return startCluster(t, cfg, n)
}

// running holds the cluster whose VMs run: a test that starts them again
// (cluster.Up on the same directory) puts the new one here, so that the
// cleanup stops them and not only the network.
type running struct{ *cluster.Cluster }

// startCluster brings up n nodes with cfg (its OVMF and memory filled in
// when empty) and, when the test ends, logs every console tail if the test
// failed and powers the cluster off.
func startCluster(t *testing.T, cfg cluster.Config, n int) *running {
	t.Helper()
	if cfg.OVMFCode == "" {
		cfg.OVMFCode, cfg.OVMFVars = testenv.OVMF(t)
	}
	if cfg.MemoryMiB == 0 {
		cfg.MemoryMiB = 768
	}
	if cfg.Log == nil {
		cfg.Log = t.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterDeadline)
	defer cancel()
	start := time.Now()
	c, err := cluster.Up(ctx, cfg, n)
	r := &running{c}
	if c != nil {
		t.Cleanup(func() {
			if t.Failed() || os.Getenv("ETCDBOX_E2E_KEEP") != "" {
				keep := keepDir(t)
				for _, node := range r.Nodes() {
					if vm, err := r.VM(node.Name); err == nil {
						if t.Failed() {
							t.Logf("console of %s (last 120 lines):\n%s", node.Name, vm.ConsoleTail(120))
						}
						if keep != "" {
							_ = os.WriteFile(filepath.Join(keep, node.Name+".console.log"), []byte(vm.Console()), 0o644)
						}
					}
				}
				if keep != "" {
					t.Logf("whole consoles kept in %s", keep)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := r.Down(ctx, 30*time.Second); err != nil {
				t.Errorf("down: %v", err)
			}
		})
	}
	require.NoError(t, err)
	t.Logf("up: %d voting members after %s", n, time.Since(start).Round(time.Second))
	return r
}

// keepDir makes a directory outside the test's temporary ones, for what a
// failed test (or any, with ETCDBOX_E2E_KEEP set) leaves to read
// afterwards; "" when it cannot.
func keepDir(t *testing.T) string {
	what := "failed"
	if !t.Failed() {
		what = "kept"
	}
	dir, err := os.MkdirTemp("", "etcdbox-e2e-"+what+"-"+strings.ReplaceAll(t.Name(), "/", "-")+"-")
	if err != nil {
		t.Logf("keep consoles: %v", err)
		return ""
	}
	return dir
}

// nodeAPI returns a client of node's API, closed when the test ends.
func nodeAPI(t *testing.T, c *cluster.Cluster, node cluster.Node) *nodeapi.Client {
	t.Helper()
	api, err := nodeapi.NewClient("https://127.0.0.1:"+strconv.Itoa(node.APIPort), c.PKIDir())
	require.NoError(t, err)
	t.Cleanup(api.Close)
	return api
}

// stageAndWait stages ref through the node API and waits until it is staged.
func stageAndWait(t *testing.T, api *nodeapi.Client, ref string) {
	t.Helper()
	require.NoError(t, api.StageUpgrade(t.Context(), ref))
	deadline := time.Now().Add(stageDeadline)
	for {
		p, err := api.Upgrade(t.Context())
		require.NoError(t, err)
		if p.Target == ref && p.Phase == nodeapi.PhaseStaged {
			return
		}
		require.NotEqual(t, nodeapi.PhaseFailed, p.Phase, "staging %s: %s", ref, p.Error)
		require.True(t, time.Now().Before(deadline), "staging %s: still %s after %s", ref, p.Phase, stageDeadline)
		time.Sleep(time.Second) // polling interval, bounded by the deadline
	}
}

// waitHealthy polls the node API until the node's member is a healthy
// voter, and returns that status.
func waitHealthy(ctx context.Context, t *testing.T, api *nodeapi.Client) nodeapi.Status {
	t.Helper()
	for {
		st, err := api.Status(ctx)
		if err == nil && st.Member.Healthy && st.Member.Role == nodeapi.RoleVoter {
			return st
		}
		if ctx.Err() != nil {
			require.FailNow(t, "node not healthy in time", "last status %+v, error %v", st, err)
		}
		time.Sleep(500 * time.Millisecond) // polling interval, bounded by ctx
	}
}

// waitBlessed polls the node API until the node runs on slot, blessed, as
// a healthy voter, and returns that status.
func waitBlessed(ctx context.Context, t *testing.T, api *nodeapi.Client, slot string) nodeapi.Status {
	t.Helper()
	for {
		st, err := api.Status(ctx)
		if err == nil && st.Slot == slot && st.Blessed && st.Member.Healthy && st.Member.Role == nodeapi.RoleVoter {
			return st
		}
		if ctx.Err() != nil {
			require.FailNow(t, "node not blessed on slot "+slot+" in time", "last status %+v, error %v", st, err)
		}
		time.Sleep(500 * time.Millisecond) // polling interval, bounded by ctx
	}
}

// slotState is the state of slot name in st, "" when st does not list it.
func slotState(st nodeapi.Status, name string) string {
	for _, s := range st.Slots {
		if s.Name == name {
			return s.State
		}
	}
	return ""
}

// client returns an etcd client of one node, closed when the test ends.
func client(t *testing.T, c *cluster.Cluster, name string) *clientv3.Client {
	t.Helper()
	cl := dial(t, c, name)
	t.Cleanup(func() { cl.Close() })
	return cl
}

// dial returns an etcd client of one node for the caller to close: for
// polls, whose clients would otherwise stay open until the test ends.
func dial(t *testing.T, c *cluster.Cluster, name string) *clientv3.Client {
	t.Helper()
	n, ok := c.Node(name)
	require.True(t, ok, "no node %s", name)
	tc, err := c.TLS()
	require.NoError(t, err)
	cl, err := clientv3.New(clientv3.Config{
		Endpoints: []string{n.Endpoint()}, TLS: tc, DialTimeout: 10 * time.Second, Logger: zap.NewNop(),
	})
	require.NoError(t, err)
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
	return metric(t, tc, n.HTTPEndpoint(), "process_start_time_seconds")
}

// metric reads one of etcd's metrics at endpoint.
func metric(t *testing.T, tc *tls.Config, endpoint, name string) string {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(endpoint + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	t.Fatalf("%s: no %s in /metrics", endpoint, name)
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

// backingFormat is the format of the image node n's disk is an overlay
// of, as qemu-img reads it (-U: the VM holds the disk).
func backingFormat(t *testing.T, n cluster.Node) string {
	t.Helper()
	out := hostRun(t, "qemu-img", "info", "-U", "--output=json", filepath.Join(n.Dir, "disk.qcow2"))
	var info struct {
		BackingFormat string `json:"backing-filename-format"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &info), "qemu-img info: %s", out)
	return info.BackingFormat
}

// checkSeedFrom checks that node's console says its seed came from the
// metadata source named from and, when refused names one, that it
// refused that service, which broke its protocol, before it.
func checkSeedFrom(t *testing.T, c *cluster.Cluster, node, from, refused string) {
	t.Helper()
	vm, err := c.VM(node)
	require.NoError(t, err)
	console := vm.Console()
	// On a failure, the lines about the seed, not the whole console.
	var lines []string
	for l := range strings.SplitSeq(console, "\n") {
		if strings.Contains(l, "etcdbox: seed") || strings.Contains(l, "cloud metadata") {
			lines = append(lines, l)
		}
	}
	seedLines := strings.Join(lines, "\n")
	assert.True(t, strings.Contains(console, "seed: from "+from+" (user data)"), "%s did not take its seed from %s:\n%s", node, from, seedLines)
	if refused != "" {
		assert.True(t, strings.Contains(console, "cloud metadata: "+refused+": "), "%s did not say it refused the broken %s:\n%s", node, refused, seedLines)
		assert.True(t, strings.Contains(console, "going on to the next source"), "%s:\n%s", node, seedLines)
	} else {
		assert.False(t, strings.Contains(console, "going on to the next source"), "%s refused a source:\n%s", node, seedLines)
	}
}

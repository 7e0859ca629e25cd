package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/image"
	"github.com/etcdbox/etcdbox/internal/kvwriter"
	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/qemu/cluster"
	"github.com/etcdbox/etcdbox/rollout"
)

// rollDeadline bounds a roll of three nodes under software emulation: per
// node a pull, a reboot (20-40 s), the gate's settle time, and slack.
const rollDeadline = 20 * time.Minute

// buildInit builds the test-hook init from this tree, so the images carry
// the node API this test drives (snapshot, last rollback) whatever
// bin/init-testhooks holds.
func buildInit(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "init")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-tags", "testhooks", "-o", out, "./init")
	cmd.Dir = testenv.Root(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build ./init: %s", b)
	return out
}

// buildRollImage builds an image of version with etcdBin as /usr/bin/etcd, raw
// at out (.img) or an OCI tarball (.tar).
func buildRollImage(t *testing.T, initBin, etcdBin, version, out string) {
	t.Helper()
	vmlinuz, modules := testenv.Kernel(t)
	cfg := image.Config{Kernel: vmlinuz, Modules: modules, Etcd: etcdBin, Init: initBin, Output: out, Version: version}
	if filepath.Ext(out) == ".tar" {
		cfg.Format = image.FormatOCI
	} else {
		cfg.Bootloader = testenv.Bootloader(t)
	}
	_, err := image.Build(context.Background(), cfg)
	require.NoError(t, err)
}

// pushImage pushes the OCI tarball to the cluster's registry and returns
// the guests' reference.
func pushImage(t *testing.T, c *cluster.Cluster, path string) string {
	t.Helper()
	img, err := tarball.ImageFromPath(path, nil)
	require.NoError(t, err)
	ref, err := c.Push(t.Context(), img)
	require.NoError(t, err)
	return ref
}

// newRoll returns a roll of ref over every node of c.
func newRoll(t *testing.T, c *cluster.Cluster, ref string) *rollout.Roll {
	t.Helper()
	tc, err := c.TLS()
	require.NoError(t, err)
	var nodes []rollout.Node
	var eps []string
	for _, n := range c.Nodes() {
		api, err := nodeapi.NewClient("https://127.0.0.1:"+strconv.Itoa(n.APIPort), c.PKIDir())
		require.NoError(t, err)
		t.Cleanup(api.Close)
		nodes = append(nodes, rollout.Node{Name: n.Name, API: api, EtcdEndpoint: n.Endpoint()})
		eps = append(eps, n.Endpoint())
	}
	cli, err := rollout.Dial(eps, tc)
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return &rollout.Roll{Image: ref, Nodes: nodes, Etcd: rollout.NewEtcd(cli, tc), By: "e2e", Log: t.Logf, ReadyWait: 3 * time.Minute}
}

// TestRollingUpgrade rolls a 3-node cluster from v1 to v2 under a
// continuous writer, checks the writer's history with porcupine, then
// rolls a broken image (its etcd is etcdctl, which exits at once) and
// checks that the first node returns to its slot by itself and the roll
// stops with the reason, leaving the cluster healthy.
func TestRollingUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("QEMU tier: runs in make test, not in go test -short")
	}
	dir := t.TempDir()
	initBin := buildInit(t)
	v1img, v2, bad := filepath.Join(dir, "v1.img"), filepath.Join(dir, "v2.tar"), filepath.Join(dir, "bad.tar")
	buildRollImage(t, initBin, testenv.Bin(t, "etcd"), "e2e-v1", v1img)
	buildRollImage(t, initBin, testenv.Bin(t, "etcd"), "e2e-v2", v2)
	buildRollImage(t, initBin, testenv.Bin(t, "etcdctl"), "e2e-bad", bad)

	code, vars := testenv.OVMF(t)
	ctx, cancel := context.WithTimeout(context.Background(), clusterDeadline)
	c, err := cluster.Up(ctx, cluster.Config{Dir: filepath.Join(dir, "c"), Image: v1img, OVMFCode: code, OVMFVars: vars, MemoryMiB: 768, Log: t.Logf}, 3)
	cancel()
	if c != nil {
		t.Cleanup(func() {
			if t.Failed() {
				for _, node := range c.Nodes() {
					if vm, err := c.VM(node.Name); err == nil {
						t.Logf("console of %s (last 80 lines):\n%s", node.Name, vm.ConsoleTail(80))
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

	t.Run("v1 to v2 under writes", func(t *testing.T) {
		ref := pushImage(t, c, v2)
		tc, err := c.TLS()
		require.NoError(t, err)
		w, err := kvwriter.Start(c.Endpoints(), tc)
		require.NoError(t, err)
		r := newRoll(t, c, ref)
		r.ImageEtcd = "3.7.3"
		ctx, cancel := context.WithTimeout(t.Context(), rollDeadline)
		defer cancel()
		start := time.Now()
		err = r.Run(ctx)
		rollTime := time.Since(start)
		res, werr := w.Stop(30 * time.Second)
		require.NoError(t, err)
		require.NoError(t, werr)
		t.Logf("roll of 3 nodes: %s; writer: %d operations, %d acknowledged puts, longest write gap %s", rollTime.Round(time.Second), len(res.History), res.Acked, res.Gap.Round(time.Millisecond))

		for _, n := range c.Nodes() {
			api, err := nodeapi.NewClient("https://127.0.0.1:"+strconv.Itoa(n.APIPort), c.PKIDir())
			require.NoError(t, err)
			st, err := api.Status(t.Context())
			api.Close()
			require.NoError(t, err)
			assert.Equal(t, "b", st.Slot, "%s booted slot", n.Name)
			assert.True(t, st.Blessed, "%s blessed", n.Name)
			assert.Equal(t, "e2e-v2", st.Version, "%s image version", n.Name)
		}
		assert.Equal(t, porcupine.Ok, res.Check(3*time.Minute), "the writer's history is linearizable: no acknowledged write lost")
	})

	t.Run("bad image rolls back", func(t *testing.T) {
		ref := pushImage(t, c, bad)
		r := newRoll(t, c, ref)
		r.ImageEtcd = "3.7.3" // etcdctl carries no etcd server version
		ctx, cancel := context.WithTimeout(t.Context(), rollDeadline)
		defer cancel()
		start := time.Now()
		err := r.Run(ctx)
		require.Error(t, err)
		t.Logf("bad image: roll stopped after %s: %v", time.Since(start).Round(time.Second), err)
		assert.Regexp(t, `^node n\d rolled back: slot a: `, err.Error())
		// The node is back on its old slot; its member rejoins with its data.
		var c2 rollout.Cluster
		deadline := time.Now().Add(3 * time.Minute)
		for {
			c2, err = r.Observe(t.Context())
			if err == nil {
				err = rollout.Check(c2)
			}
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(2 * time.Second) // polling interval, bounded by the deadline
		}
		require.NoError(t, err, "the cluster is healthy again within 3m")
		for _, n := range c2.Nodes {
			assert.Equal(t, "b", n.Status.Slot, "%s still runs slot b", n.Name)
			assert.Equal(t, "e2e-v2", n.Status.Version, n.Name)
		}
	})
}

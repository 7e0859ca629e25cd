package e2e

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdbox/etcdbox/image"
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
		w := startWriter(t, c)
		r := newRoll(t, c, ref)
		r.ImageEtcd = "3.7.3"
		ctx, cancel := context.WithTimeout(t.Context(), rollDeadline)
		defer cancel()
		start := time.Now()
		err := r.Run(ctx)
		rollTime := time.Since(start)
		hist, gap := w.stop(t)
		require.NoError(t, err)
		t.Logf("roll of 3 nodes: %s; writer: %d operations, longest write gap %s", rollTime.Round(time.Second), len(hist), gap.Round(time.Millisecond))

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
		res := porcupine.CheckOperationsTimeout(kvModel, hist, 3*time.Minute)
		assert.Equal(t, porcupine.Ok, res, "the writer's history is linearizable: no acknowledged write lost")
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

// kvInput is one operation of the writer's history.
type kvInput struct {
	put   bool
	key   string
	value int
}

// kvOutput is its result; unknown means the put failed and may or may not
// have taken effect.
type kvOutput struct {
	value   int
	unknown bool
}

// kvModel is a map of registers, each key checked on its own.
var kvModel porcupine.Model

var kvNondet = &porcupine.NondeterministicModel{
	Init: func() []any { return []any{map[string]int{}} },
	Step: func(state, input, output any) []any {
		st, in, out := state.(map[string]int), input.(kvInput), output.(kvOutput)
		if !in.put {
			if st[in.key] == out.value {
				return []any{st}
			}
			return nil
		}
		next := map[string]int{}
		for k, v := range st {
			next[k] = v
		}
		next[in.key] = in.value
		if out.unknown {
			return []any{st, next}
		}
		return []any{next}
	},
	Equal: func(a, b any) bool {
		x, y := a.(map[string]int), b.(map[string]int)
		if len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if y[k] != v {
				return false
			}
		}
		return true
	},
}

func init() {
	kvModel = kvNondet.ToModel()
	kvModel.Partition = func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		for _, op := range h {
			k := op.Input.(kvInput).key
			by[k] = append(by[k], op)
		}
		var out [][]porcupine.Operation
		for _, ops := range by {
			out = append(out, ops)
		}
		return out
	}
}

// writer puts increasing values to one key per worker, each through its
// own node, and reads another worker's key, recording every operation.
type writer struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	start  time.Time

	mu      sync.Mutex
	hist    []porcupine.Operation
	lastAck time.Time
	gap     time.Duration
	cli     []*clientv3.Client
}

func startWriter(t *testing.T, c *cluster.Cluster) *writer {
	t.Helper()
	tc, err := c.TLS()
	require.NoError(t, err)
	w := &writer{start: time.Now()}
	w.lastAck = w.start
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	nodes := c.Nodes()
	var eps []string
	for _, n := range nodes {
		eps = append(eps, n.Endpoint())
	}
	for i := range nodes {
		// Each worker prefers its node but may fail over to the others,
		// as a client of the cluster does.
		order := append(append([]string{}, eps[i:]...), eps[:i]...)
		cli, err := clientv3.New(clientv3.Config{Endpoints: order, TLS: tc, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		require.NoError(t, err)
		w.cli = append(w.cli, cli)
		key, other := fmt.Sprintf("/e2e/roll/%d", i), fmt.Sprintf("/e2e/roll/%d", (i+1)%len(nodes))
		w.wg.Go(func() { w.work(ctx, i, cli, key, other) })
	}
	return w
}

func (w *writer) now() int64 { return int64(time.Since(w.start)) }

func (w *writer) work(ctx context.Context, id int, cli *clientv3.Client, key, other string) {
	for v := 1; ctx.Err() == nil; v++ {
		call := w.now()
		octx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := cli.Put(octx, key, strconv.Itoa(v))
		cancel()
		op := porcupine.Operation{ClientId: id, Input: kvInput{put: true, key: key, value: v}, Call: call}
		if err != nil {
			// It may still take effect, at any later time.
			op.Output, op.Return = kvOutput{unknown: true}, math.MaxInt64
		} else {
			op.Output, op.Return = kvOutput{value: v}, w.now()
		}
		w.record(op, err == nil)

		call = w.now()
		octx, cancel = context.WithTimeout(ctx, 5*time.Second)
		r, err := cli.Get(octx, other)
		cancel()
		if err == nil {
			got := 0
			if len(r.Kvs) > 0 {
				got, _ = strconv.Atoi(string(r.Kvs[0].Value))
			}
			w.record(porcupine.Operation{ClientId: id, Input: kvInput{key: other}, Call: call, Output: kvOutput{value: got}, Return: w.now()}, false)
		}
		// A failed read says nothing and is left out.
		if errors.Is(ctx.Err(), context.Canceled) {
			return
		}
	}
}

func (w *writer) record(op porcupine.Operation, ackedWrite bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hist = append(w.hist, op)
	if ackedWrite {
		now := time.Now()
		w.gap = max(w.gap, now.Sub(w.lastAck))
		w.lastAck = now
	}
}

// stop stops the workers, reads every key once more (so a lost write
// shows as a read that no linearization explains) and returns the history
// and the longest time without an acknowledged write.
func (w *writer) stop(t *testing.T) ([]porcupine.Operation, time.Duration) {
	t.Helper()
	w.cancel()
	w.wg.Wait()
	for i, cli := range w.cli {
		key := fmt.Sprintf("/e2e/roll/%d", i)
		call := w.now()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r, err := cli.Get(ctx, key)
		cancel()
		require.NoError(t, err)
		got := 0
		if len(r.Kvs) > 0 {
			got, _ = strconv.Atoi(string(r.Kvs[0].Value))
		}
		w.hist = append(w.hist, porcupine.Operation{ClientId: i, Input: kvInput{key: key}, Call: call, Output: kvOutput{value: got}, Return: w.now()})
		cli.Close()
	}
	return w.hist, w.gap
}

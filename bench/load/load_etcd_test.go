package load

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdbox/etcdbox/internal/etcdtest"
	"github.com/etcdbox/etcdbox/pki"
)

// TestRunAgainstEtcd runs every op against a real etcd on loopback (with
// mutual TLS, as an etcdbox node serves): each load point answers
// requests without errors, times each one, and what it wrote is there.
func TestRunAgainstEtcd(t *testing.T) {
	dir := t.TempDir()
	if err := pki.Init(dir, false); err != nil {
		t.Fatal(err)
	}
	c := etcdtest.Start(t, dir, "n1")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cfg := Config{
		Endpoints: c.Endpoints(), TLS: c.TLS(), KeySpace: 50, Prefix: "loadtest/",
		Warmup: 100 * time.Millisecond, Duration: 500 * time.Millisecond,
	}
	fill := cfg
	fill.Op, fill.Clients = Put, 8
	if err := Fill(ctx, fill); err != nil {
		t.Fatal(err)
	}
	cli := c.Client(t)
	got, err := cli.Get(ctx, "loadtest/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if got.Count != 50 {
		t.Fatalf("after Fill: %d keys under loadtest/, want 50", got.Count)
	}
	for _, p := range []struct {
		op      Op
		clients int
	}{{Put, 1}, {Put, 16}, {Range, 4}} {
		pc := cfg
		pc.Op, pc.Clients = p.op, p.clients
		res, err := Run(ctx, pc)
		if err != nil {
			t.Fatal(err)
		}
		t.Log(res)
		if res.Errors != 0 || res.Ops == 0 {
			t.Errorf("%s: %d ops, %d errors (%v)", res.Name(), res.Ops, res.Errors, res.FirstErr)
		}
		if res.Latency.Count() != res.Ops {
			t.Errorf("%s: %d latencies for %d ops", res.Name(), res.Latency.Count(), res.Ops)
		}
		if res.Elapsed != pc.Duration {
			t.Errorf("%s: elapsed %s, want the measured %s", res.Name(), res.Elapsed, pc.Duration)
		}
		// Each client has at most one request in flight, so throughput
		// is about clients over the mean latency (Little's law; the
		// window's edges let it stray a little, a double count would
		// not).
		if bound := float64(p.clients) / res.Latency.Mean().Seconds(); res.Throughput() > 1.5*bound {
			t.Errorf("%s: %.0f ops/s with %d clients at a mean of %s: more than %.0f is impossible",
				res.Name(), res.Throughput(), p.clients, res.Latency.Mean(), bound)
		}
		p50, p99 := res.Latency.Quantile(0.5), res.Latency.Quantile(0.99)
		if p50 <= 0 || p99 < p50 || res.Latency.Max() < p99 {
			t.Errorf("%s: p50 %s, p99 %s, max %s", res.Name(), p50, p99, res.Latency.Max())
		}
	}
	// A put run writes only keys of its key space.
	got, err = cli.Get(ctx, "loadtest/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if got.Count != 50 {
		t.Errorf("after the puts: %d keys under loadtest/, want 50", got.Count)
	}
}

// TestRunUnreachable: a load point against a port where nothing listens
// counts errors, not latencies.
func TestRunUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := Run(ctx, Config{
		Endpoints: []string{"http://127.0.0.1:1"}, Op: Put, Clients: 2,
		Duration: 300 * time.Millisecond, Timeout: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops != 0 || res.Errors == 0 || res.FirstErr == nil {
		t.Errorf("got %s, want only errors", res)
	}
}

func TestConfigChecks(t *testing.T) {
	for _, c := range []Config{
		{Op: Put, Clients: 1, Duration: time.Second},
		{Endpoints: []string{"x"}, Op: "delete", Clients: 1, Duration: time.Second},
		{Endpoints: []string{"x"}, Op: Put, Duration: time.Second},
		{Endpoints: []string{"x"}, Op: Range, Clients: 1},
	} {
		if _, err := Run(t.Context(), c); err == nil {
			t.Errorf("%+v: taken", c)
		}
	}
	if _, err := RunClients(t.Context(), Config{Endpoints: []string{"x"}, Op: Put, Clients: 1, Duration: time.Second}, nil); err == nil {
		t.Error("RunClients without clients: taken")
	}
	c, err := Config{Endpoints: []string{"x"}, Op: Put, Clients: 256, Duration: time.Second}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Conns != 16 || c.Key(42) != "bench/00000042" {
		t.Errorf("defaults: %d conns, key %q", c.Conns, c.Key(42))
	}
}

// Command backup measures what a node's scheduled backup costs (issue
// 13): the time to snapshot a member and to verify the snapshot, its
// size, and the write latency a client sees while snapshots run, against
// the same writer with no snapshot running (the p99 ratio). It runs the
// init's own backup code against one upstream etcd on loopback, on the
// host, so it measures no emulation. It prints figures, and records them
// for bench.json (bench/internal/figures); nothing is asserted.
//
//	go run ./bench/backup -etcd bin/etcd -keys 50000
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdbox/etcdbox/bench/internal/figures"
	"github.com/etcdbox/etcdbox/bench/internal/stats"
	"github.com/etcdbox/etcdbox/init/backup"
)

func main() {
	etcd := flag.String("etcd", "bin/etcd", "the etcd binary")
	keys := flag.Int("keys", 50000, "keys of 1 KiB written before the snapshots")
	runs := flag.Int("n", 3, "snapshots timed")
	window := flag.Duration("window", 5*time.Second, "how long each latency sample writes")
	flag.Parse()
	if err := run(*etcd, *keys, *runs, *window); err != nil {
		fmt.Fprintln(os.Stderr, "bench backup:", err)
		os.Exit(1)
	}
}

func run(etcdBin string, keys, runs int, window time.Duration) error {
	work, err := os.MkdirTemp("", "etcdbox-bench-backup-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	cli, stop, err := startEtcd(etcdBin, work)
	if err != nil {
		return err
	}
	defer stop()
	ctx := context.Background()
	if err := fill(ctx, cli, keys); err != nil {
		return err
	}

	var snap, verify []time.Duration
	var size int64
	dir := filepath.Join(work, "backups")
	for i := 0; i < runs; i++ {
		start := time.Now()
		rc, err := cli.Snapshot(ctx)
		if err != nil {
			return err
		}
		tmp := filepath.Join(work, "stream.db")
		f, err := os.Create(tmp)
		if err != nil {
			return err
		}
		if _, err := f.ReadFrom(rc); err != nil {
			return err
		}
		rc.Close()
		f.Close()
		snap = append(snap, time.Since(start))
		start = time.Now()
		if _, err := backup.Verify(tmp); err != nil {
			return err
		}
		verify = append(verify, time.Since(start))
		b, err := os.Open(tmp)
		if err != nil {
			return err
		}
		s, err := backup.Save(dir, b, "bench", time.Now(), 2)
		b.Close()
		if err != nil {
			return err
		}
		size = s.Size
	}

	quiet := writeLatencies(ctx, cli, window, nil)
	var busy atomic.Bool
	busy.Store(true)
	during := writeLatencies(ctx, cli, window, func() {
		for busy.Load() {
			if rc, err := cli.Snapshot(ctx); err == nil {
				_, _ = new(bytes.Buffer).ReadFrom(rc)
				rc.Close()
			}
		}
	})
	busy.Store(false)

	fmt.Printf("snapshot of %d keys of 1 KiB (%.1f MiB), on the host, no emulation:\n", keys, float64(size)/(1<<20))
	fmt.Printf("  snapshot stream: %s\n", stats.Durations(snap).Format("%.3fs"))
	fmt.Printf("  verification (SHA-256, page check, every key read): %s, %s of the stream\n",
		stats.Durations(verify).Format("%.3fs"), stats.Ratio(stats.Durations(verify), stats.Durations(snap)))
	fmt.Printf("  write latency p99, no snapshot: %.2fms (%d writes)\n", p99(quiet), len(quiet))
	fmt.Printf("  write latency p99, snapshots running: %.2fms (%d writes): %.2fx\n", p99(during), len(during), p99(during)/p99(quiet))
	sn, ve := stats.Durations(snap), stats.Durations(verify)
	return figures.Record("backup",
		figures.Figure{Key: "backup.snapshot", Name: fmt.Sprintf("snapshot stream of %.0f MiB, on the host", float64(size)/(1<<20)), Value: sn.Median, Unit: "s", N: sn.N},
		figures.Figure{Key: "backup.verify", Name: "verifying the snapshot (SHA-256, page check, every key read)", Value: ve.Median, Unit: "s", N: ve.N}.
			Ref("the snapshot stream", sn.Median),
		figures.Figure{Key: "backup.p99", Name: "write latency p99 while snapshots run back to back", Value: p99(during), Unit: "ms"}.
			Ref("the same writer with no snapshot", p99(quiet)))
}

// fill writes keys keys of 1 KiB, a hundred per transaction.
func fill(ctx context.Context, cli *clientv3.Client, keys int) error {
	val := string(bytes.Repeat([]byte("v"), 1024))
	for i := 0; i < keys; i += 100 {
		var ops []clientv3.Op
		for j := i; j < min(i+100, keys); j++ {
			ops = append(ops, clientv3.OpPut("/bench/"+strconv.Itoa(j), val))
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			return fmt.Errorf("fill: %w", err)
		}
	}
	return nil
}

// writeLatencies writes one key after another for window, with side
// running meanwhile when not nil, and returns each write's latency.
func writeLatencies(ctx context.Context, cli *clientv3.Client, window time.Duration, side func()) []time.Duration {
	if side != nil {
		go side()
	}
	var out []time.Duration
	for end := time.Now().Add(window); time.Now().Before(end); {
		start := time.Now()
		if _, err := cli.Put(ctx, "/bench/latency", "x"); err == nil {
			out = append(out, time.Since(start))
		}
	}
	return out
}

func p99(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)*99/100]) / float64(time.Millisecond)
}

// startEtcd runs one etcd member on loopback ports in dir and returns a
// client once it answers.
func startEtcd(bin, dir string) (*clientv3.Client, func(), error) {
	port := func() int {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port
	}
	client, peer := "http://127.0.0.1:"+strconv.Itoa(port()), "http://127.0.0.1:"+strconv.Itoa(port())
	cmd := exec.Command(bin, "--name", "bench", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "bench="+peer,
		"--log-outputs", filepath.Join(dir, "etcd.log"))
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		stop()
		return nil, nil, err
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Get(ctx, "/bench/ready")
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			cli.Close()
			stop()
			return nil, nil, fmt.Errorf("etcd does not answer: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return cli, func() { cli.Close(); stop() }, nil
}

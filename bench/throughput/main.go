// Command throughput measures etcd's client throughput and latency
// through the appliance (issue 17): a 3-node etcdbox cluster (our image,
// our init, mutual TLS) against 3 floor VMs in the same run: the same
// kernel and etcd with bench/floorinit as PID 1, plain http, and its data
// on the same kind of virtio disk and ext4, on the same kind of closed
// network (qemu/vnet), reached from the host the same way (the
// network's port forwards). A third cluster, the TLS floor (floor-tls,
// -tls-floor), is the floor with etcd's mutual TLS set as an etcdbox
// node sets it: the floor against it is what TLS costs, ours against it
// what the appliance costs beyond TLS. The clusters boot, one after the
// other, and settle; then they take turns, never running at once: while
// one is loaded the others' VMs are paused (QMP stop: no CPU, and a guest
// clock that stands still), so the noise of a shared machine falls on
// all alike. The load (bench/load) is the same on each: puts at 1, 16 and
// 256 concurrent clients and linearizable range reads, each point a few
// seconds after a warm-up, in rounds whose cluster order alternates;
// then upstream `etcdctl check perf` on each as a cross-check. It prints
// throughput, p50 and p99 of each point with the ratio ours/floor, and
// records them (bench/internal/figures, section "throughput"). Nothing
// is asserted.
//
//	go run ./bench/throughput -etcd bin/etcd -init bin/init -floor-init floorinit -etcdctl bin/etcdctl
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/etcdbox/etcdbox/bench/internal/benchmain"
	"github.com/etcdbox/etcdbox/bench/internal/floorpki"
	"github.com/etcdbox/etcdbox/bench/load"
	"github.com/etcdbox/etcdbox/qemu"
)

func main() { benchmain.Main("bench throughput", run) }

// options are the command's flags.
type options struct {
	sysroot, etcd, init, floorInit, etcdctl, work string
	mem, cpus                                     int
	settle, warmup, duration                      time.Duration
	rounds                                        int
	putClients, rangeClients                      []int
	conns, keys, valueSize                        int
	checkPerf                                     string
	timeout, requestTimeout                       time.Duration
	tlsFloor                                      bool
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("throughput", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.sysroot, "sysroot", ".cache/sysroot", "where hack/deps.sh unpacked the kernel, OVMF and systemd-boot")
	fs.StringVar(&o.etcd, "etcd", "bin/etcd", "etcd binary of the floor images (ours runs the init's own, the same etcd version, as etcdbox build does by default)")
	fs.StringVar(&o.init, "init", "bin/init", "the etcdbox init (ours)")
	fs.StringVar(&o.floorInit, "floor-init", "", "bench/floorinit built static for the guest (the floor's /init)")
	fs.StringVar(&o.etcdctl, "etcdctl", "bin/etcdctl", "upstream etcdctl, for check perf")
	fs.StringVar(&o.work, "work", "", "work directory (default: a temporary one, removed)")
	fs.IntVar(&o.mem, "mem", 768, "MiB per VM")
	fs.IntVar(&o.cpus, "cpus", 1, "virtual CPUs per VM")
	fs.DurationVar(&o.settle, "settle", 15*time.Second, "time each cluster runs idle once it is up, before it is paused for the other's boot")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "load before each point's measured time, not counted")
	fs.DurationVar(&o.duration, "duration", 4*time.Second, "measured time of each load point in each round")
	fs.IntVar(&o.rounds, "rounds", 2, "rounds of the points; each point alternates the clusters, the first one changing each time")
	puts := fs.String("put-clients", "1,16,256", "concurrent clients of the put points, comma-separated")
	ranges := fs.String("range-clients", "16", "concurrent clients of the linearizable range points; empty for none")
	fs.IntVar(&o.conns, "conns", 16, "gRPC connections a point's clients share (at most one per client)")
	fs.IntVar(&o.keys, "keys", 256, "key space: keys written once before the points, then put and read at random")
	fs.IntVar(&o.valueSize, "value-size", 256, "bytes of each value")
	fs.StringVar(&o.checkPerf, "check-perf", "s", "etcdctl check perf --load (s, m, l, xl; 60 s each); empty skips it")
	fs.DurationVar(&o.timeout, "timeout", 40*time.Minute, "bound of the whole run")
	fs.BoolVar(&o.tlsFloor, "tls-floor", true, "also measure a floor whose etcd speaks mutual TLS (floor-tls), to tell TLS's cost from the appliance's")
	fs.DurationVar(&o.requestTimeout, "request-timeout", 30*time.Second, "bound of each request; one that runs out counts as an error")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var err error
	if o.putClients, err = ints(*puts); err != nil {
		return o, fmt.Errorf("-put-clients: %w", err)
	}
	if o.rangeClients, err = ints(*ranges); err != nil {
		return o, fmt.Errorf("-range-clients: %w", err)
	}
	if o.rounds < 1 {
		return o, fmt.Errorf("-rounds %d: want at least 1", o.rounds)
	}
	if o.floorInit == "" {
		return o, fmt.Errorf("-floor-init: missing (CGO_ENABLED=0 go build -o floorinit ./bench/floorinit)")
	}
	return o, nil
}

// ints parses "1,16,256".
func ints(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: want positive numbers, comma-separated", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	work := o.work
	if work == "" {
		if work, err = os.MkdirTemp("", "etcdbox-bench-throughput-"); err != nil {
			return err
		}
		defer os.RemoveAll(work)
	}
	if work, err = filepath.Abs(work); err != nil {
		return err
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
	started := time.Now()
	var seed []byte
	var ca *floorpki.CA
	if o.tlsFloor {
		if seed, err = floorpki.NewSeed(); err != nil {
			return err
		}
		if ca, err = floorpki.New(seed); err != nil {
			return err
		}
	}
	im, err := o.buildImages(ctx, work, seed)
	if err != nil {
		return fmt.Errorf("images: %w", err)
	}
	accel, err := qemu.ChooseAccel(ctx, "")
	if err != nil {
		return err
	}
	logf("%s", accel)
	fmt.Fprintf(stdout, "%s; %d MiB and %d vCPU per VM; %d rounds of %s of load per point after %s of warm-up, the clusters in turn\n",
		accel, o.mem, o.cpus, o.rounds, o.duration, o.warmup)

	ups := []func(context.Context) (*target, error){
		func(ctx context.Context) (*target, error) { return o.upOurs(ctx, im.ours, work, accel.Accel, logf) },
		func(ctx context.Context) (*target, error) {
			return o.upFloor(ctx, "floor", im.floor, work, accel.Accel, nil, logf)
		},
	}
	if ca != nil {
		ups = append(ups, func(ctx context.Context) (*target, error) {
			return o.upFloor(ctx, "floor-tls", im.floorTLS, work, accel.Accel, ca, logf)
		})
	}
	targets := make([]*target, len(ups))
	for i, up := range ups {
		t, err := up(ctx)
		if err != nil {
			return err
		}
		defer t.down()
		logf("%s: up in %s; settling for %s, then paused", t.name, t.upTook.Round(100*time.Millisecond), o.settle)
		select {
		case <-ctx.Done():
		case <-time.After(o.settle):
		}
		if err := t.pause(ctx); err != nil {
			return err
		}
		targets[i] = t
	}
	runs, err := o.measure(ctx, targets, logf)
	if err != nil {
		return err
	}
	var floorTLS *clusterRun
	if len(runs) > 2 {
		floorTLS = &runs[2]
	}
	if err := report(stdout, runs[0], runs[1], floorTLS); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "section took %s\n", time.Since(started).Round(time.Second))
	return nil
}

// points returns the load points of a run, in order.
func (o options) points() []load.Config {
	var out []load.Config
	add := func(op load.Op, clients []int) {
		for _, c := range clients {
			out = append(out, load.Config{
				Op: op, Clients: c, Conns: o.conns, Warmup: o.warmup, Duration: o.duration,
				KeySpace: o.keys, ValueSize: o.valueSize,
			})
		}
	}
	add(load.Put, o.putClients)
	add(load.Range, o.rangeClients)
	return out
}

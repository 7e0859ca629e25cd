// Package load is the load generator of the throughput bench: a closed
// loop of concurrent clients issuing etcd puts or linearizable range
// reads through clientv3 as fast as the cluster answers, with the latency
// of every request in a Histogram. It is what etcd's tools/benchmark
// does (`benchmark put` and `benchmark range --consistency=l`), which
// lives in etcd's root module that the module proxy does not serve.
//
//	res, err := load.Run(ctx, load.Config{
//		Endpoints: eps, TLS: tc, Op: load.Put, Clients: 16, Duration: 5 * time.Second,
//	})
//	fmt.Println(res) // "put c16: 812 ops/s, p50 18.1ms, p99 61.0ms (4060 ops, 0 errors)"
//
// Nothing here asserts a figure: the bench prints them.
package load

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Op is what each request does.
type Op string

// The operations.
const (
	// Put writes a random key of the key space with a fixed-size value.
	Put Op = "put"
	// Range reads one key of the key space, linearizably (etcd's default
	// consistency: the read goes through the leader's read index).
	Range Op = "range"
)

// Config is one load point.
type Config struct {
	// Endpoints are the cluster's client URLs; every connection is given
	// them all and spreads its requests over them (clientv3's round
	// robin), so a request lands on the leader as often on any cluster.
	Endpoints []string
	// TLS is the client's TLS configuration; nil for plain http.
	TLS *tls.Config
	Op  Op
	// Clients is the number of concurrent requests in flight, each from
	// its own goroutine issuing the next as soon as the last answered.
	Clients int
	// Conns is the number of clientv3 clients (gRPC connections) the
	// clients share round-robin; default min(Clients, 16).
	Conns int
	// Warmup is a time at the start whose requests are made but not
	// counted; Duration is the measured time after it.
	Warmup, Duration time.Duration
	// KeySpace is how many distinct keys are written or read (default
	// 10000), KeySize the bytes of each key name (default 8, at least
	// what the key's number needs), ValueSize the bytes of each value
	// (default 256). Prefix is put before each key ("bench/").
	KeySpace, KeySize, ValueSize int
	Prefix                       string
	// Timeout bounds each request; default 10s. A request that fails
	// or times out counts as an error, not as a latency.
	Timeout time.Duration
}

func (c Config) withDefaults() (Config, error) {
	if len(c.Endpoints) == 0 {
		return c, errors.New("load: no endpoints")
	}
	if c.Op != Put && c.Op != Range {
		return c, fmt.Errorf("load: op %q: want %q or %q", c.Op, Put, Range)
	}
	if c.Clients < 1 {
		return c, fmt.Errorf("load: clients %d: want at least 1", c.Clients)
	}
	if c.Conns <= 0 {
		c.Conns = min(c.Clients, 16)
	}
	c.Conns = min(c.Conns, c.Clients)
	if c.KeySpace <= 0 {
		c.KeySpace = 10000
	}
	if c.KeySize <= 0 {
		c.KeySize = 8
	}
	if c.ValueSize <= 0 {
		c.ValueSize = 256
	}
	if c.Prefix == "" {
		c.Prefix = "bench/"
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	return c, nil
}

// Key returns the name of key i of the key space: Prefix and i,
// zero-padded to KeySize.
func (c Config) Key(i int) string {
	return c.Prefix + fmt.Sprintf("%0*d", c.KeySize, i)
}

// Result is what one load point measured.
type Result struct {
	Op      Op
	Clients int
	// Ops and Errors count the requests that answered (and were timed)
	// or failed within the measured time, by when they ended; Elapsed is
	// that time.
	Ops, Errors uint64
	Elapsed     time.Duration
	// Latency holds every counted request's latency.
	Latency *Histogram
	// FirstErr is the first error seen, for the report.
	FirstErr error
}

// Add adds o, another run of the same point, to r: their counts, times
// and latencies together. The zero Result takes o's op and clients.
func (r *Result) Add(o Result) {
	if r.Latency == nil {
		r.Op, r.Clients, r.Latency = o.Op, o.Clients, &Histogram{}
	}
	r.Ops += o.Ops
	r.Errors += o.Errors
	r.Elapsed += o.Elapsed
	if o.Latency != nil {
		r.Latency.Merge(o.Latency)
	}
	if r.FirstErr == nil {
		r.FirstErr = o.FirstErr
	}
}

// Throughput is answered requests per second of the measured time.
func (r Result) Throughput() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Elapsed.Seconds()
}

// Name is "put c16".
func (r Result) Name() string { return fmt.Sprintf("%s c%d", r.Op, r.Clients) }

func (r Result) String() string {
	s := fmt.Sprintf("%s: %.0f ops/s, p50 %s, p99 %s (%d ops, %d errors)", r.Name(), r.Throughput(),
		Round(r.Latency.Quantile(0.5)), Round(r.Latency.Quantile(0.99)), r.Ops, r.Errors)
	if r.FirstErr != nil {
		s += fmt.Sprintf("; first error: %v", r.FirstErr)
	}
	return s
}

// Round rounds a latency to three significant digits for printing.
func Round(d time.Duration) time.Duration {
	for unit := time.Duration(1); unit < time.Hour; unit *= 10 {
		if d < 1000*unit {
			return d.Round(unit)
		}
	}
	return d.Round(time.Second)
}

// Dial makes n clientv3 clients of c's endpoints and TLS; Close them.
func Dial(ctx context.Context, c Config, n int) ([]*clientv3.Client, error) {
	var clis []*clientv3.Client
	for range n {
		cli, err := clientv3.New(clientv3.Config{
			Endpoints: c.Endpoints, TLS: c.TLS, Context: ctx,
			DialTimeout: 10 * time.Second, Logger: zap.NewNop(),
		})
		if err != nil {
			closeAll(clis)
			return nil, fmt.Errorf("load: connect to %v: %w", c.Endpoints, err)
		}
		clis = append(clis, cli)
	}
	return clis, nil
}

// Run runs one load point on connections of its own and returns what it
// measured. It fails only when it cannot start (bad config, no
// connection); failed requests are counted in Result.Errors. The
// connections' setup (TLS handshakes included) falls in the warm-up.
func Run(ctx context.Context, c Config) (Result, error) {
	c, err := c.withDefaults()
	if err != nil {
		return Result{}, err
	}
	clis, err := Dial(ctx, c, c.Conns)
	if err != nil {
		return Result{}, err
	}
	defer closeAll(clis)
	return RunClients(ctx, c, clis)
}

// RunClients runs one load point on the first c.Conns of clis (all of
// them when Conns is 0), established connections that a bench keeps
// from point to point as a long-lived client would.
func RunClients(ctx context.Context, c Config, clis []*clientv3.Client) (Result, error) {
	if len(clis) == 0 {
		return Result{}, errors.New("load: no clients")
	}
	if c.Conns <= 0 || c.Conns > len(clis) {
		c.Conns = len(clis)
	}
	c, err := c.withDefaults()
	if err != nil {
		return Result{}, err
	}
	if c.Duration <= 0 {
		return Result{}, fmt.Errorf("load: duration %s: want more than 0", c.Duration)
	}
	return run(ctx, c, clis[:c.Conns]), nil
}

func closeAll(clis []*clientv3.Client) {
	for _, cli := range clis {
		cli.Close()
	}
}

// worker is one client's share of a Result, merged at the end.
type worker struct {
	hist        Histogram
	ops, errors uint64
	firstErr    error
}

func run(ctx context.Context, c Config, clis []*clientv3.Client) Result {
	value := string(make([]byte, c.ValueSize))
	start := time.Now()
	from, until := start.Add(c.Warmup), start.Add(c.Warmup+c.Duration)
	ctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	workers := make([]worker, c.Clients)
	var wg sync.WaitGroup
	for i := range workers {
		w, cli := &workers[i], clis[i%len(clis)]
		rng := rand.New(rand.NewPCG(uint64(i), uint64(start.UnixNano())))
		wg.Go(func() {
			for ctx.Err() == nil {
				key := c.Key(rng.IntN(c.KeySpace))
				rctx, rcancel := context.WithTimeout(context.Background(), c.Timeout)
				t0 := time.Now()
				var err error
				if c.Op == Put {
					_, err = cli.Put(rctx, key, value)
				} else {
					_, err = cli.Get(rctx, key)
				}
				t1 := time.Now()
				rcancel()
				// A request counts when it ends inside the measured time
				// (as in etcd's tools/benchmark): in a steady state that
				// is throughput times Duration, whatever the latency.
				// Counting only requests that also start inside it would
				// leave out one latency's worth of the time.
				if t1.Before(from) || t1.After(until) {
					continue
				}
				if err != nil {
					w.errors++
					if w.firstErr == nil {
						w.firstErr = err
					}
					continue
				}
				w.ops++
				w.hist.Record(t1.Sub(t0))
			}
		})
	}
	wg.Wait()
	// Shorter than Duration when ctx ended early.
	res := Result{Op: c.Op, Clients: c.Clients, Elapsed: min(time.Since(from), c.Duration), Latency: &Histogram{}}
	for i := range workers {
		w := &workers[i]
		res.Ops += w.ops
		res.Errors += w.errors
		res.Latency.Merge(&w.hist)
		if res.FirstErr == nil {
			res.FirstErr = w.firstErr
		}
	}
	return res
}

// fillTries is how often Fill tries each key before it gives up.
const fillTries = 3

// Fill writes every key of c's key space once, with c.Clients writers,
// so that range reads find values, trying a put that fails up to
// fillTries times; it returns the first error that remained. c.Op,
// Warmup and Duration are not used.
func Fill(ctx context.Context, c Config) error {
	c.Op = Put
	c, err := c.withDefaults()
	if err != nil {
		return err
	}
	clis, err := Dial(ctx, c, c.Conns)
	if err != nil {
		return err
	}
	defer closeAll(clis)
	return FillClients(ctx, c, clis)
}

// FillClients is Fill on established clients, shared round-robin.
func FillClients(ctx context.Context, c Config, clis []*clientv3.Client) error {
	if len(clis) == 0 {
		return errors.New("load: no clients")
	}
	c.Op = Put
	c, err := c.withDefaults()
	if err != nil {
		return err
	}
	value := string(make([]byte, c.ValueSize))
	keys := make(chan int)
	errs := make(chan error, c.Clients)
	var wg sync.WaitGroup
	for i := range c.Clients {
		cli := clis[i%len(clis)]
		wg.Go(func() {
			for k := range keys {
				var err error
				for range fillTries {
					rctx, cancel := context.WithTimeout(ctx, c.Timeout)
					_, err = cli.Put(rctx, c.Key(k), value)
					cancel()
					if err == nil || ctx.Err() != nil {
						break
					}
				}
				if err != nil {
					errs <- fmt.Errorf("load: fill %s: %w", c.Key(k), err)
					return
				}
			}
		})
	}
	var err2 error
feed:
	for k := range c.KeySpace {
		select {
		case keys <- k:
		case err2 = <-errs:
			break feed
		}
	}
	close(keys)
	wg.Wait()
	if err2 == nil {
		select {
		case err2 = <-errs:
		default:
		}
	}
	return err2
}

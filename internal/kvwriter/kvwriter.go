// Package kvwriter runs a continuous writer against an etcd cluster and
// records its history, so that a test or a benchmark can check that no
// acknowledged write was lost (with porcupine) and report the longest time
// without an acknowledged write.
//
// Each worker writes increasing values to its own key through its own
// endpoint (failing over to the others, as a client of the cluster does)
// and reads the next worker's key. Each write is a compare-and-set from
// the value the worker last knew there (a transaction: if the key holds
// that value, put the next one, else read what it holds). A write that
// fails may still take effect at any later time, so it is recorded as
// unknown with no return time; but only while the key still holds the
// value it compares, which the next write that succeeds changes for good
// (values never repeat), and the next compare that fails says which
// value took its place. Without the compare, a put that failed could
// land minutes later, after any number of later puts (a member cut off
// one way holds a proposal in its TCP send buffer until the link heals),
// and with many such puts the checker's search has no end (porcupine gave
// up after 3 minutes on a 20 s one-way cut).
//
// A request etcd answers with an error that a careful client asks again
// is asked again, within opTimeout: a proposal raft dropped (a leader
// hands over leadership, or stops: it never entered the log); a request
// etcd timed out around a leader change (a follower forwarded it to a
// leader that dropped it in its hand-over, and only the follower's wait
// ends); a read that lost its leader; a request on a member that has no
// leader. Only a request that fails for good counts as failed. A write
// asked again is a new operation with the next value, comparing the same
// value as the try that failed: that try may still take effect (etcd's
// client spreads requests over the members, so the try that timed out on
// one member can be committed after the retry through another), so it is
// recorded as unknown, like any failed write; if it did, the retry's
// compare fails and the worker asks again from the value it read. A read
// asked again is one operation spanning its tries: reads change nothing.
//
// Every request requires a leader (clientv3.WithRequireLeader): a member
// cut off from its peers, but not from the clients, has no leader once
// its election timeout passes, and it then refuses such a request at
// once ("etcdserver: no leader"), where it would hold it until etcd's
// request timeout (7 s) and answer "request timed out". The writer asks
// again, and its client takes another member. Without it, a partition
// shows as the clients' wait on the cut-off member, request after
// request, not as the cluster's own unavailability.
package kvwriter

import (
	"context"
	"crypto/tls"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Prefix is where the workers' keys live: each writer under a run
// prefix of its own below it, since the model starts every key at 0 and
// a second writer on the same cluster would otherwise read the first
// one's values as writes nobody made.
const Prefix = "/etcdbox-kvwriter/"

// opTimeout bounds one put or get, tries included: above etcd's own
// request timeout (7 s with the default election timeout), so that a
// request etcd is still working on is never given up by the client
// before etcd itself answers.
const opTimeout = 15 * time.Second

// keepAliveTime and keepAliveTimeout are the clients' gRPC keepalive.
// What matters is the timeout: with keepalive on, gRPC sets it as the
// connection's TCP_USER_TIMEOUT, so the kernel drops a connection whose
// sent bytes go unacknowledged that long. A member that is killed, paused
// or cut off sends no reset; without this, a worker's request on it waits
// out opTimeout (15 s), and since each client spreads its requests over
// every member, all the workers soon wait on it together and the writer
// acknowledges nothing for 15 s, which is the client's blindness, not the
// cluster's. A live member's kernel acknowledges within milliseconds,
// however slow its etcd. gRPC pings no more often than every 10 s, which
// etcd's default --grpc-keepalive-min-time (5 s) allows.
const (
	keepAliveTime    = 10 * time.Second
	keepAliveTimeout = 2 * time.Second
)

// Input is one operation of the history: a read of Key, or (Put) a
// compare-and-set of Key from Expect to Value. Expect 0 means the key
// does not exist; values start at 1.
type Input struct {
	Put    bool
	Key    string
	Value  int
	Expect int
}

// Output is its result. A read's Value is what it read. A write etcd
// answered either Set the key (Value is then the input's), or found its
// compare false and read Value there. Unknown means the write failed and
// may or may not have taken effect. Stopped marks an unknown write that
// was still under way when the writer stopped: no client saw it fail, so
// a report or a picture of the run must not count it as a failure (the
// model treats it as any unknown write).
type Output struct {
	Value   int
	Set     bool
	Unknown bool
	Stopped bool
}

// Model is a map of registers, each key checked on its own.
var Model porcupine.Model

var nondet = &porcupine.NondeterministicModel{
	Init: func() []any { return []any{map[string]int{}} },
	Step: func(state, input, output any) []any {
		st, in, out := state.(map[string]int), input.(Input), output.(Output)
		cur := st[in.Key]
		if !in.Put {
			if cur == out.Value {
				return []any{st}
			}
			return nil
		}
		matches := cur == in.Expect
		next := func() map[string]int {
			n := make(map[string]int, len(st)+1)
			for k, v := range st {
				n[k] = v
			}
			n[in.Key] = in.Value
			return n
		}
		switch {
		case out.Unknown && matches:
			return []any{st, next()}
		case out.Unknown:
			return []any{st} // its compare can no longer hold
		case out.Set && matches:
			return []any{next()}
		case !out.Set && !matches && cur == out.Value:
			return []any{st}
		}
		return nil
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
	Model = nondet.ToModel()
	Model.Partition = func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		for _, op := range h {
			k := op.Input.(Input).Key
			by[k] = append(by[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(by))
		for _, ops := range by {
			out = append(out, ops)
		}
		return out
	}
}

// Writer is a running writer; Stop ends it.
type Writer struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	start  time.Time
	cli    []*clientv3.Client
	prefix string // this run's keys: Prefix + run + "/"

	mu      sync.Mutex
	hist    []porcupine.Operation
	lastAck time.Time
	gap     time.Duration
	gapEnd  time.Time
	failed  int
	errs    []string
	slowest time.Duration
}

// Result is what a stopped writer saw.
type Result struct {
	History []porcupine.Operation
	// Acked is the number of acknowledged writes: puts that set their
	// key.
	Acked int
	// Gap is the longest time without an acknowledged put; GapEnd is
	// when it ended (the wall clock, to set beside a node's log).
	Gap    time.Duration
	GapEnd time.Time
	// Failed is the number of puts and gets that returned an error: what
	// a client of the cluster would have seen fail. Errors are the first
	// of them, with when they came.
	Failed int
	Errors []string
	// Slowest is the longest time an acknowledged put took.
	Slowest time.Duration
}

// Start starts one worker per endpoint.
func Start(endpoints []string, tc *tls.Config) (*Writer, error) {
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("kvwriter: no endpoints")
	}
	w := &Writer{start: time.Now()}
	w.prefix = Prefix + strconv.FormatInt(w.start.UnixNano(), 36) + "/"
	w.lastAck = w.start
	for i := range endpoints {
		order := append(append([]string{}, endpoints[i:]...), endpoints[:i]...)
		cli, err := clientv3.New(clientv3.Config{
			Endpoints: order, TLS: tc, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
			DialKeepAliveTime: keepAliveTime, DialKeepAliveTimeout: keepAliveTimeout,
		})
		if err != nil {
			for _, c := range w.cli {
				c.Close()
			}
			return nil, fmt.Errorf("kvwriter: client of %s: %w", endpoints[i], err)
		}
		w.cli = append(w.cli, cli)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	for i, cli := range w.cli {
		key, other := w.key(i), w.key((i+1)%len(w.cli))
		w.wg.Go(func() { w.work(ctx, i, cli, key, other) })
	}
	return w, nil
}

func (w *Writer) key(i int) string { return w.prefix + strconv.Itoa(i) }

func (w *Writer) now() int64 { return int64(time.Since(w.start)) }

func (w *Writer) work(ctx context.Context, id int, cli *clientv3.Client, key, other string) {
	put := func(ctx context.Context, expect, v int) (bool, int, error) {
		return compareAndSet(ctx, cli, key, expect, v)
	}
	for cur, v := 0, 0; ctx.Err() == nil; {
		cur, v = w.put(ctx, id, key, cur, v, put)

		call := w.now()
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		var r *clientv3.GetResponse
		_, err := retry(octx, func() error { var err error; r, err = cli.Get(clientv3.WithRequireLeader(octx), other); return err })
		cancel()
		if err == nil {
			got := 0
			if len(r.Kvs) > 0 {
				got, _ = strconv.Atoi(string(r.Kvs[0].Value))
			}
			w.record(porcupine.Operation{ClientId: id, Input: Input{Key: other}, Call: call, Output: Output{Value: got}, Return: w.now()}, false)
		} else {
			// A failed read says nothing and is left out of the history.
			w.fail(ctx, "get", err)
		}
	}
}

// compareAndSet sets key to v if it holds expect (0: if it does not
// exist), in one transaction that otherwise reads the key. It reports
// whether it set the key, and the value it read when it did not.
func compareAndSet(ctx context.Context, cli *clientv3.Client, key string, expect, v int) (bool, int, error) {
	cmp := clientv3.Compare(clientv3.Value(key), "=", strconv.Itoa(expect))
	if expect == 0 {
		cmp = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	}
	r, err := cli.Txn(clientv3.WithRequireLeader(ctx)).If(cmp).
		Then(clientv3.OpPut(key, strconv.Itoa(v))).Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return false, 0, err
	}
	if r.Succeeded {
		return true, v, nil
	}
	got := 0
	if len(r.Responses) > 0 {
		if rr := r.Responses[0].GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
			got, _ = strconv.Atoi(string(rr.Kvs[0].Value))
		}
	}
	return false, got, nil
}

// put writes the values after last to key, one try each, each a
// compare-and-set from cur, the value the worker last knew in key, until
// a try sets the key, fails for good (an error askAgain does not list, or
// opTimeout), or ctx ends. It returns the value it then knows in key and
// the last value it tried. Each try is an operation of its own; one that
// failed is unknown, since it may still take effect as long as the key
// holds cur. A try whose compare is false read the value one of those
// took effect with: the next try compares that.
func (w *Writer) put(ctx context.Context, id int, key string, cur, last int, do func(ctx context.Context, expect, v int) (bool, int, error)) (int, int) {
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	for v := last + 1; ; v++ {
		call := w.now()
		set, got, err := do(octx, cur, v)
		op := porcupine.Operation{ClientId: id, Input: Input{Put: true, Key: key, Value: v, Expect: cur}, Call: call}
		if err == nil {
			op.Output, op.Return = Output{Value: got, Set: set}, w.now()
			w.record(op, set)
			if set {
				return v, v
			}
			cur = got
			if octx.Err() != nil {
				w.fail(ctx, "put", fmt.Errorf("compare failed, and out of time: %w", octx.Err()))
				return cur, v
			}
			continue
		}
		op.Output, op.Return = Output{Unknown: true, Stopped: ctx.Err() != nil}, math.MaxInt64
		w.record(op, false)
		if octx.Err() != nil || !askAgain[rpctypes.ErrorDesc(err)] {
			w.fail(ctx, "put", err)
			return cur, v
		}
		select {
		case <-octx.Done():
			w.fail(ctx, "put", err)
			return cur, v
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// proposalDropped is raft's ErrProposalDropped, as etcd passes it on.
const proposalDropped = "raft proposal dropped"

// askAgain lists what etcd answers that a careful client asks again.
var askAgain = map[string]bool{
	proposalDropped:                                true,
	rpctypes.ErrTimeout.Error():                    true,
	rpctypes.ErrTimeoutDueToLeaderFail.Error():     true,
	rpctypes.ErrTimeoutDueToConnectionLost.Error(): true,
	rpctypes.ErrLeaderChanged.Error():              true,
	rpctypes.ErrNoLeader.Error():                   true,
}

// retry calls op until it succeeds, fails with an error askAgain does not
// list, or ctx ends, and returns how many tries it took.
func retry(ctx context.Context, op func() error) (int, error) {
	for tries := 1; ; tries++ {
		err := op()
		if err == nil || ctx.Err() != nil || !askAgain[rpctypes.ErrorDesc(err)] {
			return tries, err
		}
		select {
		case <-ctx.Done():
			return tries, err
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// fail counts a failed request, unless the writer is stopping.
func (w *Writer) fail(ctx context.Context, op string, err error) {
	if ctx.Err() != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failed++
	if len(w.errs) < 10 {
		w.errs = append(w.errs, fmt.Sprintf("%s %s: %v", time.Now().Format("15:04:05.000"), op, err))
	}
}

func (w *Writer) record(op porcupine.Operation, ackedWrite bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hist = append(w.hist, op)
	if ackedWrite {
		w.slowest = max(w.slowest, time.Duration(op.Return-op.Call))
		now := time.Now()
		if d := now.Sub(w.lastAck); d > w.gap {
			w.gap, w.gapEnd = d, now
		}
		w.lastAck = now
	}
}

// LastAck returns when the last put was acknowledged; the start of the
// writer until one was. A test waits on it to know the writer got through
// a fault.
func (w *Writer) LastAck() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastAck
}

// Stop stops the workers, reads every key once more (so that a lost write
// shows as a read no linearization explains), closes the clients and
// returns what the writer saw. The final reads wait up to timeout each.
func (w *Writer) Stop(timeout time.Duration) (Result, error) {
	w.cancel()
	w.wg.Wait()
	var firstErr error
	for i, cli := range w.cli {
		call := w.now()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		r, err := cli.Get(ctx, w.key(i))
		cancel()
		cli.Close()
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("kvwriter: final read of %s: %w", w.key(i), err)
			}
			continue
		}
		got := 0
		if len(r.Kvs) > 0 {
			got, _ = strconv.Atoi(string(r.Kvs[0].Value))
		}
		w.hist = append(w.hist, porcupine.Operation{ClientId: i, Input: Input{Key: w.key(i)}, Call: call, Output: Output{Value: got}, Return: w.now()})
	}
	res := Result{History: w.hist, Gap: w.gap, GapEnd: w.gapEnd, Failed: w.failed, Errors: w.errs, Slowest: w.slowest}
	for _, op := range w.hist {
		if in := op.Input.(Input); in.Put && op.Output.(Output).Set {
			res.Acked++
		}
	}
	return res, firstErr
}

// Check checks the history with porcupine against Model, for up to
// timeout.
func (r Result) Check(timeout time.Duration) porcupine.CheckResult {
	return porcupine.CheckOperationsTimeout(Model, r.History, timeout)
}

// Explain checks the history again, for up to timeout, and writes
// porcupine's picture of it (HTML: each key's operations, and how far a
// linearization got) to path, for a history Check did not find Ok.
func (r Result) Explain(timeout time.Duration, path string) error {
	_, info := porcupine.CheckOperationsVerbose(Model, r.History, timeout)
	return porcupine.VisualizePath(Model, info, path)
}

package member

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// boot runs the member loop (Loop, the init's own) for n, wired to its
// etcd process: expected are the expected initial members, peers the
// nodes it reaches the cluster through. It returns the plan the loop
// carried out once the member is a voter, or an error when ctx ends
// first; the loop goes on (watching for a removal) until n.stop.
func (n *node) boot(ctx context.Context, expected []*node, peers []*node, log *logger) (Plan, error) {
	var names []string
	for _, e := range expected {
		names = append(names, e.name)
	}
	everyone := append(append([]*node{n}, expected...), peers...)
	voter := make(chan Plan, 1)
	lctx, cancel := context.WithCancel(context.Background())
	n.mu.Lock()
	if n.cancelLoop != nil {
		n.cancelLoop()
	}
	n.cancelLoop = cancel
	n.mu.Unlock()
	l := &Loop{
		Cluster: n.c.token, Name: n.name, PeerURL: n.PeerURL(),
		DataDir: n.dataDir, StateDir: n.stateDir,
		Logf: log.Logf, LockTTL: 2 * time.Second, Backoff: 100 * time.Millisecond,
		Gather: func(ctx context.Context, removed bool) (Round, error) {
			r := Round{Facts: n.facts(ctx, names, peers...), InitialCluster: func(want []string) (string, error) {
				var set []*node
				for _, m := range everyone {
					if (want == nil || slices.Contains(want, m.name)) && !slices.Contains(set, m) {
						set = append(set, m)
					}
				}
				return initialCluster(set...), nil
			}}
			r.Facts.RemovedFromCluster = r.Facts.RemovedFromCluster || removed
			if len(peers) > 0 {
				var err error
				if r.Peers, err = n.dial(peers...); err != nil {
					return Round{}, err
				}
			}
			return r, nil
		},
		Commit: func(p Plan) error {
			_, err := n.store.Update(func(r *Record) error { r.Token, r.Nonces = p.Token, p.Nonces; return nil })
			return err
		},
		Launch: func(ctx context.Context, s Start) (Etcd, error) {
			n.mu.Lock()
			n.token = s.Token
			n.mu.Unlock()
			if err := n.startE(s.InitialCluster, s.State); err != nil {
				return nil, err
			}
			n.mu.Lock()
			watch := n.watch
			n.mu.Unlock()
			e := &testEtcd{n: n, ready: make(chan struct{}), watch: watch}
			go func() {
				if n.waitReadyE(ctx) == nil {
					close(e.ready)
				}
			}()
			return e, nil
		},
		Local: func() (*clientv3.Client, error) { return n.dial(n) },
		// As the init does once etcd serves: the node is a member now,
		// and never bootstraps again (Facts.WasMember).
		Voter: func(p Plan) error {
			if err := os.MkdirAll(n.stateDir, 0o700); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(n.stateDir, "member"), []byte(n.name+"\n"), 0o600); err != nil {
				return err
			}
			select {
			case voter <- p:
			default:
			}
			return nil
		},
	}
	done := make(chan struct{})
	go func() { defer close(done); l.Run(lctx) }()
	n.c.t.Cleanup(func() { cancel(); <-done })
	select {
	case p := <-voter:
		return p, nil
	case <-ctx.Done():
		return Plan{}, fmt.Errorf("%s not a voting member: %w\n%s", n.name, ctx.Err(), tail(log.all(), 5))
	}
}

// testEtcd is an etcd process of the tests as the loop sees it.
type testEtcd struct {
	n     *node
	ready chan struct{}
	watch *RemovedWatch
}

func (e *testEtcd) Ready() <-chan struct{}   { return e.ready }
func (e *testEtcd) Removed() <-chan struct{} { return e.watch.Removed() }
func (e *testEtcd) Stop(time.Duration) error { e.n.stopEtcd(); return nil }

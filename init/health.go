package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The health listener: plain HTTP on a loopback address, for probes that
// cannot present a client certificate (kubelet's httpGet probes of a
// static pod, etcdbox manifest static-pod). The node API and every etcd
// listener take mutual TLS only, and stay so; this listener is the one
// exception, and it is narrow:
//
//   - it binds a loopback address only (--health-addr 127.0.0.1:PORT; any
//     other address is refused), so only the host's own processes reach
//     it, kubelet among them (a static pod runs in the host's network);
//   - it serves two read-only paths, GET or HEAD, and nothing else:
//     /livez: the init answers and its state is not wedged (it supervises
//     etcd, or its member lifecycle is deciding how to start it);
//     /readyz: etcd runs under the init and serves this node's member a
//     linearizable read;
//   - it answers "ok" or a short reason, never data from etcd, and it runs
//     at most one etcd read a second however often it is asked.
//
// Liveness is deliberately weaker than readiness: the init restarts etcd
// itself (with backoff), and a member that waits for its peers or for a
// quorum is not fixed by restarting the container, so /livez fails only
// when the init itself no longer answers. Off unless --health-addr (or
// $ETCDBOX_HEALTH_ADDR) is given; an appliance node has no need of it.

// healthAddr is the init's --health-addr: "" for no health listener.
var healthAddr string

// Bounds of the health checks.
const (
	// healthLockBudget is how long /livez waits for the init's state
	// locks before it calls the init wedged.
	healthLockBudget = 5 * time.Second
	// healthReadTimeout bounds /readyz's linearizable read.
	healthReadTimeout = 2 * time.Second
	// healthReadyFresh is how long a /readyz answer is reused.
	healthReadyFresh = time.Second
)

// serveHealth starts the health listener on --health-addr, when set.
func (n *node) serveHealth(context.Context) error {
	if healthAddr == "" {
		return nil
	}
	addr, err := loopbackAddr(healthAddr)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", addr.String())
	if err != nil {
		return fmt.Errorf("health listener: %w", err)
	}
	srv := &http.Server{
		Handler:           healthHandler(n.livez, (&readiness{n: n}).check),
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      healthReadTimeout + 5*time.Second,
		IdleTimeout:       time.Minute,
	}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Printf("health listener: %v", err)
		}
	}()
	n.log.Printf("health checks on http://%s (/livez, /readyz)", addr)
	return nil
}

// loopbackAddr parses a --health-addr: a loopback IP address and a port.
func loopbackAddr(s string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(s)
	switch {
	case err != nil:
		return ap, fmt.Errorf("--health-addr %q: want a loopback IP address and port, such as 127.0.0.1:9380", s)
	case !ap.Addr().IsLoopback():
		return ap, fmt.Errorf("--health-addr %q: not a loopback address: the health checks are plain HTTP, for the host's own probes only", s)
	case ap.Port() == 0:
		return ap, fmt.Errorf("--health-addr %q: want a port", s)
	}
	return ap, nil
}

// healthHandler serves /livez and /readyz from the two checks, each of
// which returns what it saw, or why the answer is no.
func healthHandler(live func() (string, error), ready func(context.Context) (string, error)) http.Handler {
	answer := func(w http.ResponseWriter, r *http.Request, check func(context.Context) (string, error)) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		what, err := check(r.Context())
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ok: %v\n", err)
			return
		}
		fmt.Fprintf(w, "ok: %s\n", what)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/livez", func(w http.ResponseWriter, r *http.Request) {
		answer(w, r, func(context.Context) (string, error) { return live() })
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		answer(w, r, ready)
	})
	return mux
}

// livePending is set while a /livez check waits for the init's locks: a
// wedged init makes every later check fail at once, rather than pile up
// goroutines that wait for the same locks.
var livePending atomic.Bool

// livez reports whether the init answers: its state locks (the node's and
// its etcd supervisor's) are taken and released within healthLockBudget.
func (n *node) livez() (string, error) {
	if !livePending.CompareAndSwap(false, true) {
		return "", errors.New("an earlier check still waits for the init's state")
	}
	done := make(chan string, 1)
	go func() {
		defer livePending.Store(false)
		done <- n.etcdActivity()
	}()
	select {
	case what := <-done:
		return what, nil
	case <-time.After(healthLockBudget):
		return "", fmt.Errorf("the init's state has been locked for over %s", healthLockBudget)
	}
}

// etcdActivity says in a few words what the init does with etcd.
func (n *node) etcdActivity() string {
	n.mu.Lock()
	sup, stopping := n.etcd, n.stopping
	n.mu.Unlock()
	switch {
	case stopping:
		return "stopping etcd"
	case sup == nil:
		return "the member lifecycle decides how to start etcd"
	}
	pid, restarts := sup.Pid(), sup.Restarts()
	if pid == 0 {
		return fmt.Sprintf("etcd supervised, between two runs (%d restarts)", restarts)
	}
	return fmt.Sprintf("etcd supervised, pid %d (%d restarts)", pid, restarts)
}

// readiness answers /readyz: one check at a time, each answer reused for
// healthReadyFresh, through one etcd client kept while it works.
type readiness struct {
	n *node

	mu     sync.Mutex
	client *clientv3.Client
	at     time.Time // of the last answer
	what   string
	err    error
}

func (r *readiness) check(ctx context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.at.IsZero() && time.Since(r.at) < healthReadyFresh {
		return r.what, r.err
	}
	r.what, r.err = r.probe(ctx)
	r.at = time.Now()
	return r.what, r.err
}

// probe asks the local member for a linearizable read.
func (r *readiness) probe(ctx context.Context) (string, error) {
	n := r.n
	n.mu.Lock()
	sup, stopping := n.etcd, n.stopping
	n.mu.Unlock()
	switch {
	case stopping:
		return "", errors.New("the node is stopping")
	case sup == nil:
		return "", errors.New("etcd is not started yet")
	case sup.Pid() == 0:
		return "", errors.New("etcd is not running (the init restarts it)")
	}
	m := n.localMember()
	if r.client == nil {
		c, err := m.client()
		if err != nil {
			return "", fmt.Errorf("etcd client: %w", err)
		}
		r.client = c
	}
	ctx, cancel := context.WithTimeout(ctx, healthReadTimeout)
	defer cancel()
	if _, err := r.client.Get(ctx, "etcdbox/health"); err != nil {
		// A new client next time: the member may have moved (ports,
		// certificates renewed).
		r.client.Close()
		r.client = nil
		return "", fmt.Errorf("member %s serves no linearizable read: %w", m.Name, err)
	}
	return fmt.Sprintf("member %s serves linearizable reads", m.Name), nil
}

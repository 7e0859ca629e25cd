package main

import (
	"context"
	"fmt"
	"io"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdbox/etcdbox/bench/internal/stats"
)

// watchedPrefix is where the watched reboots' watch looks.
const watchedPrefix = "bench/watched/"

// watchedReboots reboots n nodes as the plain reboots do, each with a
// watch open on it, as kube-apiserver keeps watches on every member. On
// SIGTERM etcd waits for its client connections to go idle, up to its
// request timeout (7 s), and a watch's never does; the init ends them
// after a drain (init/etcdstop.go). It returns each reboot's request to
// shutdown complete.
func (r *rig) watchedReboots(ctx context.Context, n int, stdout io.Writer) ([]time.Duration, error) {
	var out []time.Duration
	fmt.Fprintf(stdout, "plain reboots with a watch open on the node (request -> shutdown complete), one node after the other:\n")
	for i := range n {
		name := r.nodes[i%len(r.nodes)].Name
		if _, err := r.waitReady(ctx); err != nil {
			return out, fmt.Errorf("before rebooting %s: %w", name, err)
		}
		stop, err := r.watchOn(ctx, name)
		if err != nil {
			return out, fmt.Errorf("watch on %s: %w", name, err)
		}
		b, err := r.reboot(ctx, name)
		stop()
		if err != nil {
			return out, fmt.Errorf("reboot %s: %w", name, err)
		}
		out = append(out, b.shutdown)
		fmt.Fprintf(stdout, "  %s: request -> shutdown complete %s (-> healthy voter %s)\n", name, secs(b.shutdown), secs(b.total))
	}
	fmt.Fprintf(stdout, "  reboot with a watch, request -> shutdown complete: %s\n", stats.Durations(out).Format("%.1fs"))
	return out, nil
}

// watchOn opens a watch through a client whose only endpoint is node's
// etcd, and returns once an event has come through it: the watch's
// stream is on that member. stop closes the client.
func (r *rig) watchOn(ctx context.Context, node string) (stop func(), err error) {
	var ep string
	for _, n := range r.nodes {
		if n.Name == node {
			ep = n.EtcdEndpoint
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, TLS: r.tc, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	stop = func() { cancel(); cli.Close() }
	wch := cli.Watch(wctx, watchedPrefix, clientv3.WithPrefix())
	pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
	defer pcancel()
	if _, err := r.cli.Put(pctx, watchedPrefix+node, time.Now().String()); err != nil {
		stop()
		return nil, err
	}
	select {
	case resp := <-wch:
		if err := resp.Err(); err != nil || len(resp.Events) == 0 {
			stop()
			return nil, fmt.Errorf("no event through the watch (%v)", err)
		}
		return stop, nil
	case <-pctx.Done():
		stop()
		return nil, fmt.Errorf("no event through the watch in 30s")
	}
}

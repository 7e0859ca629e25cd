package e2e

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdbox/etcdbox/qemu/cluster"
)

// nodeWatches holds one watch on every node, each through a client whose
// only endpoint is that node, as kube-apiserver keeps watches on every
// member. A watch's connection never goes idle, so etcd's graceful stop
// waits its request timeout for it unless the init ends it
// (init/etcdstop.go).
type nodeWatches struct {
	prefix string
	cli    *clientv3.Client // for the puts the watches see
	ch     map[string]clientv3.WatchChan
}

// watchEveryNode opens the watches under prefix and returns once each has
// seen a put: every watch's stream is on its node.
func watchEveryNode(t *testing.T, c *cluster.Cluster, tc *tls.Config, prefix string) *nodeWatches {
	t.Helper()
	w := &nodeWatches{prefix: prefix, ch: map[string]clientv3.WatchChan{}}
	var err error
	w.cli, err = clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), TLS: tc, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { w.cli.Close() })
	for _, n := range c.Nodes() {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{n.Endpoint()}, TLS: tc, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
		require.NoError(t, err)
		t.Cleanup(func() { cli.Close() })
		w.ch[n.Name] = cli.Watch(t.Context(), prefix, clientv3.WithPrefix())
	}
	w.sees(t, "opened", time.Minute)
	return w
}

// sees puts prefix+key and waits, up to within, until every node's watch
// has delivered it.
func (w *nodeWatches) sees(t *testing.T, key string, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	_, err := w.cli.Put(ctx, w.prefix+key, time.Now().Format(time.RFC3339Nano))
	require.NoError(t, err, "put %s", w.prefix+key)
	for node, ch := range w.ch {
		assert.True(t, seen(ctx, ch, w.prefix+key), "%s: the watch through the node delivers %s within %s", node, w.prefix+key, within)
	}
}

// seen reads ch until an event on key, the channel's end or ctx's.
func seen(ctx context.Context, ch clientv3.WatchChan, key string) bool {
	for {
		select {
		case resp, ok := <-ch:
			if !ok {
				return false
			}
			for _, ev := range resp.Events {
				if string(ev.Kv.Key) == key {
					return true
				}
			}
		case <-ctx.Done():
			return false
		}
	}
}

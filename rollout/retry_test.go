package rollout

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcdbox/etcdbox/internal/etcdtest"
	"github.com/etcdbox/etcdbox/pki"
)

// breaker fails the first calls of the gRPC methods it names with
// Unavailable, as a connection to a member that just went down does, and
// counts every call.
type breaker struct {
	mu    sync.Mutex
	fail  map[string]int // method suffix -> calls left to fail
	calls map[string]int
}

func (b *breaker) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	b.mu.Lock()
	var inject bool
	for suffix, left := range b.fail {
		if strings.HasSuffix(method, suffix) {
			b.calls[suffix]++
			if left > 0 {
				b.fail[suffix] = left - 1
				inject = true
			}
		}
	}
	b.mu.Unlock()
	if inject {
		return status.Error(codes.Unavailable, "error reading from server: EOF (injected)")
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// breakingClient starts one etcd member and returns a client of it
// through b, and the member's cluster.
func breakingClient(t *testing.T, b *breaker) (*clientv3.Client, *etcdtest.Cluster) {
	t.Helper()
	pkiDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(pkiDir, false))
	c := etcdtest.Start(t, pkiDir, "n1")
	return dialBreaking(t, c, b), c
}

func dialBreaking(t *testing.T, c *etcdtest.Cluster, b *breaker) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), TLS: c.TLS(), Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(b.intercept)}})
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestPutTargetAsksAgainWhenUnavailable writes the roll's target through
// a client whose first put breaks as a killed member's connection does:
// it is asked again and lands; a put that keeps breaking fails after
// unavailableTries; another error is not asked again.
func TestPutTargetAsksAgainWhenUnavailable(t *testing.T) {
	b := &breaker{fail: map[string]int{"/Put": 1}, calls: map[string]int{}}
	cli, c := breakingClient(t, b)
	e := NewEtcd(cli, c.TLS())
	ctx := t.Context()
	want := Target{Image: "registry.example/etcdbox@sha256:" + strings.Repeat("a", 64), By: "test"}
	require.NoError(t, e.PutTarget(ctx, want))
	assert.Equal(t, 2, b.calls["/Put"])
	got, ok, err := e.Target(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, want.Image, got.Image)

	b.mu.Lock()
	b.fail["/Put"], b.calls["/Put"] = 100, 0
	b.mu.Unlock()
	err = e.PutTarget(ctx, want)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "put /etcdbox/upgrade/target: rpc error: code = Unavailable")
	assert.Equal(t, unavailableTries, b.calls["/Put"])

	b.mu.Lock()
	b.fail["/Put"], b.calls["/Put"] = 0, 0
	b.mu.Unlock()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, e.PutTarget(cctx, want), context.Canceled)
	assert.LessOrEqual(t, b.calls["/Put"], 1, "a canceled put is not asked again")
}

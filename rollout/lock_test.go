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

// TestLockMembershipAsksAgainWhenUnavailable takes the membership lock
// through a client whose first lease grant and first lock transaction
// break as a dead member's connection does: both are asked again and the
// lock is taken, once; a request that keeps breaking fails after
// lockTries, naming the error.
func TestLockMembershipAsksAgainWhenUnavailable(t *testing.T) {
	pkiDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(pkiDir, false))
	c := etcdtest.Start(t, pkiDir, "n1")
	dial := func(b *breaker) *clientv3.Client {
		cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), TLS: c.TLS(), Logger: zap.NewNop(),
			DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(b.intercept)}})
		require.NoError(t, err)
		t.Cleanup(func() { cli.Close() })
		return cli
	}
	ctx := t.Context()

	b := &breaker{fail: map[string]int{"/LeaseGrant": 1, "/Txn": 1}, calls: map[string]int{}}
	unlock, err := LockMembership(ctx, dial(b), 0)
	require.NoError(t, err)
	assert.Equal(t, 2, b.calls["/LeaseGrant"], "the grant asked again once")
	assert.Equal(t, 2, b.calls["/Txn"], "the lock's transaction asked again once")
	// It holds the lock: another taker is refused.
	_, err = LockMembership(ctx, c.Client(t), 0)
	require.ErrorIs(t, err, ErrMembershipLocked)
	unlock()

	b = &breaker{fail: map[string]int{"/Txn": 100}, calls: map[string]int{}}
	_, err = LockMembership(ctx, dial(b), 0)
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrMembershipLocked)
	assert.Contains(t, err.Error(), "membership lock /etcdbox/membership: rpc error: code = Unavailable")
	assert.Equal(t, lockTries, b.calls["/Txn"])
	// Nothing of it is left holding the lock.
	unlock, err = LockMembership(ctx, c.Client(t), 0)
	require.NoError(t, err)
	unlock()
}

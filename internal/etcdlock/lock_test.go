package etcdlock

import (
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/etcdbox/etcdbox/internal/etcdtest"
	"github.com/etcdbox/etcdbox/pki"
)

// TestLockRealEtcd holds a lock on a bin/etcd member across several
// lease TTLs with no stream left open on the member, excludes another
// Lock and a concurrency.Mutex on the same prefix both ways, frees it on
// Unlock, and reports it lost when its lease is revoked under it.
func TestLockRealEtcd(t *testing.T) {
	pkiDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(pkiDir, false))
	c := etcdtest.Start(t, pkiDir, "n1")
	cli := c.Client(t)
	ctx := t.Context()
	const prefix = "/test/lock"
	const ttl = 3 * time.Second

	a, err := TryLock(ctx, cli, prefix, ttl, t.Logf)
	require.NoError(t, err)
	_, err = TryLock(ctx, cli, prefix, ttl, t.Logf)
	require.ErrorIs(t, err, ErrLocked, "a second Lock while the first holds")

	// Held over three TTLs: the lease never runs out, and every
	// keep-alive stream was closed after its answer.
	start := time.Now()
	for time.Since(start) < 3*ttl {
		r, err := cli.TimeToLive(ctx, a.lease)
		require.NoError(t, err)
		require.Positive(t, r.TTL, "the lease ran out %s after the lock was taken", time.Since(start))
		select {
		case <-a.Lost():
			require.FailNow(t, "lost while held")
		case <-time.After(200 * time.Millisecond): // polling interval, bounded by the loop's 3 TTLs
		}
	}
	started, handled := keepAliveStreams(t, c)
	assert.GreaterOrEqual(t, started, 3, "keep-alives over 3 TTLs at a third of one")
	assert.Equal(t, started, handled, "a keep-alive stream is left open on the member")
	// (A Session, as a Mutex needs, holds one open: so only now.)
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(5))
	require.NoError(t, err)
	defer s.Close()
	require.ErrorIs(t, concurrency.NewMutex(s, prefix).TryLock(ctx), concurrency.ErrLocked, "a Mutex while a Lock holds")

	a.Unlock()
	a.Unlock() // twice is harmless
	r, err := cli.Get(ctx, prefix+"/", clientv3.WithPrefix())
	require.NoError(t, err)
	assert.Zero(t, r.Count, "keys left under %s after Unlock", prefix)
	lr, err := cli.TimeToLive(ctx, a.lease)
	require.NoError(t, err)
	assert.EqualValues(t, -1, lr.TTL, "the lease outlived Unlock")

	// A Mutex holds: a Lock is refused; once it is free, a Lock holds.
	m := concurrency.NewMutex(s, prefix)
	require.NoError(t, m.TryLock(ctx))
	_, err = TryLock(ctx, cli, prefix, ttl, t.Logf)
	require.ErrorIs(t, err, ErrLocked, "a Lock while a Mutex holds")
	require.NoError(t, m.Unlock(ctx))
	b, err := TryLock(ctx, cli, prefix, ttl, t.Logf)
	require.NoError(t, err)
	defer b.Unlock()

	// Its lease revoked under it: the next keep-alive finds it gone.
	_, err = cli.Revoke(ctx, b.lease)
	require.NoError(t, err)
	select {
	case <-b.Lost():
	case <-time.After(3 * ttl):
		require.FailNow(t, "a lock whose lease was revoked was not reported lost")
	}
}

// keepAliveStreams reads the member's count of LeaseKeepAlive streams
// started and ended.
func keepAliveStreams(t *testing.T, c *etcdtest.Cluster) (started, handled int) {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: c.TLS()}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(c.Members[0].ClientURL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, `grpc_method="LeaseKeepAlive"`) {
			continue
		}
		f := strings.Fields(line)
		n, err := strconv.Atoi(f[len(f)-1])
		require.NoError(t, err, "%s", line)
		switch {
		case strings.HasPrefix(line, "grpc_server_started_total{"):
			started += n
		case strings.HasPrefix(line, "grpc_server_handled_total{"):
			handled += n
		}
	}
	return started, handled
}

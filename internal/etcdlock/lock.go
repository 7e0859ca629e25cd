// Package etcdlock holds an etcd lock for a long time without holding a
// stream open on any member.
//
// concurrency.Session keeps its lease alive over a LeaseKeepAlive stream
// that stays open on one member for the session's life. When that member
// stops, etcd's graceful stop waits for the stream until its request
// timeout (7 s), and a rolling upgrade's lock made every node it landed
// on take that much longer to reboot: in a roll measured on a 3-node
// QEMU cluster, two of the three nodes took 7.4 and 8.2 s to stop etcd
// against 1.3 s for the third.
//
// A Lock keeps its lease alive with LeaseKeepAliveOnce instead: a stream
// opened for one request and its answer, every third of the lease's TTL.
// Its keys are concurrency.Mutex's (PREFIX/LEASE-ID in hex, the lowest
// create revision holds the lock), so a Mutex on the same prefix, as an
// older client takes it, and a Lock exclude each other.
package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrLocked is TryLock's error when another holder has the lock.
var ErrLocked = errors.New("held by another")

// opTimeout bounds each request a Lock makes.
const opTimeout = 10 * time.Second

// Lock is a held lock; Unlock releases it.
type Lock struct {
	cli   *clientv3.Client
	key   string
	lease clientv3.LeaseID
	stop  chan struct{}
	done  chan struct{}
	lost  chan struct{}
	once  sync.Once
	logf  func(string, ...any)
}

// TryLock takes the lock at prefix under a lease of ttl, or fails at once
// with ErrLocked when another holds it. logf (nil: none) hears of a
// keep-alive that failed; the lease outlives two of them in a row.
func TryLock(ctx context.Context, cli *clientv3.Client, prefix string, ttl time.Duration, logf func(string, ...any)) (*Lock, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	secs := int64(max(1, ttl/time.Second))
	gctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	g, err := cli.Grant(gctx, secs)
	if err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	l := &Lock{cli: cli, key: fmt.Sprintf("%s/%x", prefix, g.ID), lease: g.ID,
		stop: make(chan struct{}), done: make(chan struct{}), lost: make(chan struct{}), logf: logf}
	held, err := l.take(gctx, prefix)
	if err != nil || !held {
		l.release()
		if err == nil {
			err = ErrLocked
		}
		return nil, err
	}
	go l.keepAlive(time.Duration(secs) * time.Second / 3)
	return l, nil
}

// take writes the lock's key and reports whether it is the lowest of
// prefix's, as concurrency.Mutex decides.
func (l *Lock) take(ctx context.Context, prefix string) (bool, error) {
	r, err := l.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", 0)).
		Then(clientv3.OpPut(l.key, "", clientv3.WithLease(l.lease))).
		Commit()
	if err != nil {
		return false, fmt.Errorf("put %s: %w", l.key, err)
	}
	mine := r.Header.Revision
	owner, err := l.cli.Get(ctx, prefix+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", prefix, err)
	}
	return len(owner.Kvs) > 0 && owner.Kvs[0].CreateRevision == mine, nil
}

// keepAlive renews the lease every period, each time on a stream of its
// own, until Unlock; it closes lost when etcd says the lease is gone.
func (l *Lock) keepAlive(period time.Duration) {
	defer close(l.done)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), min(period, opTimeout))
		_, err := l.cli.KeepAliveOnce(ctx, l.lease)
		cancel()
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			l.logf("lock %s: its lease %x expired; the lock is lost", l.key, l.lease)
			close(l.lost)
			return
		case err != nil:
			l.logf("lock %s: keep-alive: %v (trying again in %s)", l.key, err, period)
		}
	}
}

// Lost is closed when the lease ran out under the lock: another may hold
// it now.
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// Key is the lock's own key, PREFIX/LEASE-ID.
func (l *Lock) Key() string { return l.key }

// Unlock stops the keep-alive, deletes the key and revokes the lease,
// under a deadline of its own. It may be called more than once.
func (l *Lock) Unlock() {
	l.once.Do(func() {
		close(l.stop)
		<-l.done
		l.release()
	})
}

func (l *Lock) release() {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	_, _ = l.cli.Delete(ctx, l.key)
	_, _ = l.cli.Revoke(ctx, l.lease)
}

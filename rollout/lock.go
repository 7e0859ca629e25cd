package rollout

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// lockTries bounds the requests LockMembership makes for its lease and
// for the lock, each, when they fail with gRPC's Unavailable: the
// connection the client picked broke under the request, most often one to
// a member that just went down (the client's balancer has not seen it
// yet; clientv3 retries no mutating request after it was sent). Both are
// safe to ask again: a lease granted twice costs one that expires in its
// TTL unused, and the lock's transaction creates this session's key only
// when it is not there yet, then finds who holds the lock.
const lockTries = 3

// unavailable reports whether err is gRPC's Unavailable.
func unavailable(err error) bool {
	s, ok := status.FromError(err)
	return ok && s.Code() == codes.Unavailable
}

// retryUnavailable calls f up to lockTries times while it fails with
// Unavailable, a tenth of a second apart, within ctx.
func retryUnavailable(ctx context.Context, f func() error) error {
	var err error
	for try := 1; ; try++ {
		if err = f(); err == nil || !unavailable(err) || try == lockTries || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// LockMembership takes the membership lock without waiting, under a
// lease of ttl (0: RemoveLockTTL). It fails with ErrMembershipLocked when
// another change holds it.
func LockMembership(ctx context.Context, cli *clientv3.Client, ttl time.Duration) (unlock func(), err error) {
	if ttl <= 0 {
		ttl = RemoveLockTTL
	}
	// The lease is granted here, under a deadline: NewSession would wait
	// for it forever when the cluster has no quorum.
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	var grant *clientv3.LeaseGrantResponse
	err = retryUnavailable(gctx, func() (err error) {
		grant, err = cli.Grant(gctx, int64(max(1, ttl/time.Second)))
		return err
	})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("membership lock %s: lease: %w", MembershipLockKey, err)
	}
	s, err := concurrency.NewSession(cli, concurrency.WithLease(grant.ID), concurrency.WithTTL(int(grant.TTL)),
		concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		cli.Revoke(rctx, grant.ID)
		cancel()
		return nil, fmt.Errorf("membership lock %s: session: %w", MembershipLockKey, err)
	}
	m := concurrency.NewMutex(s, MembershipLockKey)
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = retryUnavailable(lctx, func() error { return m.TryLock(lctx) })
	cancel()
	if err != nil {
		s.Close()
		if errors.Is(err, concurrency.ErrLocked) {
			return nil, fmt.Errorf("%w: the membership lock %s is held (a join, promotion or removal); try again once it is done", ErrMembershipLocked, MembershipLockKey)
		}
		return nil, fmt.Errorf("membership lock %s: %w", MembershipLockKey, err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m.Unlock(ctx)
		s.Close()
	}, nil
}

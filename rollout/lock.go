package rollout

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// LockMembership takes the membership lock without waiting, under a
// lease of ttl (0: RemoveLockTTL). It fails with ErrMembershipLocked when
// another change holds it.
func LockMembership(ctx context.Context, cli *clientv3.Client, ttl time.Duration) (unlock func(), err error) {
	if ttl <= 0 {
		ttl = RemoveLockTTL
	}
	// The lease is granted here, under a deadline: NewSession would wait
	// for it forever when the cluster has no quorum. The grant and the
	// lock's transaction are asked again on a broken connection
	// (retryUnavailable): a lease granted twice costs one that expires in
	// its TTL unused, and the transaction creates this session's key only
	// when it is not there yet, then finds who holds the lock.
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

package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLockMembershipAsksAgainWhenUnavailable(t *testing.T) {
	b := &breaker{fail: map[string]int{"/LeaseGrant": 1, "/Txn": 1}, calls: map[string]int{}}
	cli, c := breakingClient(t, b)
	ctx := t.Context()
	unlock, err := LockMembership(ctx, cli, 0)
	require.NoError(t, err)
	assert.Equal(t, 2, b.calls["/LeaseGrant"], "the grant asked again once")
	assert.Equal(t, 2, b.calls["/Txn"], "the lock's transaction asked again once")
	// It holds the lock: another taker is refused.
	_, err = LockMembership(ctx, c.Client(t), 0)
	require.ErrorIs(t, err, ErrMembershipLocked)
	unlock()

	b = &breaker{fail: map[string]int{"/Txn": 100}, calls: map[string]int{}}
	_, err = LockMembership(ctx, dialBreaking(t, c, b), 0)
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrMembershipLocked)
	assert.Contains(t, err.Error(), "membership lock /etcdbox/membership: rpc error: code = Unavailable")
	assert.Equal(t, unavailableTries, b.calls["/Txn"])
	// Nothing of it is left holding the lock.
	unlock, err = LockMembership(ctx, c.Client(t), 0)
	require.NoError(t, err)
	unlock()
}

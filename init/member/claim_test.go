package member

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClaimAsVoter claims the cluster name through a member that is
// still a learner: claimAsVoter waits (a plain Claim fails at once, which
// left a joined node's membership unrecorded when its promotion was not
// applied yet), fails only when its context ends, and succeeds once the
// member is promoted.
func TestClaimAsVoter(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 60*time.Second)
	c := newTestCluster(t)
	n1, n2 := c.node("n1"), c.node("n2")
	n1.start(initialCluster(n1), "new")
	n1.waitReady(ctx)
	peers := n2.client(n1)
	log := newLogger(t, "n2")
	j, err := Join(ctx, peers, Request{Name: "n2", PeerURL: n2.PeerURL(), Logf: log.Logf})
	require.NoError(t, err)
	n2.start(j.InitialCluster, "existing")
	local := n2.client(n2)
	// A learner answers a status request once it has caught up.
	require.Eventually(t, func() bool {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		st, err := local.Status(sctx, n2.ClientURL())
		return err == nil && st.IsLearner
	}, 30*time.Second, 100*time.Millisecond, "n2 serves as a learner")

	require.ErrorIs(t, Claim(ctx, local, c.token), errNotForLearner, "a learner refuses the claim")
	var lines []string
	logf := func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) }
	// Long enough for a refusal under make test's load (a 500 ms bound
	// once ran out in the first request), short enough to end the wait.
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	err = claimAsVoter(short, local, c.token, logf)
	cancel()
	require.ErrorIs(t, err, errNotForLearner)
	assert.Contains(t, err.Error(), "still a learner after")
	assert.Len(t, lines, 1, "the wait is said once: %v", lines)

	// Promoted, and claimed through its own member while it applies it.
	done := make(chan error, 1)
	go func() { done <- claimAsVoter(ctx, local, c.token, log.Logf) }()
	_, err = j.Promote(ctx)
	require.NoError(t, err)
	require.NoError(t, <-done)
	r, err := local.Get(ctx, ClusterKey)
	require.NoError(t, err)
	require.Len(t, r.Kvs, 1)
	assert.Equal(t, c.token, string(r.Kvs[0].Value))
}

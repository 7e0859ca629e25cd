package main

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/seed"
)

// TestContainerRecoverDirective loses the quorum of a 2-node cluster (n2
// stops) and recovers it by the seed's recovery directive on n1, with a
// quorum watch bound of 3s (the test hooks): n1 says the quorum is lost,
// follows the directive, keeps its database, and serves every key as the
// one member of a new cluster. n2 started on its old data is refused and
// keeps it, until it is asked to rejoin: then it moves its data aside and
// joins. A directive with a token of another cluster is refused.
func TestContainerRecoverDirective(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "n1", "n2")
	n1, n2 := c.nodes["n1"], c.nodes["n2"]
	for _, n := range []*cnode{n1, n2} {
		n.bin = buildInitHooks(t)
		n.env = []string{"ETCDBOX_TEST_QUORUM_BOUND=3s"}
		c.writeSeed(n, "recover", 2, "n1", "n2")
		n.start()
	}
	cli := c.client(n1, n2)
	c.voters(cli, 2, 2*time.Minute)
	ctx := t.Context()
	_, err := cli.Put(ctx, "kept", "1")
	require.NoError(t, err)
	a1, err := nodeapi.NewClient("https://127.0.0.1:"+strconv.Itoa(n1.apiPort), c.pkiDir)
	require.NoError(t, err)
	defer a1.Close()
	waitVoter(t, a1)
	waitRecorded(t, n1, n2)
	st, err := a1.Status(ctx)
	require.NoError(t, err)
	token := nodeapi.RecoveryToken(st.Member.ClusterID, st.Member.ID)

	// A directive for another cluster first: refused, nothing changes.
	n1.stop()
	n2.stop()
	setDirective(t, c, n1, &seed.Recovery{Survivor: "n1", Token: "recover-1-2"})
	from := len(n1.log())
	n1.start()
	n1.waitLog(from, "quorum lost: member n1", time.Minute)
	n1.waitLog(from, "the seed's recovery directive is not carried out: refused: token recover-1-2 is not this node's", time.Minute)
	assert.NotContains(t, n1.log()[from:], "recovery recover-1-2: fenced")

	// The right token: n1 recovers by itself.
	n1.stop()
	setDirective(t, c, n1, &seed.Recovery{Survivor: "n1", Token: token})
	from = len(n1.log())
	n1.start()
	n1.waitLog(from, "the seed's recovery directive names this node", time.Minute)
	n1.waitLog(from, "kept the survivor's database as", time.Minute)
	n1.waitLog(from, "recover "+token+": done", 2*time.Minute)
	only := c.client(n1)
	r, err := only.Get(ctx, "kept")
	require.NoError(t, err)
	require.Len(t, r.Kvs, 1, "the survivor's key")
	ml, err := only.MemberList(ctx)
	require.NoError(t, err)
	assert.Len(t, ml.Members, 1, "n1 is the one member")
	assert.NotEqual(t, st.Member.ClusterID, strconv.FormatUint(ml.Header.ClusterId, 16), "a new cluster ID")
	a1, err = nodeapi.NewClient("https://127.0.0.1:"+strconv.Itoa(n1.apiPort), c.pkiDir)
	require.NoError(t, err)
	defer a1.Close()
	waitStatus(t, a1, "done with the recovery", func(s nodeapi.Status) bool { return s.Recovery.Phase == nodeapi.RecoveryDone })
	st2, err := a1.Status(ctx)
	require.NoError(t, err)
	assert.FileExists(t, st2.Recovery.Snapshot, "the survivor's database is kept")
	assert.DirExists(t, st2.Recovery.Aside, "the old data dir is kept")

	// n2 with the old cluster's data: refused, data in place.
	from = len(n2.log())
	n2.start()
	n2.waitLog(from, "refused: this node's data is a member of cluster "+st.Member.ClusterID, time.Minute)
	assert.NotContains(t, n2.log()[from:], "moved the removed member's data")
	_, err = os.Stat(n2.dir + "/data/etcd/member/wal")
	assert.NoError(t, err, "n2 keeps its data")
	ml, err = only.MemberList(ctx)
	require.NoError(t, err)
	assert.Len(t, ml.Members, 1, "n2 did not join")
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = c.client(n2).Status(sctx, n2.endpoint())
	assert.Error(t, err, "n2's etcd does not run on the old data")

	// Asked to rejoin (as etcdbox recover asks every node that answers),
	// n2 moves its data aside and joins the new cluster; asked again, it
	// says there is nothing to do.
	a2, err := nodeapi.NewClient("https://127.0.0.1:"+strconv.Itoa(n2.apiPort), c.pkiDir)
	require.NoError(t, err)
	defer a2.Close()
	rj := nodeapi.RecoverRequest{Survivor: "n1", Token: token, Rejoin: true}
	rc, err := a2.Recover(ctx, rj)
	require.NoError(t, err)
	assert.False(t, rc.NoOp, rc.Message)
	assert.DirExists(t, rc.Aside, "n2's old data is kept aside")
	c.voters(only, 2, 2*time.Minute)
	waitDone(t, a2)
	r, err = c.client(n2).Get(ctx, "kept")
	require.NoError(t, err)
	assert.Len(t, r.Kvs, 1, "n2 serves the survivor's key")
	rc, err = a2.Recover(ctx, rj)
	require.NoError(t, err)
	assert.True(t, rc.NoOp)
	assert.Contains(t, rc.Message, "nothing to do")
	// The survivor refuses to rejoin.
	_, err = a1.Recover(ctx, rj)
	assert.ErrorContains(t, err, "this node is the survivor")
}

// setDirective rewrites n's seed with the recovery directive d.
func setDirective(t *testing.T, c *cluster, n *cnode, d *seed.Recovery) {
	t.Helper()
	editSeed(t, n, func(s *seed.Seed) { s.Recovery = d })
}

// editSeed rewrites n's seed as edit changes it.
func editSeed(t *testing.T, n *cnode, edit func(*seed.Seed)) {
	t.Helper()
	b, err := os.ReadFile(n.seed)
	require.NoError(t, err)
	s, err := seed.Parse(b)
	require.NoError(t, err)
	edit(s)
	out, err := s.Marshal()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(n.seed, out, 0o600))
}

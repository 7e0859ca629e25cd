package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/etcdbox/etcdbox/internal/etcdtest"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/nodeapi/server"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/rollout"
)

func TestDecommissionedReadsTheTombstone(t *testing.T) {
	dir := t.TempDir()
	dead, why := decommissioned(dir)
	assert.False(t, dead)
	assert.Empty(t, why)

	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	require.NoError(t, writeTombstone(dir, tombstone{Name: "n3", MemberID: "8e9e05c52164694d", Reason: "scale 5 -> 3", At: at}))
	dead, why = decommissioned(dir)
	assert.True(t, dead)
	assert.Equal(t, "decommissioned at 2030-01-02T03:04:05Z (member 8e9e05c52164694d, reason: scale 5 -> 3); this node does not rejoin: wipe DATA to add it as a new member ("+filepath.Join(dir, "decommissioned")+")", why)

	require.NoError(t, os.WriteFile(filepath.Join(dir, tombstoneFile), []byte("{"), 0o600))
	dead, why = decommissioned(dir)
	assert.True(t, dead, "a damaged tombstone still keeps the node out")
	assert.Contains(t, why, "unexpected end of JSON input")
}

// TestDecommissionJobRealEtcd runs the node side of a decommission against
// four bin/etcd members on loopback.
func TestDecommissionJobRealEtcd(t *testing.T) {
	t.Parallel()
	pkiDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(pkiDir, false))
	c := etcdtest.Start(t, pkiDir, "n1", "n2", "n3", "n4")
	ctx := t.Context()
	job := func(name string) decommissionJob {
		return decommissionJob{
			name: name, stateDir: filepath.Join(t.TempDir(), "state"), tls: c.TLS(),
			local: func() (*clientv3.Client, error) { return rollout.Dial([]string{c.Member(t, name).ClientURL}, c.TLS()) },
			now:   func() time.Time { return time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC) },
			logf:  t.Logf,
		}
	}
	n4 := job("n4")

	t.Run("another node's name", func(t *testing.T) {
		_, err := n4.run(ctx, nodeapi.DecommissionRequest{Node: "n3"})
		require.ErrorIs(t, err, server.ErrBadRequest)
		assert.EqualError(t, err, "bad request: this node is n4, not n3")
	})

	t.Run("lock held", func(t *testing.T) {
		s, err := concurrency.NewSession(c.Client(t), concurrency.WithTTL(5))
		require.NoError(t, err)
		defer s.Close()
		m := concurrency.NewMutex(s, rollout.MembershipLockKey)
		require.NoError(t, m.Lock(ctx))
		_, err = n4.run(ctx, nodeapi.DecommissionRequest{Node: "n4"})
		require.ErrorIs(t, err, server.ErrRefused)
		require.ErrorIs(t, err, rollout.ErrMembershipLocked)
		require.NoError(t, m.Unlock(ctx))
		dead, _ := decommissioned(n4.stateDir)
		assert.False(t, dead, "no tombstone without a removal")
	})

	t.Run("removes itself", func(t *testing.T) {
		d, err := n4.run(ctx, nodeapi.DecommissionRequest{Node: "n4", Reason: "scale down"})
		require.NoError(t, err)
		assert.Equal(t, "n4", d.Node)
		assert.Equal(t, "scale down", d.Reason)
		assert.NotEmpty(t, d.MemberID)
		assert.Equal(t, filepath.Join(n4.stateDir, "decommissioned"), d.Tombstone)
		dead, why := decommissioned(n4.stateDir)
		assert.True(t, dead)
		assert.Contains(t, why, "member "+d.MemberID+", reason: scale down")
		ml, err := c.Client(t, c.Member(t, "n1").ClientURL).MemberList(ctx)
		require.NoError(t, err)
		assert.Len(t, ml.Members, 3)
		for _, m := range ml.Members {
			assert.NotEqual(t, "n4", m.Name)
		}
		_, err = n4.run(ctx, nodeapi.DecommissionRequest{Node: "n4"})
		require.ErrorIs(t, err, server.ErrBusy, "a second decommission")
		assert.Contains(t, err.Error(), "decommissioned at 2030-01-02T03:04:05Z")
	})

	t.Run("refused: quorum", func(t *testing.T) {
		c.Kill("n1")
		n3 := job("n3")
		_, err := n3.run(ctx, nodeapi.DecommissionRequest{Node: "n3"})
		require.ErrorIs(t, err, server.ErrRefused)
		require.ErrorIs(t, err, rollout.ErrRemoveRefused)
		assert.Contains(t, err.Error(), "removing n3 would leave 1 healthy of 2 voters, below their quorum of 2")
		dead, _ := decommissioned(n3.stateDir)
		assert.False(t, dead)
	})
}

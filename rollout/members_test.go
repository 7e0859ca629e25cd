package rollout

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/etcdbox/etcdbox/init/member"
	"github.com/etcdbox/etcdbox/internal/etcdtest"
	"github.com/etcdbox/etcdbox/pki"
)

func TestMembershipLockKeyIsTheJoinsKey(t *testing.T) {
	assert.Equal(t, member.LockKey, MembershipLockKey, "joins and removals must take the same lock")
}

func TestCheckRemove(t *testing.T) {
	voter := func(id uint64, name string, healthy bool) MemberState {
		m := MemberState{ID: id, Name: name, Healthy: healthy}
		if !healthy {
			m.Problem = "connection refused"
		}
		return m
	}
	learner := func(id uint64, name string, healthy bool) MemberState {
		m := voter(id, name, healthy)
		m.Learner = true
		return m
	}
	three := []MemberState{voter(1, "n1", true), voter(2, "n2", true), voter(3, "n3", true)}
	oneDown := []MemberState{voter(1, "n1", true), voter(2, "n2", true), voter(3, "n3", false)}
	for _, tc := range []struct {
		name    string
		members []MemberState
		remove  string
		want    string // "" means allowed
	}{
		{"healthy follower of three", three, "n2", ""},
		{"by hex ID", three, "2", ""},
		{"not a member", three, "n9", "removal refused: n9 is not a member; the members are n1, n2, n3"},
		{"last member", []MemberState{voter(1, "n1", true)}, "n1", "n1 is the last member"},
		{"down member of three", oneDown, "n3", ""},
		{"healthy member while another is down", oneDown, "n1",
			"removing n1 would leave 1 healthy of 2 voters, below their quorum of 2 (not healthy: n3: connection refused)"},
		{"five with two down, remove a down one", []MemberState{voter(1, "n1", true), voter(2, "n2", true), voter(3, "n3", true), voter(4, "n4", false), voter(5, "n5", false)}, "n5", ""},
		{"five with two down, remove a healthy one", []MemberState{voter(1, "n1", true), voter(2, "n2", true), voter(3, "n3", true), voter(4, "n4", false), voter(5, "n5", false)}, "n1",
			"would leave 2 healthy of 4 voters, below their quorum of 3"},
		{"learner, quorum already broken", []MemberState{voter(1, "n1", true), voter(2, "n2", false), voter(3, "n3", false), learner(4, "n4", true)}, "n4", ""},
		{"learners do not count towards the quorum", []MemberState{voter(1, "n1", true), voter(2, "n2", true), learner(3, "n3", true)}, "n1",
			""},
		{"last voter with a learner", []MemberState{voter(1, "n1", true), learner(2, "n2", true)}, "n1", "n1 is the last voting member; promote a learner first"},
		{"unstarted member by ID", []MemberState{voter(1, "n1", true), voter(2, "n2", true), {ID: 0xab, Learner: true}}, "ab", ""},
		{"unstarted voter does not count as healthy", []MemberState{voter(1, "n1", true), voter(2, "n2", true), {ID: 0xab, Problem: "not started"}}, "n1",
			"removing n1 would leave 1 healthy of 2 voters, below their quorum of 2 (not healthy: ab (unstarted): not started)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckRemove(tc.members, tc.remove)
			if tc.want == "" {
				assert.NoError(t, err, "CheckRemove(%s)", tc.remove)
				return
			}
			require.ErrorIs(t, err, ErrRemoveRefused)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestRemoveRealEtcd runs Remove against three bin/etcd members on
// loopback: a refusal while the membership lock is held, a refusal that
// would break the quorum, and removals that go through (the leader's
// after handing leadership over).
func TestRemoveRealEtcd(t *testing.T) {
	pkiDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(pkiDir, false))
	c := etcdtest.Start(t, pkiDir, "n1", "n2", "n3", "n4")
	cli := c.Client(t)
	ctx := t.Context()
	r := Removal{Client: cli, TLS: c.TLS(), Endpoints: c.Endpoints(), Logf: t.Logf}

	t.Run("lock held", func(t *testing.T) {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(5))
		require.NoError(t, err)
		defer s.Close()
		m := concurrency.NewMutex(s, member.LockKey) // as a join holds it
		require.NoError(t, m.Lock(ctx))
		_, err = r.Remove(ctx, "n4")
		require.ErrorIs(t, err, ErrMembershipLocked)
		assert.Contains(t, err.Error(), "/etcdbox/membership is held")
		require.NoError(t, m.Unlock(ctx))
	})

	t.Run("a down member goes", func(t *testing.T) {
		c.Kill("n4")
		var before []string
		r := r
		r.BeforeRemove = func(m MemberState) error { before = append(before, m.Name); return nil }
		m, err := r.Remove(ctx, "n4")
		require.NoError(t, err)
		assert.Equal(t, "n4", m.Name)
		assert.Equal(t, []string{"n4"}, before, "BeforeRemove runs once, with the member")
	})

	t.Run("quorum", func(t *testing.T) {
		c.Kill("n3")
		// Three voters, n3 down: removing a healthy one leaves 1 of 2.
		_, err := r.Remove(ctx, "n2")
		require.ErrorIs(t, err, ErrRemoveRefused)
		assert.Contains(t, err.Error(), "removing n2 would leave 1 healthy of 2 voters, below their quorum of 2 (not healthy: n3:")
		ms, err := ObserveMembers(ctx, cli, c.Endpoints())
		require.NoError(t, err)
		assert.Len(t, ms.Members, 3, "nothing was removed")
		_, err = r.Remove(ctx, "n3")
		require.NoError(t, err, "the down member may go: 2 of 2 remain healthy")
	})

	t.Run("the leader hands over first", func(t *testing.T) {
		ms, err := ObserveMembers(ctx, cli, c.Endpoints())
		require.NoError(t, err)
		var leader MemberState
		for _, m := range ms.Members {
			if m.ID == ms.Leader {
				leader = m
			}
		}
		require.NotEmpty(t, leader.Name, "a leader in %+v", ms)
		require.Len(t, ms.Members, 2)
		_, err = r.Remove(ctx, leader.Name)
		require.NoError(t, err)
		// The removed member's etcd answers "raft: stopped" until it
		// exits, and a client that still lists it may pick it: go on
		// through the survivor alone, as an operator names what is left.
		var survivor string
		for _, m := range ms.Members {
			if m.Name != leader.Name {
				survivor = c.Member(t, m.Name).ClientURL
			}
		}
		cli := c.Client(t, survivor)
		r := r
		r.Client, r.Endpoints = cli, []string{survivor}
		ms, err = ObserveMembers(ctx, cli, r.Endpoints)
		require.NoError(t, err)
		require.Len(t, ms.Members, 1)
		assert.NotEqual(t, leader.Name, ms.Members[0].Name)
		assert.Equal(t, ms.Members[0].ID, ms.Leader, "the survivor leads")
		_, err = r.Remove(ctx, ms.Members[0].Name)
		require.ErrorIs(t, err, ErrRemoveRefused)
		assert.Contains(t, err.Error(), "is the last member")
	})
}

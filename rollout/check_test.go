package rollout

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/nodeapi"
)

// healthy returns a cluster of healthy voters named names, the first
// leading, on slot a, blessed, running etcd version.
func healthy(version string, names ...string) Cluster {
	var c Cluster
	for i, n := range names {
		id := uint64(0x100 + i)
		c.Nodes = append(c.Nodes, NodeState{Name: n, Status: nodeapi.Status{
			Name: n, Slot: "a", Blessed: true, EtcdVersion: version,
			Slots:  []nodeapi.Slot{{Name: "a", State: nodeapi.SlotBlessed}, {Name: "b", State: nodeapi.SlotEmpty}},
			Member: nodeapi.Member{ID: memberID(id), Role: nodeapi.RoleVoter, Healthy: true, Leader: i == 0},
		}})
		c.Members = append(c.Members, MemberState{ID: id, Name: n, Healthy: true, Version: version})
	}
	c.Leader = 0x100
	return c
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(c *Cluster)
		want   string // "" means ready
	}{
		{"healthy", func(*Cluster) {}, ""},
		{"node API down", func(c *Cluster) { c.Nodes[1].Err = errors.New("connection refused") }, "node n2: node API: connection refused"},
		{"learner", func(c *Cluster) { c.Nodes[2].Status.Member.Role = nodeapi.RoleLearner; c.Members[2].Learner = true }, "node n3: a learner, not a voting member; member n3: a learner, not a voting member"},
		{"unhealthy node", func(c *Cluster) { c.Nodes[0].Status.Member.Healthy = false }, "node n1: member not healthy"},
		{"unhealthy member", func(c *Cluster) {
			c.Members[1].Healthy, c.Members[1].Problem = false, "no endpoint of this roll answers for it"
		}, "member n2: not healthy: no endpoint of this roll answers for it"},
		{"not started", func(c *Cluster) { c.Members = append(c.Members, MemberState{ID: 0xabc}) }, "member abc: not started; member abc: no node of this roll runs it (name every node)"},
		{"member without node", func(c *Cluster) { c.Members = append(c.Members, MemberState{ID: 0xabc, Name: "n4", Healthy: true}) }, "member n4: no node of this roll runs it (name every node)"},
		{"node not a member", func(c *Cluster) {
			c.Nodes[2].Status.Member = nodeapi.Member{Role: nodeapi.RoleNone}
			c.Members = c.Members[:2]
		}, "node n3: not a member"},
		{"gate under way", func(c *Cluster) { c.Nodes[1].Status.Slot, c.Nodes[1].Status.Blessed = "b", false }, "node n2: slot b is not blessed yet (health gate under way)"},
		{"staging", func(c *Cluster) {
			c.Nodes[0].Status.Upgrade = nodeapi.UpgradeProgress{Phase: nodeapi.PhasePulling, Target: "r/x@sha256:1"}
		}, "node n1: staging r/x@sha256:1"},
		{"alarm", func(c *Cluster) { c.Alarms = []string{"NOSPACE on 101"} }, "alarm NOSPACE on 101"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := healthy("3.7.3", "n1", "n2", "n3")
			tc.change(&c)
			err := Check(c)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrNotReady)
			assert.Equal(t, "cluster not ready: "+tc.want, err.Error())
		})
	}
}

func TestOrder(t *testing.T) {
	for _, tc := range []struct {
		name   string
		names  []string
		leader string
		want   []string
	}{
		{"leader last", []string{"n1", "n2", "n3"}, "n1", []string{"n2", "n3", "n1"}},
		{"followers sorted", []string{"n3", "n1", "n2"}, "n2", []string{"n1", "n3", "n2"}},
		{"no leader known", []string{"n2", "n1"}, "", []string{"n1", "n2"}},
		{"single", []string{"n1"}, "n1", []string{"n1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Order(tc.names, tc.leader), "Order(%v, %q)", tc.names, tc.leader)
		})
	}
}

func TestLeaderAndTransferee(t *testing.T) {
	c := healthy("3.7.3", "n1", "n2", "n3")
	assert.Equal(t, "n1", c.LeaderName())
	id, name, ok := Transferee(c, "n1", []string{"n3"})
	require.True(t, ok)
	assert.Equal(t, "n3", name, "an upgraded follower first")
	assert.Equal(t, uint64(0x102), id)
	c.Nodes[2].Status.Member.Healthy = false
	_, name, ok = Transferee(c, "n1", []string{"n3"})
	require.True(t, ok)
	assert.Equal(t, "n2", name, "an unhealthy upgraded follower is passed over")
	_, _, ok = Transferee(healthy("3.7.3", "n1"), "n1", nil)
	assert.False(t, ok, "a single member has no one to hand over to")
}

func TestJudge(t *testing.T) {
	rebootAt := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	now := rebootAt.Add(time.Minute)
	base := healthy("3.7.3", "n1").Nodes[0].Status
	with := func(f func(s *nodeapi.Status)) nodeapi.Status {
		s := base
		s.Slots = append([]nodeapi.Slot(nil), base.Slots...)
		s.Uptime = 20 * time.Second
		f(&s)
		return s
	}
	for _, tc := range []struct {
		name    string
		st      nodeapi.Status
		err     error
		want    Outcome
		wantWhy string
	}{
		{"down", nodeapi.Status{}, errors.New("EOF"), Waiting, "node API does not answer"},
		{"before the reboot", with(func(s *nodeapi.Status) { s.Uptime = time.Hour }), nil, Waiting, "not rebooted yet"},
		{"gate under way", with(func(s *nodeapi.Status) { s.Slot, s.Blessed = "b", false }), nil, Waiting, "on slot b, health gate under way (member voter, healthy true)"},
		{"upgraded", with(func(s *nodeapi.Status) { s.Slot = "b" }), nil, Upgraded, "on slot b, blessed, healthy voter"},
		{"blessed, not healthy yet", with(func(s *nodeapi.Status) { s.Slot, s.Member.Healthy = "b", false }), nil, Waiting, "on slot b, blessed, member voter, healthy false"},
		{"rolled back with a reason", with(func(s *nodeapi.Status) {
			s.Slots[1] = nodeapi.Slot{Name: "b", State: nodeapi.SlotBad}
			s.LastRollback = "slot b: gate failed: not a voting member after 120s"
		}), nil, RolledBack, "slot b: gate failed: not a voting member after 120s"},
		{"rolled back without a reason", with(func(s *nodeapi.Status) { s.Slots[1] = nodeapi.Slot{Name: "b", State: nodeapi.SlotBad} }), nil, RolledBack, "back on slot a, slot b is bad"},
		{"old slot, new one has tries left", with(func(s *nodeapi.Status) { s.Slots[1] = nodeapi.Slot{Name: "b", State: nodeapi.SlotTrying, TriesLeft: 2} }), nil, Waiting, "on slot a, slot b is trying (tries left 2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := Judge(tc.st, tc.err, "a", "b", rebootAt, now)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.wantWhy, why)
		})
	}
}

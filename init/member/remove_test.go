package member

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMayRemove(t *testing.T) {
	voter := func(id uint64, name string, healthy bool) Member {
		return Member{ID: id, Name: name, PeerURLs: []string{"https://" + name + ":2380"},
			ClientURLs: []string{"https://" + name + ":2379"}, Started: true, Healthy: healthy}
	}
	a, b := voter(0xa, "a", true), voter(0xb, "b", true)
	down := voter(0xc, "self", false) // started once, does not answer this node
	up := voter(0xc, "self", true)    // answers this node
	unstarted := Member{ID: 0xc, PeerURLs: []string{"https://self:2380"}}
	learner := with(down, func(m *Member) { m.IsLearner = true })
	bDown := voter(0xb, "b", false)
	e := voter(0xe, "e", true)
	active := func(ids ...uint64) map[uint64]bool {
		m := map[uint64]bool{}
		for _, id := range ids {
			m[id] = true
		}
		return m
	}
	tests := []struct {
		name   string
		facts  RemovalFacts
		stale  Member
		ok     bool
		err    error
		reason string
	}{
		{
			name:  "unstarted, no leader view",
			facts: RemovalFacts{Members: []Member{a, b, unstarted}},
			stale: unstarted, ok: true, reason: "it never started; 2 of 2 remaining voters healthy (answering this node), quorum 2",
		},
		{
			name:  "unstarted, leader view",
			facts: RemovalFacts{Members: []Member{a, b, unstarted}, Leader: 0xa, LeaderActive: active(0xb)},
			stale: unstarted, ok: true, reason: "it never started; 2 of 2 remaining voters healthy (per the leader), quorum 2",
		},
		{
			name:  "leader says unreachable",
			facts: RemovalFacts{Members: []Member{a, b, down}, Leader: 0xa, LeaderActive: active(0xb)},
			stale: down, ok: true, reason: "the leader a reports it unreachable",
		},
		{
			name:  "leader says reachable, this node cut off from it",
			facts: RemovalFacts{Members: []Member{a, b, down}, Leader: 0xa, LeaderActive: active(0xb, 0xc)},
			stale: down, err: ErrNameInUse, reason: "the leader a reaches self",
		},
		{
			name:  "answers this node, leader says unreachable",
			facts: RemovalFacts{Members: []Member{a, b, up}, Leader: 0xa, LeaderActive: active(0xb)},
			stale: up, err: ErrNameInUse, reason: "answers at https://self:2379",
		},
		{
			name:  "answers this node, no leader view",
			facts: RemovalFacts{Members: []Member{a, b, up}},
			stale: up, err: ErrNameInUse, reason: "answers at",
		},
		{
			name:  "is the leader",
			facts: RemovalFacts{Members: []Member{a, b, down}, Leader: 0xc, LeaderActive: active(0xa, 0xb)},
			stale: down, err: ErrNameInUse, reason: "is the leader",
		},
		{
			name:  "started, no leader view",
			facts: RemovalFacts{Members: []Member{a, b, down}, Leader: 0xa},
			stale: down, err: ErrUnsafeRemoval, reason: "no leader-side view",
		},
		{
			name:  "started, no leader at all",
			facts: RemovalFacts{Members: []Member{a, b, down}},
			stale: down, err: ErrUnsafeRemoval, reason: "no leader-side view",
		},
		{
			name:  "remaining voters would lose quorum",
			facts: RemovalFacts{Members: []Member{a, bDown, down}, Leader: 0xa, LeaderActive: active()},
			stale: down, err: ErrUnsafeRemoval, reason: "would lose quorum: 1 of 2 healthy (per the leader), quorum 2",
		},
		{
			name:  "remaining voters would lose quorum, unstarted, no leader view",
			facts: RemovalFacts{Members: []Member{a, bDown, unstarted}},
			stale: unstarted, err: ErrUnsafeRemoval, reason: "would lose quorum: 1 of 2 healthy (answering this node), quorum 2",
		},
		{
			name: "quorum of five without it",
			facts: RemovalFacts{Members: []Member{a, bDown, voter(0xd, "d", true), e, down, voter(0xf, "f", false)},
				Leader: 0xa, LeaderActive: active(0xd, 0xe)},
			stale: down, ok: true, reason: "3 of 5 remaining voters healthy (per the leader), quorum 3",
		},
		{
			name: "leader view counts, not this node's",
			// b answers this node, but the leader does not reach it: a
			// removal would leave a and e, one short of 3 of 4.
			facts: RemovalFacts{Members: []Member{a, b, e, voter(0xd, "d", true), down}, Leader: 0xa, LeaderActive: active(0xe)},
			stale: down, err: ErrUnsafeRemoval, reason: "2 of 4 healthy (per the leader), quorum 3",
		},
		{
			name:  "another removal in this round does not count",
			facts: RemovalFacts{Members: []Member{a, b, e, down}, Leader: 0xa, LeaderActive: active(0xb, 0xe), Removing: active(0xe)},
			stale: down, ok: true, reason: "2 of 2 remaining voters",
		},
		{
			name:  "the last voter",
			facts: RemovalFacts{Members: []Member{unstarted}},
			stale: unstarted, err: ErrUnsafeRemoval, reason: "0 of 0 healthy",
		},
		{
			name:  "learner stale, leader says unreachable",
			facts: RemovalFacts{Members: []Member{a, bDown, learner}, Leader: 0xa, LeaderActive: active()},
			stale: learner, ok: true, reason: "the leader a reports it unreachable",
		},
		{
			name:  "learner stale, leader reaches it",
			facts: RemovalFacts{Members: []Member{a, b, learner}, Leader: 0xa, LeaderActive: active(0xb, 0xc)},
			stale: learner, err: ErrNameInUse, reason: "the leader a reaches",
		},
		{
			name:  "learner stale, no leader view",
			facts: RemovalFacts{Members: []Member{a, b, learner}, Leader: 0xa},
			stale: learner, err: ErrUnsafeRemoval, reason: "no leader-side view",
		},
		{
			name:  "orphan learner, never started",
			facts: RemovalFacts{Members: []Member{a, b, {ID: 0x9, IsLearner: true}}},
			stale: Member{ID: 0x9, IsLearner: true}, ok: true, reason: "it never started",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, reason, err := MayRemove(tt.facts, tt.stale)
			assert.Equal(t, tt.ok, ok, "MayRemove(%s) = %t (%s), want %t", tt.stale, ok, reason, tt.ok)
			if tt.err != nil {
				assert.ErrorIs(t, err, tt.err)
			} else {
				assert.NoError(t, err)
			}
			assert.Contains(t, reason, tt.reason)
		})
	}
}

func TestParseActivePeers(t *testing.T) {
	const metrics = `# HELP etcd_network_active_peers The current number of active peer connections.
# TYPE etcd_network_active_peers gauge
etcd_network_active_peers{Local="a",Remote="b"} 1
etcd_network_active_peers{Local="a",Remote="c"} 0
etcd_network_active_peers{Local="f",Remote="d"} 1
etcd_network_disconnected_peers_total{Local="a",Remote="c"} 1
`
	tests := []struct {
		name    string
		text    string
		leader  uint64
		want    map[uint64]bool
		wantErr string
	}{
		{name: "leader", text: metrics + "etcd_server_id{server_id=\"a\"} 1\netcd_server_is_leader 1\n", leader: 0xa, want: map[uint64]bool{0xb: true}},
		{name: "leader, no peers", text: "etcd_server_id{server_id=\"a\"} 1\netcd_server_is_leader 1\n", leader: 0xa, want: map[uint64]bool{}},
		{name: "another member's metrics", text: metrics + "etcd_server_id{server_id=\"f\"} 1\netcd_server_is_leader 1\n", leader: 0xa, wantErr: "metrics of member f"},
		{name: "no server id", text: metrics + "etcd_server_is_leader 1\n", leader: 0xa, wantErr: "metrics of member 0"},
		{name: "no longer leader", text: metrics + "etcd_server_id{server_id=\"a\"} 1\netcd_server_is_leader 0\n", leader: 0xa, wantErr: "no longer the leader"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseActivePeers(strings.NewReader(tt.text), tt.leader)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got, "parseActivePeers = %v, want %v", got, tt.want)
		})
	}
}

func TestHTTPURLs(t *testing.T) {
	port := func(p int) func(string) int { return func(string) int { return p } }
	m := Member{Name: "n1", ClientURLs: []string{"https://10.0.0.1:2379/", "https://[fd00::1]:2379"}}
	for _, tt := range []struct {
		name     string
		m        Member
		httpPort func(string) int
		want     []string
	}{
		{"each client URL's host on the HTTP port, then the client URLs", m, port(2382),
			[]string{"https://10.0.0.1:2382", "https://[fd00::1]:2382", "https://10.0.0.1:2379", "https://[fd00::1]:2379"}},
		{"a shared port is tried once", m, port(2379), []string{"https://10.0.0.1:2379", "https://[fd00::1]:2379"}},
		{"no HTTP port known: the client URLs", m, nil, []string{"https://10.0.0.1:2379", "https://[fd00::1]:2379"}},
		{"the port by the member's name", Member{Name: "n2", ClientURLs: []string{"https://127.0.0.1:12379"}},
			func(name string) int { return map[string]int{"n2": 12382}[name] }, []string{"https://127.0.0.1:12382", "https://127.0.0.1:12379"}},
		{"no client URL, nothing to try", Member{Name: "n3"}, port(2382), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, HTTPURLs(tt.m, tt.httpPort))
		})
	}
}

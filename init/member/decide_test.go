package member

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

const (
	selfURL  = "https://n2.example.internal:2380"
	otherURL = "https://n1.example.internal:2380"
)

// Members as a peer lists them. n1 is a healthy voter in every cluster.
var (
	n1 = Member{ID: 1, Name: "n1", PeerURLs: []string{otherURL}, ClientURLs: []string{"https://n1.example.internal:2379"}, Started: true, Healthy: true}
	n3 = Member{ID: 3, Name: "n3", PeerURLs: []string{"https://n3.example.internal:2380"}, ClientURLs: []string{"https://n3.example.internal:2379"}, Started: true, Healthy: true}

	selfVoter        = Member{ID: 2, Name: "n2", PeerURLs: []string{selfURL}, ClientURLs: []string{"https://n2.example.internal:2379"}, Started: true}
	selfVoterHealthy = with(selfVoter, func(m *Member) { m.Healthy = true })
	selfLearner      = with(selfVoter, func(m *Member) { m.IsLearner = true })
	selfLearnerUp    = with(selfLearner, func(m *Member) { m.Healthy = true })
	// Added by MemberAddAsLearner, never started: no name, no client URLs.
	selfOrphan = Member{ID: 22, PeerURLs: []string{selfURL}, IsLearner: true}
	// An initial member that has not started: named by --initial-cluster.
	selfInitialSlot = Member{ID: 2, Name: "n2", PeerURLs: []string{selfURL}}
	// Added by MemberAdd as a voter, never started.
	selfAddedVoter = Member{ID: 23, PeerURLs: []string{selfURL}}
	// Same name, another peer URL (the node was rebuilt elsewhere).
	selfElsewhere = Member{ID: 24, Name: "n2", PeerURLs: []string{"https://10.9.9.9:2380"}, ClientURLs: []string{"https://10.9.9.9:2379"}, Started: true}
	// Another name on this node's peer URL.
	otherOnSelfURL = Member{ID: 25, Name: "old", PeerURLs: []string{selfURL}, ClientURLs: []string{"https://n2.example.internal:2379"}, Started: true}
	otherOrphan    = Member{ID: 44, PeerURLs: []string{"https://n4.example.internal:2380"}, IsLearner: true}
)

func with(m Member, f func(*Member)) Member { f(&m); return m }

// facts are those of node n2, an expected initial member of demo.
func facts(f func(*Facts)) Facts {
	x := Facts{
		Self: "n2", SelfPeerURL: selfURL, Cluster: "demo",
		ExpectedInitial: []string{"n1", "n2", "n3"},
		Formation:       Record{Nonce: nonce("n2")},
	}
	f(&x)
	return x
}

func reachable(ms ...Member) func(*Facts) {
	return func(f *Facts) { f.Reachable, f.Members = true, ms }
}

func and(fs ...func(*Facts)) func(*Facts) {
	return func(x *Facts) {
		for _, f := range fs {
			f(x)
		}
	}
}

var (
	hasData     = func(f *Facts) { f.HasData = true }
	removed     = func(f *Facts) { f.RemovedFromCluster = true }
	wasMember   = func(f *Facts) { f.WasMember = true }
	notExpected = func(f *Facts) { f.ExpectedInitial = []string{"n1"} }
	claimed     = func(name string) func(*Facts) { return func(f *Facts) { f.PeerCluster = name } }
	none        = func(*Facts) {}
	clusters    = func(data, peers string) func(*Facts) {
		return func(f *Facts) { f.DataCluster, f.PeerClusterID = data, peers }
	}
)

func TestDecide(t *testing.T) {
	tests := []struct {
		name    string
		facts   Facts
		action  Action
		promote bool
		stale   []Member
		reason  string // substring of Plan.Reason
	}{
		// A node with data restarts with it, whatever it sees.
		{name: "data, no peer", facts: facts(hasData), action: Restart, reason: "restart with it"},
		{name: "data, not expected, no peer", facts: facts(and(hasData, notExpected)), action: Restart},
		{name: "data, voting member", facts: facts(and(hasData, reachable(n1, selfVoterHealthy, n3))), action: Restart},
		{name: "data, voting member not answering yet", facts: facts(and(hasData, reachable(n1, selfVoter, n3))), action: Restart},
		{name: "data, absent from the list", facts: facts(and(hasData, reachable(n1, n3))), action: Restart},
		{name: "data, other cluster claimed", facts: facts(and(hasData, reachable(n1), claimed("prod"))), action: Restart},
		{name: "data, was member", facts: facts(and(hasData, wasMember)), action: Restart},
		{
			name: "data, still a learner", facts: facts(and(hasData, reachable(n1, selfLearner))),
			action: Restart, promote: true, reason: "promote it once it has caught up",
		},
		{name: "data, learner but no peer answers", facts: facts(hasData), action: Restart},

		// Removed: rejoin through a reachable peer, never otherwise.
		{
			name: "removed, reachable", facts: facts(and(hasData, removed, reachable(n1, n3))),
			action: RejoinAfterRemoval, reason: "move its data aside",
		},
		{
			name: "removed, stale entry left", facts: facts(and(hasData, removed, reachable(n1, selfVoter))),
			action: RejoinAfterRemoval, stale: []Member{selfVoter},
		},
		{name: "removed, no peer", facts: facts(and(hasData, removed)), action: Wait, reason: "data stays in place"},
		{name: "removed, other cluster", facts: facts(and(hasData, removed, reachable(n1), claimed("prod"))), action: Wait, reason: `"prod"`},
		{
			name: "removed, another node runs as n2", facts: facts(and(hasData, removed, reachable(n1, selfVoterHealthy))),
			action: Wait, reason: "another node runs as n2",
		},
		{name: "removed earlier, data moved aside", facts: facts(and(removed, reachable(n1, n3))), action: JoinAsLearner},

		// Data of a cluster that a recovery or a restore replaced: never
		// started, never moved.
		{
			name: "data of an old cluster", facts: facts(and(hasData, reachable(n1, n3), clusters("c0ffee", "beef"))),
			action: Wait, reason: "refused: this node's data is a member of cluster c0ffee, but the peers run cluster beef",
		},
		{
			name: "data of an old cluster, and etcd said removed", facts: facts(and(hasData, removed, reachable(n1, n3), clusters("c0ffee", "beef"))),
			action: Wait, reason: "refused: this node's data is a member of cluster c0ffee",
		},
		{name: "data of this cluster", facts: facts(and(hasData, reachable(n1, n3), clusters("beef", "beef"))), action: Restart},
		{name: "data, its cluster unknown", facts: facts(and(hasData, reachable(n1, n3), clusters("", "beef"))), action: Restart},
		{name: "data of an old cluster, no peer answers", facts: facts(and(hasData, clusters("c0ffee", ""))), action: Restart},

		// No data, no peer: bootstrap only as an expected initial member.
		{name: "no data, no peer, expected, all fresh", facts: facts(freshPeers), action: Bootstrap, reason: "every expected initial member (n1, n2, n3) answers"},
		{name: "no data, no peer, expected, no answers", facts: facts(none), action: Wait, reason: "waiting for n1 (not asked), n3 (not asked)"},
		{name: "no data, no peer, not expected", facts: facts(notExpected), action: Wait, reason: "not an expected initial member"},
		{name: "no data, no peer, no expected list", facts: facts(func(f *Facts) { f.ExpectedInitial = nil }), action: Wait},
		{name: "no data, no peer, was member", facts: facts(wasMember), action: Wait, reason: "never bootstraps again"},

		// No data, a cluster answers: join as a learner.
		{name: "no data, absent, expected", facts: facts(reachable(n1, n3)), action: JoinAsLearner},
		{name: "no data, absent, not expected", facts: facts(and(notExpected, reachable(n1))), action: JoinAsLearner},
		{name: "no data, absent, unclaimed", facts: facts(and(reachable(n1), claimed(""))), action: JoinAsLearner},
		{name: "no data, absent, same cluster", facts: facts(and(reachable(n1), claimed("demo"))), action: JoinAsLearner},
		{name: "no data, other cluster", facts: facts(and(reachable(n1), claimed("prod"))), action: Wait, reason: `peers run cluster "prod"`},
		{
			name: "no data, own orphan learner", facts: facts(reachable(n1, selfOrphan)),
			action: JoinAsLearner, stale: []Member{selfOrphan}, reason: "after removing stale",
		},
		{
			name: "no data, someone else's orphan", facts: facts(reachable(n1, otherOrphan)),
			action: JoinAsLearner, // Join removes it under the lock; not this node's
		},
		{
			name: "no data, stale voter not answering", facts: facts(reachable(n1, selfVoter, n3)),
			action: JoinAsLearner, stale: []Member{selfVoter},
		},
		{
			name: "no data, stale learner not answering", facts: facts(reachable(n1, selfLearner)),
			action: JoinAsLearner, stale: []Member{selfLearner},
		},
		{name: "no data, voter with this name answers", facts: facts(reachable(n1, selfVoterHealthy)), action: Wait, reason: "another node runs as n2"},
		{name: "no data, learner with this name answers", facts: facts(reachable(n1, selfLearnerUp)), action: Wait, reason: "another node runs as n2"},
		{
			name: "no data, same name elsewhere, not answering", facts: facts(reachable(n1, selfElsewhere)),
			action: JoinAsLearner, stale: []Member{selfElsewhere},
		},
		{
			name: "no data, same name elsewhere, answering", facts: facts(reachable(n1, with(selfElsewhere, func(m *Member) { m.Healthy = true }))),
			action: Wait,
		},
		{
			name: "no data, other name on this peer URL", facts: facts(reachable(n1, otherOnSelfURL)),
			action: JoinAsLearner, stale: []Member{otherOnSelfURL},
		},
		{
			name: "no data, unstarted voter added for this node", facts: facts(reachable(n1, selfAddedVoter)),
			action: JoinAsLearner, stale: []Member{selfAddedVoter},
		},

		// A forming cluster lists this node's initial slot, unstarted.
		{
			name: "forming, expected", facts: facts(and(lateFormation, reachable(with(n1, func(m *Member) { m.ClientURLs, m.Started = nil, false }), selfInitialSlot))),
			action: Bootstrap, reason: "has not started yet",
		},
		{name: "forming, late initial member", facts: facts(and(lateFormation, reachable(n1, selfInitialSlot, n3))), action: Bootstrap, reason: "holds this node's nonce"},
		{
			name: "forming, slot unstarted, no formation answer", facts: facts(reachable(n1, selfInitialSlot, n3)),
			action: JoinAsLearner, stale: []Member{selfInitialSlot},
		},
		{
			name: "forming, slot unstarted, formation without this nonce", facts: facts(and(otherFormation, reachable(n1, selfInitialSlot, n3))),
			action: JoinAsLearner, stale: []Member{selfInitialSlot},
		},
		{
			name: "forming, slot unstarted, this node started before", facts: facts(and(lateFormation, selfStarted, reachable(n1, selfInitialSlot, n3))),
			action: JoinAsLearner, stale: []Member{selfInitialSlot},
		},
		{
			name: "forming, not expected", facts: facts(and(notExpected, reachable(n1, selfInitialSlot))),
			action: JoinAsLearner, stale: []Member{selfInitialSlot},
		},
		{
			name: "forming, was member", facts: facts(and(wasMember, reachable(n1, selfInitialSlot))),
			action: JoinAsLearner, stale: []Member{selfInitialSlot},
		},
		{
			name: "forming, slot with another peer URL", facts: facts(reachable(n1, with(selfInitialSlot, func(m *Member) { m.PeerURLs = []string{"https://10.9.9.9:2380"} }))),
			action: JoinAsLearner,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Decide(tt.facts)
			assert.Equal(t, tt.action, p.Action, "Decide(%+v).Action = %s, want %s (%s)", tt.facts, p.Action, tt.action, p.Reason)
			assert.Equal(t, tt.promote, p.Promote, "Promote (%s)", p.Reason)
			if tt.stale != nil {
				assert.Equal(t, tt.stale, p.Stale)
			}
			assert.Contains(t, p.Reason, tt.reason)
			assert.NotEmpty(t, p.Reason)
			assert.Equal(t, map[Action]string{Restart: "existing", Bootstrap: "new", JoinAsLearner: "existing", RejoinAfterRemoval: "existing"}[p.Action], p.State)
			if p.Action == Bootstrap {
				assert.NotEmpty(t, p.Token, "a bootstrap names its formation's token")
				assert.Contains(t, p.Initial, "n2")
			}
		})
	}
}

// TestDecideInvariants runs Decide over every combination of facts and
// checks the rules that keep a cluster single and its data safe.
func TestDecideInvariants(t *testing.T) {
	selves := map[string][]Member{
		"absent":           nil,
		"orphan learner":   {selfOrphan},
		"initial slot":     {selfInitialSlot},
		"added voter":      {selfAddedVoter},
		"voter down":       {selfVoter},
		"voter up":         {selfVoterHealthy},
		"learner down":     {selfLearner},
		"learner up":       {selfLearnerUp},
		"elsewhere":        {selfElsewhere},
		"other on our URL": {otherOnSelfURL},
	}
	handshakes := map[string][]Answer{
		"no answers":          nil,
		"unreachable":         {unreachable("n1"), unreachable("n3")},
		"all fresh":           {fresh("n1"), fresh("n3")},
		"one fresh":           {fresh("n1"), unreachable("n3")},
		"started with nonce":  {withData(startedIn(fresh("n1"), allNonces)), unreachable("n3")},
		"started, old nonce":  {withData(startedIn(fresh("n1"), oldNonces)), withData(startedIn(fresh("n3"), oldNonces))},
		"old cluster, data":   {fresh("n1"), withData(fresh("n3"))},
		"two formations":      {startedIn(fresh("n1"), allNonces), startedIn(fresh("n3"), oldNonces)},
		"excluded by n1":      {withWithout(fresh("n1"), "n2"), fresh("n3")},
		"started, data apart": {startedIn(fresh("n1"), allNonces), withData(fresh("n3"))},
	}
	bools := []bool{false, true}
	n := 0
	for _, data := range bools {
		for _, was := range bools {
			for _, rem := range bools {
				for _, reach := range bools {
					for _, exp := range bools {
						for _, other := range bools {
							for selfName, self := range selves {
								for hsName, hs := range handshakes {
									for _, started := range bools {
										f := Facts{
											Self: "n2", SelfPeerURL: selfURL, Cluster: "demo",
											HasData: data, WasMember: was, RemovedFromCluster: rem,
											ExpectedInitial: []string{"n1", "n3"},
											Formation:       Record{Nonce: nonce("n2")},
											Answers:         hs,
										}
										if exp {
											f.ExpectedInitial = []string{"n1", "n2", "n3"}
										}
										if started {
											selfStarted(&f)
										}
										if reach {
											f.Reachable, f.Members = true, append([]Member{n1, otherOrphan}, self...)
											if other {
												f.PeerCluster = "prod"
											}
										}
										p := Decide(f)
										n++
										desc := fmt.Sprintf("data=%v was=%v removed=%v reachable=%v expected=%v other=%v self=%s handshake=%s started=%v: %s (%s)",
											data, was, rem, reach, exp, other, selfName, hsName, started, p.Action, p.Reason)
										check(t, f, p, desc)
									}
								}
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d combinations", n)
}

func check(t *testing.T, f Facts, p Plan, desc string) {
	t.Helper()
	if p.Reason == "" {
		t.Errorf("%s: no reason", desc)
	}
	if f.HasData && !f.RemovedFromCluster && p.Action != Restart {
		t.Errorf("%s: a node with data must restart with it", desc)
	}
	// Such a node observes without health probes (ObserveMembers): its
	// plan must not depend on the members' health.
	if f.HasData && !f.RemovedFromCluster {
		g := f
		g.Members = slices.Clone(f.Members)
		for i := range g.Members {
			g.Members[i].Healthy = !g.Members[i].Healthy
		}
		if q := Decide(g); q.Action != p.Action || q.Reason != p.Reason || q.Promote != p.Promote || q.State != p.State {
			t.Errorf("%s: with every member's health the other way the plan is %s (%s): a restart with data must not depend on health", desc, q.Action, q.Reason)
		}
	}
	if f.HasData && p.Action != Restart && p.Action != RejoinAfterRemoval && p.Action != Wait {
		t.Errorf("%s: a node with data may only restart, rejoin after removal, or wait", desc)
	}
	if p.Action == RejoinAfterRemoval && !(f.HasData && f.RemovedFromCluster && f.Reachable) {
		t.Errorf("%s: rejoin after removal needs data, etcd's word, and a reachable cluster", desc)
	}
	expected := false
	for _, n := range f.ExpectedInitial {
		expected = expected || n == f.Self
	}
	if p.Action == Bootstrap {
		if f.HasData || !expected || f.WasMember || f.Formation.Started() {
			t.Errorf("%s: bootstrap needs no data, an expected initial member, never a member, never started", desc)
		}
		checkProof(t, f, p, desc)
		if f.Reachable {
			forming := false
			for _, m := range f.Members {
				forming = forming || (m.Name == f.Self && !m.Started && !m.IsLearner)
			}
			if !forming {
				t.Errorf("%s: bootstrap with a reachable cluster that is not forming", desc)
			}
		}
	}
	if p.Action == JoinAsLearner || p.Action == RejoinAfterRemoval {
		if !f.Reachable {
			t.Errorf("%s: join without a reachable cluster", desc)
		}
		if f.PeerCluster != "" && f.PeerCluster != f.Cluster {
			t.Errorf("%s: join into another cluster", desc)
		}
		for _, m := range f.Members {
			if m.Is(f.Self, f.SelfPeerURL) && m.Started && m.Healthy {
				t.Errorf("%s: join while %s answers with this identity", desc, m)
			}
		}
		for _, m := range p.Stale {
			if !m.Is(f.Self, f.SelfPeerURL) {
				t.Errorf("%s: stale %s is not this node's", desc, m)
			}
		}
	}
}

// checkProof checks a bootstrap's proof that the cluster never formed:
// its token is its nonces', holds this node's nonce, and either every
// expected initial member answered fresh, or a peer started exactly that
// formation; no answer holds data outside it.
func checkProof(t *testing.T, f Facts, p Plan, desc string) {
	t.Helper()
	if p.Token == "" || p.Token == f.Cluster || p.Token != Token(f.Cluster, p.Nonces) {
		t.Errorf("%s: token %q is not the formation's of %v", desc, p.Token, p.Nonces)
	}
	if p.Nonces[f.Self] != f.Formation.Nonce {
		t.Errorf("%s: formation %v does not hold this node's nonce", desc, p.Nonces)
	}
	late := false
	for _, a := range f.Answers {
		if a.Err != nil {
			continue
		}
		late = late || (a.Started && a.Token == p.Token)
		if (a.HasData || a.WasMember || a.Started) && a.Token != p.Token {
			t.Errorf("%s: %s holds data outside formation %s", desc, a.Name, p.Token)
		}
	}
	if late {
		return
	}
	for _, name := range f.ExpectedInitial {
		if name == f.Self || slices.Contains(f.Formation.Without, name) {
			continue
		}
		ok := slices.ContainsFunc(f.Answers, func(a Answer) bool {
			return a.Name == name && a.Err == nil && !a.HasData && !a.WasMember && !a.Started
		})
		if !ok {
			t.Errorf("%s: bootstrap without a fresh answer from %s", desc, name)
		}
	}
}

func TestActionString(t *testing.T) {
	for a, want := range map[Action]string{
		Wait: "wait", Restart: "restart", Bootstrap: "bootstrap",
		JoinAsLearner: "join as learner", RejoinAfterRemoval: "rejoin after removal", Action(9): "Action(9)",
	} {
		assert.Equal(t, want, a.String())
	}
}

func TestMemberString(t *testing.T) {
	assert.Equal(t, "n2 (2, learner)", selfLearner.String())
	assert.Equal(t, "https://n2.example.internal:2380 (16, learner, unstarted)", selfOrphan.String())
	assert.Equal(t, "n1 (1)", n1.String())
}

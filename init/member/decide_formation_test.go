package member

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/nodeapi"
)

// nonce is the test nonce of a node's current state.
func nonce(name string) string { return "nonce-" + name }

// The formation answers of n1 and n3 as n2 sees them.
func fresh(name string) Answer {
	return Answer{Name: name, Formation: nodeapi.Formation{Name: name, Cluster: "demo", Nonce: nonce(name)}}
}

func unreachable(name string) Answer {
	return Answer{Name: name, Err: errors.New("connection refused")}
}

func withData(a Answer) Answer { a.HasData = true; return a }

func wiped(a Answer) Answer { a.Nonce = "new-" + a.Nonce; return a }

// startedIn is a in formation nonces (which it is a member of).
func startedIn(a Answer, nonces map[string]string) Answer {
	a.Started, a.Token, a.Nonces = true, Token("demo", nonces), nonces
	return a
}

var (
	allNonces = map[string]string{"n1": nonce("n1"), "n2": nonce("n2"), "n3": nonce("n3")}
	// n2 lost its state since: its nonce is new.
	oldNonces = map[string]string{"n1": nonce("n1"), "n2": "old-nonce-n2", "n3": nonce("n3")}

	replies        = func(as ...Answer) func(*Facts) { return func(f *Facts) { f.Answers = as } }
	freshPeers     = replies(fresh("n1"), fresh("n3"))
	lateFormation  = replies(withData(startedIn(fresh("n1"), allNonces)), withData(startedIn(fresh("n3"), allNonces)))
	otherFormation = replies(withData(startedIn(fresh("n1"), oldNonces)), withData(startedIn(fresh("n3"), oldNonces)))
	selfStarted    = func(f *Facts) { f.Formation.Token, f.Formation.Nonces = Token("demo", allNonces), allNonces }
	without        = func(names ...string) func(*Facts) { return func(f *Facts) { f.Formation.Without = names } }
)

func withWithout(a Answer, names ...string) Answer { a.Without = names; return a }

// TestFormation covers the handshake of a node without data that reaches
// no cluster: n2, an expected initial member of n1, n2, n3.
func TestFormation(t *testing.T) {
	tests := []struct {
		name    string
		facts   Facts
		action  Action
		reason  string
		token   string
		initial []string
	}{
		{name: "all fresh", facts: facts(freshPeers), action: Bootstrap, token: Token("demo", allNonces), initial: []string{"n1", "n2", "n3"}, reason: "bootstrap formation demo-"},
		{name: "answers in another order", facts: facts(replies(fresh("n3"), fresh("n1"))), action: Bootstrap, token: Token("demo", allNonces)},
		{name: "a fresh non-initial peer too", facts: facts(replies(fresh("n1"), fresh("n3"), fresh("n4"))), action: Bootstrap, token: Token("demo", allNonces)},
		{name: "a non-initial peer does not answer", facts: facts(replies(fresh("n1"), fresh("n3"), unreachable("n4"))), action: Bootstrap},
		{name: "one does not answer", facts: facts(replies(fresh("n1"), unreachable("n3"))), action: Wait, reason: "waiting for n3 (connection refused)"},
		{name: "none answers", facts: facts(replies(unreachable("n1"), unreachable("n3"))), action: Wait, reason: "waiting for n1 (connection refused), n3 (connection refused)"},
		{name: "one not asked", facts: facts(replies(fresh("n1"))), action: Wait, reason: "n3 (not asked)"},
		{name: "one holds data (old cluster)", facts: facts(replies(fresh("n1"), withData(fresh("n3")))), action: Wait, reason: "quorum lost: n3 holds data of this cluster, only 1 of the expected initial members"},
		{name: "one was a member", facts: facts(replies(fresh("n1"), with3(func(a *Answer) { a.WasMember = true }))), action: Wait, reason: "n3 holds data"},
		{name: "data, the other unreachable", facts: facts(replies(unreachable("n1"), withData(fresh("n3")))), action: Wait, reason: "n3 holds data of this cluster: not bootstrapping; n2 will join once a quorum of the cluster answers"},
		{name: "a non-initial peer holds data", facts: facts(replies(fresh("n1"), fresh("n3"), withData(fresh("n4")))), action: Wait, reason: "n4 holds data"},
		{name: "two wiped of three: quorum lost", facts: facts(replies(wiped(fresh("n1")), withData(startedIn(fresh("n3"), oldNonces)))), action: Wait, reason: "quorum lost: n3 holds data"},
		{name: "one wiped of three", facts: facts(replies(withData(startedIn(fresh("n1"), oldNonces)), withData(startedIn(fresh("n3"), oldNonces)))), action: Wait, reason: "n1, n3 hold data of this cluster: not bootstrapping; n2 will join once a quorum"},
		{name: "quorum lost, all answer, old token", facts: facts(replies(wiped(fresh("n1")), withData(fresh("n3")))), action: Wait, reason: "n3 holds data"},
		{name: "quorum intact: two hold data", facts: facts(replies(withData(fresh("n1")), withData(fresh("n3")))), action: Wait, reason: "n1, n3 hold data of this cluster: not bootstrapping"},
		{name: "this node wiped, formation holds its old nonce", facts: facts(otherFormation), action: Wait, reason: "does not hold this node's nonce"},
		{name: "late member: peers started with its nonce", facts: facts(lateFormation), action: Bootstrap, token: Token("demo", allNonces), initial: []string{"n1", "n2", "n3"}, reason: "bootstrap into its slot"},
		{name: "late member, one peer started, one fresh", facts: facts(replies(startedIn(fresh("n1"), allNonces), fresh("n3"))), action: Bootstrap, token: Token("demo", allNonces)},
		{name: "late member, one peer started, one unreachable", facts: facts(replies(startedIn(fresh("n1"), allNonces), unreachable("n3"))), action: Bootstrap, token: Token("demo", allNonces)},
		{name: "late member, but another holds data outside it", facts: facts(replies(startedIn(fresh("n1"), allNonces), withData(fresh("n3")))), action: Wait, reason: "n3 holds data of this cluster outside formation"},
		{name: "two formations", facts: facts(replies(startedIn(fresh("n1"), allNonces), startedIn(fresh("n3"), oldNonces))), action: Wait, reason: "two formations"},
		{name: "a token that is not its nonces'", facts: facts(replies(with1(func(a *Answer) { *a = startedIn(*a, allNonces); a.Token = "demo" }))), action: Wait, reason: "not the token of its nonces"},
		{name: "this node started a formation before", facts: facts(and(selfStarted, lateFormation)), action: Wait, reason: "never bootstraps again"},
		{name: "this node was a member", facts: facts(and(wasMember, freshPeers)), action: Wait, reason: "never bootstraps again"},
		{name: "not expected", facts: facts(and(notExpected, freshPeers)), action: Wait, reason: "not an expected initial member"},
		{name: "a peer answers for another cluster", facts: facts(replies(fresh("n1"), with3(func(a *Answer) { a.Cluster = "prod" }))), action: Wait, reason: `answers for cluster "prod"`},
		{name: "no own nonce", facts: facts(and(freshPeers, func(f *Facts) { f.Formation.Nonce = "" })), action: Wait, reason: "no formation nonce"},
		{name: "a peer without nonce", facts: facts(replies(fresh("n1"), with3(func(a *Answer) { a.Nonce = "" }))), action: Wait, reason: "without a nonce"},

		// The operator's bootstrap --without n3.
		{
			name: "without n3, n3 down", facts: facts(and(without("n3"), replies(withWithout(fresh("n1"), "n3"), unreachable("n3")))),
			action: Bootstrap, token: Token("demo", map[string]string{"n1": nonce("n1"), "n2": nonce("n2")}), initial: []string{"n1", "n2"}, reason: "without n3, as the operator asked",
		},
		{name: "without n3, n1 not told", facts: facts(and(without("n3"), replies(fresh("n1"), unreachable("n3")))), action: Wait, reason: "n1 forms without [], this node without [n3]"},
		{name: "without n3, only n1 told", facts: facts(replies(withWithout(fresh("n1"), "n3"), unreachable("n3"))), action: Wait, reason: "waiting for n3"},
		{name: "n3 booted after all, fresh", facts: facts(and(without("n3"), replies(withWithout(fresh("n1"), "n3"), fresh("n3")))), action: Bootstrap, initial: []string{"n1", "n2"}},
		{name: "this node excluded", facts: facts(replies(withWithout(fresh("n1"), "n2"), fresh("n3"))), action: Wait, reason: "n1 forms the cluster without n2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Decide(tt.facts)
			require.Equal(t, tt.action, p.Action, "Decide(...).Action = %s, want %s (%s)", p.Action, tt.action, p.Reason)
			assert.Contains(t, p.Reason, tt.reason)
			if tt.token != "" {
				assert.Equal(t, tt.token, p.Token)
			}
			if tt.initial != nil {
				assert.Equal(t, tt.initial, p.Initial)
			}
			if p.Action == Bootstrap {
				assert.Equal(t, p.Token, Token("demo", p.Nonces), "the token is its nonces'")
				assert.Equal(t, "new", p.State)
			}
		})
	}
}

func with1(f func(*Answer)) Answer { a := fresh("n1"); f(&a); return a }
func with3(f func(*Answer)) Answer { a := fresh("n3"); f(&a); return a }

// TestFormationQuorumLost: two wiped disks of three wait and say the
// quorum is lost, naming the node that holds data.
func TestFormationQuorumLost(t *testing.T) {
	p := Decide(facts(replies(wiped(fresh("n1")), withData(fresh("n3")))))
	require.Equal(t, Wait, p.Action, p.Reason)
	assert.Contains(t, p.Reason, "quorum lost: n3 holds data of this cluster, only 1 of the expected initial members n1, n2, n3")
	assert.Contains(t, p.Reason, "recover from n3")
}

// TestFormationAgreement: every member that sees the same fresh answers,
// in any order, commits the same token; a late member too; and a lost
// state (a new nonce) gives another token.
func TestFormationAgreement(t *testing.T) {
	expected := []string{"n1", "n2", "n3"}
	self := func(name string, others ...Answer) Plan {
		return Decide(Facts{Self: name, SelfPeerURL: "https://" + name + ":2380", Cluster: "demo", ExpectedInitial: expected,
			Formation: Record{Nonce: nonce(name)}, Answers: others})
	}
	p1 := self("n1", fresh("n2"), fresh("n3"))
	p2 := self("n2", fresh("n3"), fresh("n1"))
	p3 := self("n3", fresh("n1"), fresh("n2"))
	for _, p := range []Plan{p1, p2, p3} {
		require.Equal(t, Bootstrap, p.Action, p.Reason)
	}
	assert.Equal(t, p1.Token, p2.Token)
	assert.Equal(t, p1.Token, p3.Token)
	assert.Equal(t, p1.Initial, p3.Initial)
	// n3 answers late, after n1 and n2 started.
	late := self("n3", startedIn(fresh("n1"), p1.Nonces), startedIn(fresh("n2"), p1.Nonces))
	require.Equal(t, Bootstrap, late.Action, late.Reason)
	assert.Equal(t, p1.Token, late.Token)
	// A single-node cluster whose disk was wiped forms anew.
	one := Facts{Self: "n1", Cluster: "demo", ExpectedInitial: []string{"n1"}, Formation: Record{Nonce: nonce("n1")}}
	a := Decide(one)
	one.Formation.Nonce = "wiped"
	b := Decide(one)
	require.Equal(t, Bootstrap, a.Action, a.Reason)
	require.Equal(t, Bootstrap, b.Action, b.Reason)
	assert.NotEqual(t, a.Token, b.Token, "a new nonce is a new formation")
	assert.NotEqual(t, "demo", a.Token, "never the old code's token")
}

func TestToken(t *testing.T) {
	a := Token("demo", map[string]string{"n1": "x", "n2": "y"})
	assert.Equal(t, a, Token("demo", map[string]string{"n2": "y", "n1": "x"}))
	assert.Regexp(t, `^demo-[0-9a-f]{16}$`, a)
	assert.NotEqual(t, a, Token("demo", map[string]string{"n1": "x", "n2": "z"}))
	assert.NotEqual(t, a, Token("demo", map[string]string{"n1": "x"}))
	assert.NotEqual(t, a, Token("prod", map[string]string{"n1": "x", "n2": "y"}))
}

func TestStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := NewStore(dir)
	r, err := s.Load()
	require.NoError(t, err)
	assert.Len(t, r.Nonce, 32)
	assert.False(t, r.Started())
	_, err = os.Stat(filepath.Join(dir, RecordFile))
	require.NoError(t, err, "the nonce is on the disk before it is served")

	again, err := NewStore(dir).Load()
	require.NoError(t, err)
	assert.Equal(t, r.Nonce, again.Nonce, "stable across reboots")

	_, err = s.Update(func(r *Record) error { return fmt.Errorf("no") })
	require.Error(t, err)
	u, err := s.Update(func(r *Record) error { r.Token = "demo-1"; return nil })
	require.NoError(t, err)
	assert.True(t, u.Started())
	again, err = NewStore(dir).Load()
	require.NoError(t, err)
	assert.Equal(t, "demo-1", again.Token)

	other, err := NewStore(t.TempDir()).Load()
	require.NoError(t, err)
	assert.NotEqual(t, r.Nonce, other.Nonce, "a wiped state gets a new nonce")

	require.NoError(t, os.WriteFile(filepath.Join(dir, RecordFile), []byte("{"), 0o600))
	_, err = NewStore(dir).Load()
	require.ErrorContains(t, err, "read formation record")
}

// TestQuorumLostReachable: the survivor of two wiped disks of three
// answers a member list; the wiped nodes wait and say the quorum is lost
// instead of trying to join a cluster that cannot commit.
func TestQuorumLostReachable(t *testing.T) {
	n3Down := with(n3, func(m *Member) { m.Healthy = false })
	tests := []struct {
		name   string
		facts  Facts
		action Action
		reason string
	}{
		{name: "n3 answers without data", facts: facts(and(reachable(n1, selfVoter, n3Down), replies(fresh("n1"), wiped(fresh("n3"))))), action: Wait, reason: "quorum lost: voters n2, n3 lost their data"},
		{name: "n3 not answering yet", facts: facts(and(reachable(n1, selfVoter, n3Down), replies(fresh("n1"), unreachable("n3")))), action: JoinAsLearner},
		{name: "n3 holds data, down", facts: facts(and(reachable(n1, selfVoter, n3Down), replies(fresh("n1"), withData(fresh("n3"))))), action: JoinAsLearner},
		{name: "n3 up", facts: facts(and(reachable(n1, selfVoter, n3), replies(fresh("n1"), withData(fresh("n3"))))), action: JoinAsLearner},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Decide(tt.facts)
			require.Equal(t, tt.action, p.Action, p.Reason)
			assert.Contains(t, p.Reason, tt.reason)
		})
	}
}

// TestNoneServed: only answers, every one of them from a node that never
// was a member, end the member list's wait early.
func TestNoneServed(t *testing.T) {
	with := func(f func(*Answer)) Answer { a := fresh("n3"); f(&a); return a }
	for _, c := range []struct {
		name string
		as   []Answer
		want bool
	}{
		{"every peer fresh", []Answer{fresh("n1"), fresh("n3")}, true},
		{"one started etcd and has data, never served", []Answer{fresh("n1"), with(func(a *Answer) { a.Started, a.HasData = true, true })}, true},
		{"no answers", nil, false},
		{"one did not answer", []Answer{fresh("n1"), with(func(a *Answer) { a.Err = errors.New("refused") })}, false},
		{"one was a member", []Answer{fresh("n1"), with(func(a *Answer) { a.WasMember = true })}, false},
		{"one was a member, without data", []Answer{fresh("n1"), with(func(a *Answer) { a.WasMember, a.HasData = true, false })}, false},
	} {
		assert.Equal(t, c.want, NoneServed(c.as), c.name)
	}
}

func TestUnanswered(t *testing.T) {
	with := func(f func(*Answer)) Answer { a := fresh("n3"); f(&a); return a }
	refused := with(func(a *Answer) { a.Err = errors.New("refused") })
	for _, c := range []struct {
		name string
		as   []Answer
		want bool
	}{
		{"every peer answered", []Answer{fresh("n1"), fresh("n3")}, false},
		{"no answers", nil, false},
		{"one did not answer, the other fresh", []Answer{fresh("n1"), refused}, true},
		{"none answered", []Answer{with(func(a *Answer) { a.Name, a.Err = "n1", errors.New("refused") }), refused}, true},
		{"one did not answer, the other was a member", []Answer{with(func(a *Answer) { a.Name, a.WasMember = "n1", true }), refused}, false},
	} {
		assert.Equal(t, c.want, Unanswered(c.as), c.name)
	}
}

// TestAskUntilAnswered: a peer that refused is asked again until it
// answers; a peer that served ends the asking at once; and the asking
// ends with ctx.
func TestAskUntilAnswered(t *testing.T) {
	refused := func(name string) Answer { return Answer{Name: name, Err: errors.New("connection refused")} }
	served := fresh("n3")
	served.WasMember = true
	script := func(rounds ...[]Answer) (func(context.Context) []Answer, *int) {
		asked := 0
		return func(context.Context) []Answer {
			r := rounds[min(asked, len(rounds)-1)]
			asked++
			return r
		}, &asked
	}
	t.Run("a refused peer comes up", func(t *testing.T) {
		ask, asked := script([]Answer{refused("n1"), refused("n3")}, []Answer{fresh("n1"), refused("n3")}, []Answer{fresh("n1"), fresh("n3")})
		as := AskUntilAnswered(t.Context(), time.Millisecond, ask)
		assert.Equal(t, 3, *asked)
		assert.True(t, NoneServed(as), "the last answers are read: %+v", as)
	})
	t.Run("a peer that served ends it", func(t *testing.T) {
		ask, asked := script([]Answer{refused("n1"), served})
		as := AskUntilAnswered(t.Context(), time.Millisecond, ask)
		assert.Equal(t, 1, *asked)
		assert.False(t, NoneServed(as))
	})
	t.Run("ctx ends while one never answers", func(t *testing.T) {
		ask, asked := script([]Answer{fresh("n1"), refused("n3")})
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		as := AskUntilAnswered(ctx, 5*time.Millisecond, ask)
		assert.Greater(t, *asked, 1, "asked again")
		assert.Error(t, ctx.Err(), "returned only once ctx ended")
		assert.False(t, NoneServed(as))
	})
}

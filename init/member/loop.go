package member

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Loop is the boot-time life of a node's member: observe, Decide, act,
// and again after a backoff, or when etcd says the member was removed.
// The init wires it to its node; the tests wire it to etcd processes.
// Its seams are the fields below; each is required unless it says not.
type Loop struct {
	// Cluster is the seed's cluster name; Name and PeerURL this node's.
	Cluster, Name, PeerURL string
	// DataDir is etcd's data dir, StateDir the node's state/ (MoveAside).
	DataDir, StateDir string
	// Logf receives the loop's lines; nil discards them.
	Logf Logf

	// Gather collects the facts of one round. removed says etcd reported
	// the member removed since the last round.
	Gather func(ctx context.Context, removed bool) (Round, error)
	// Commit persists a bootstrap's formation (Plan.Token, Plan.Nonces)
	// before etcd starts with it (Store.Update).
	Commit func(Plan) error
	// Launch starts etcd as s says. A nil Etcd and nil error mean the
	// node is shutting down.
	Launch func(ctx context.Context, s Start) (Etcd, error)
	// Local connects to the local member.
	Local func() (*clientv3.Client, error)
	// Voter is called once the member is a voting member of its cluster
	// (the init records state/member: Facts.WasMember). Optional.
	Voter func(Plan) error

	// LeaderView is the leader's view of its peers, for Join's removal of
	// a stale member (Request.LeaderView); the init passes
	// MetricsLeaderView. Optional: without it Join never removes a
	// started member.
	LeaderView LeaderView
	// LockTTL is the membership lock's lease for Join; 0: DefaultLockTTL.
	LockTTL time.Duration
	// Backoff is the first retry delay; 0 means 1s. A round that waits
	// is retried within 5s at most, a failed one within 30s.
	Backoff time.Duration
}

// Round is what Gather found.
type Round struct {
	Facts Facts
	// Peers reaches the other members, nil when there are none; the
	// loop closes it when the round ends.
	Peers *clientv3.Client
	// InitialCluster returns --initial-cluster for the named members
	// (Plan.Initial), or for every peer when names is nil.
	InitialCluster func(names []string) (string, error)
}

// Start is how Loop asks for etcd to start.
type Start struct {
	// State, InitialCluster and Token are etcd's --initial-cluster-*
	// flags; Token "" means the node's record or the cluster name.
	State, InitialCluster, Token string
	Plan                         Plan
	// Peers reaches the other members while this round lasts (nil when
	// there are none): a removed-member report is confirmed through it.
	Peers *clientv3.Client
}

// Etcd is a started etcd as the loop watches it.
type Etcd interface {
	// Ready is closed once the member serves (a learner: once it
	// answers a status request).
	Ready() <-chan struct{}
	// Removed is closed when etcd says the member was removed.
	Removed() <-chan struct{}
	// Stop stops etcd, waiting up to d.
	Stop(d time.Duration) error
}

// errWaiting marks a round that decided to wait.
var errWaiting = errors.New("waiting")

// Run runs rounds until ctx ends. A failure before etcd starts (and a
// panic in a round, which stops the round's etcd first) is logged with
// what was wrong and retried with backoff. A failure once etcd serves
// (promotion, the cluster name's claim, recording the membership) is
// logged, and etcd keeps running: the round goes on watching it, and the
// next start of the node tries again. Nothing here ever bootstraps without
// the formation handshake's proof (Decide) or deletes data.
func (l *Loop) Run(ctx context.Context) {
	first := l.Backoff
	if first == 0 {
		first = time.Second
	}
	removed, backoff := false, first
	for ctx.Err() == nil {
		again, err := l.round(ctx, removed)
		if err == nil && !again {
			return
		}
		if again {
			removed, backoff = true, first
			continue
		}
		l.logf("membership: %v; retrying in %s", err, backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		// A node that waits for its peers asks again soon: the handshake
		// and a member list are cheap, and a cluster that comes back
		// should not wait 30s for its last member.
		limit := 30 * time.Second
		if errors.Is(err, errWaiting) {
			limit = 5 * time.Second
		}
		backoff = min(2*backoff, limit)
	}
}

func (l *Loop) logf(format string, args ...any) {
	if l.Logf != nil {
		l.Logf(format, args...)
	}
}

// round runs one decision. It returns again=true when etcd reported the
// member removed after it started, so the caller decides once more with
// that fact.
func (l *Loop) round(ctx context.Context, removed bool) (again bool, err error) {
	// A panic in a round stops the etcd this round started, so that the
	// round that runs next (Run retries it as an error) starts the only
	// one.
	var started Etcd
	defer func() {
		if p := recover(); p != nil {
			again, err = false, l.panicked(p, started)
		}
	}()
	r, err := l.Gather(ctx, removed)
	if err != nil {
		return false, err
	}
	if r.Peers != nil {
		defer r.Peers.Close()
	}
	plan := Decide(r.Facts)
	l.logf("membership: %s: %s", plan.Action, plan.Reason)

	s, joined, err := l.prepare(ctx, r, plan)
	if err != nil {
		return false, err
	}
	e, err := l.Launch(ctx, s)
	started = e
	if err != nil || e == nil {
		if joined != nil {
			joined.Release()
		}
		if err != nil {
			return false, fmt.Errorf("start etcd: %w", err)
		}
		return false, nil // shutting down
	}
	return l.watch(ctx, e, plan, joined, r.Peers)
}

// panicked handles a panic p recovered in a round: it logs it with the
// stack, stops the etcd the round started, if any, and returns the
// round's error.
func (l *Loop) panicked(p any, started Etcd) error {
	l.logf("membership: panic in a round: %v (recovered)\n%s", p, debug.Stack())
	if started != nil {
		if serr := started.Stop(30 * time.Second); serr != nil {
			l.logf("membership: stop etcd after the panic: %v", serr)
		}
	}
	return fmt.Errorf("a round panicked: %v", p)
}

// prepare readies the start that plan asks for: the initial cluster (and
// a bootstrap's committed token), or for a join the learner's membership,
// returned as joined. A plan that waits returns an error wrapping
// errWaiting.
func (l *Loop) prepare(ctx context.Context, r Round, plan Plan) (s Start, joined *Joined, err error) {
	s = Start{State: plan.State, Plan: plan, Peers: r.Peers}
	switch plan.Action {
	case Wait:
		return s, nil, fmt.Errorf("%w: %s", errWaiting, plan.Reason)
	case Bootstrap:
		if s.InitialCluster, err = r.InitialCluster(plan.Initial); err != nil {
			return s, nil, fmt.Errorf("bootstrap: %w", err)
		}
		if err := l.Commit(plan); err != nil {
			return s, nil, err
		}
		s.Token = plan.Token
		l.logf("etcd: bootstrapping member %s of cluster %q with %s, token %s", l.Name, l.Cluster, s.InitialCluster, s.Token)
	case Restart:
		if s.InitialCluster, err = r.InitialCluster(nil); err != nil {
			return s, nil, err
		}
		l.logf("etcd: restarting member %s with its data", l.Name)
	case RejoinAfterRemoval, JoinAsLearner:
		if plan.Action == RejoinAfterRemoval {
			if err := l.moveRemovedAside(); err != nil {
				return s, nil, err
			}
		}
		if joined, err = l.joinAsLearner(ctx, r.Peers); err != nil {
			return s, nil, err
		}
		s.InitialCluster = joined.InitialCluster
		l.logf("etcd: starting member %s as a learner of the running cluster", l.Name)
	}
	return s, joined, nil
}

// moveRemovedAside moves the data of this removed member aside and leaves
// an empty data dir for it to join again with.
func (l *Loop) moveRemovedAside() error {
	to, err := MoveAside(l.DataDir, l.StateDir)
	if err != nil {
		return fmt.Errorf("move the removed member's data aside: %w", err)
	}
	l.logf("membership: moved the removed member's data to %s", to)
	// state/member stays: a node that was a member never
	// bootstraps again, even with its data gone.
	return os.MkdirAll(l.DataDir, 0o700)
}

// joinAsLearner adds this node to the cluster as a learner through peers.
func (l *Loop) joinAsLearner(ctx context.Context, peers *clientv3.Client) (*Joined, error) {
	if peers == nil {
		return nil, errors.New("join: no peer to reach the cluster through")
	}
	joined, err := Join(ctx, peers, Request{Cluster: l.Cluster, Name: l.Name, PeerURL: l.PeerURL, Logf: l.Logf, LockTTL: l.LockTTL, LeaderView: l.LeaderView})
	if err != nil {
		return nil, fmt.Errorf("join: %w", err)
	}
	l.logf("membership: added as learner %x", joined.ID)
	return joined, nil
}

// watch watches the started etcd e until ctx ends or etcd says the member
// was removed (then it stops e and returns again=true), and finishes the
// start (afterReady) once e serves.
func (l *Loop) watch(ctx context.Context, e Etcd, plan Plan, joined *Joined, peers *clientv3.Client) (again bool, err error) {
	select {
	case <-ctx.Done():
		return false, nil
	case <-e.Removed():
		return l.stopRemoved(e, joined)
	case <-e.Ready():
	}
	if err := l.afterReady(ctx, plan, joined, peers); err != nil {
		l.logf("membership: %v", err)
	}
	select {
	case <-ctx.Done():
		return false, nil
	case <-e.Removed():
		return l.stopRemoved(e, joined)
	}
}

// stopRemoved stops an etcd whose member was removed from the cluster.
func (l *Loop) stopRemoved(e Etcd, joined *Joined) (bool, error) {
	l.logf("membership: etcd says this member was removed from the cluster; stopping it")
	if joined != nil {
		joined.Release()
	}
	if err := e.Stop(30 * time.Second); err != nil {
		l.logf("stop etcd: %v", err)
	}
	return true, nil
}

// afterReady finishes a start once the local member serves: a learner is
// promoted (retrying until it has caught up), a new cluster is claimed
// under the seed's name, and the node records that it is a member.
// peers reaches the other members; a learner's own member refuses the
// lease the membership lock needs.
func (l *Loop) afterReady(ctx context.Context, plan Plan, joined *Joined, peers *clientv3.Client) error {
	local, err := l.Local()
	if err != nil {
		return err
	}
	defer local.Close()
	switch {
	case joined != nil:
		attempts, err := joined.Promote(ctx)
		if err != nil {
			return fmt.Errorf("promote learner %x: %w", joined.ID, err)
		}
		l.logf("membership: promoted to a voting member after %d attempt(s)", attempts)
	case plan.Promote:
		eps := local.Endpoints()
		st, err := local.Status(ctx, eps[0])
		if err != nil {
			return fmt.Errorf("promote: status: %w", err)
		}
		if peers == nil {
			return fmt.Errorf("promote learner %x: no peer to reach the cluster through", st.Header.MemberId)
		}
		attempts, err := Promote(ctx, peers, st.Header.MemberId, l.Logf)
		if err != nil {
			return fmt.Errorf("promote learner: %w", err)
		}
		l.logf("membership: promoted to a voting member after %d attempt(s)", attempts)
	}
	if err := claimAsVoter(ctx, local, l.Cluster, l.logf); err != nil {
		return fmt.Errorf("claim cluster name %q: %w", l.Cluster, err)
	}
	if l.Voter != nil {
		if err := l.Voter(plan); err != nil {
			return fmt.Errorf("record membership: %w", err)
		}
	}
	l.logf("membership: %s is a voting member of cluster %q", l.Name, l.Cluster)
	return nil
}

// claimAsVoter is Claim through the local member, which a promotion has
// just made a voter. The leader commits the promotion; the local member
// applies it a moment later, and until then refuses the write as a
// learner's ("rpc not supported for learner"). That refusal is retried,
// with a growing pause, for as long as ctx allows: giving up would leave
// the node's membership unrecorded (Loop.Voter).
func claimAsVoter(ctx context.Context, local *clientv3.Client, cluster string, logf func(string, ...any)) error {
	pause := 50 * time.Millisecond
	var refused error // the last learner's refusal
	for tries := 1; ; tries++ {
		err := Claim(ctx, local, cluster)
		if err != nil && refused != nil && ctx.Err() != nil {
			// ctx ended during a try after a refusal: what held the
			// claim was the member's learner state, as below.
			return fmt.Errorf("%w (still a learner after %d tries)", refused, tries-1)
		}
		if !errors.Is(err, errNotForLearner) {
			return err
		}
		refused = err
		if tries == 1 {
			logf("membership: the local member has not applied its promotion yet; waiting to claim the cluster name")
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (still a learner after %d tries)", err, tries)
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

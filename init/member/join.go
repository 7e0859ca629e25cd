package member

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// LockKey is the etcd mutex that serializes membership changes: one join
// (add, start, promote) or one promotion at a time, cluster-wide.
const LockKey = "/etcdbox/membership"

// DefaultLockTTL is the lease of the membership lock: when a joining node
// dies holding it, the others wait that long.
const DefaultLockTTL = 10 * time.Second

// opTimeout bounds one membership call; without a quorum, etcd would hold
// it until the caller's deadline.
const opTimeout = 10 * time.Second

// Promotion backoff: etcd refuses to promote a learner that has not caught
// up with the leader.
var (
	promoteFirstDelay = 200 * time.Millisecond
	promoteMaxDelay   = 3 * time.Second
	// etcd refuses changes for a few seconds after another; see settled.
	settleFirstDelay = 250 * time.Millisecond
	settleMaxDelay   = time.Second
)

// Sentinel errors a caller branches on.
var (
	// ErrNameInUse: a started member with this node's name or peer URL
	// answers; another node runs with this identity.
	ErrNameInUse = errors.New("another member with this name or peer URL is running")
	// ErrRemoved: the member is no longer in the cluster.
	ErrRemoved = errors.New("member not in the cluster")
)

// errNotForLearner is what a learner answers to writes and leases.
var errNotForLearner = rpctypes.Error(rpctypes.ErrGRPCNotSupportedForLearner)

// Logf receives one line per step worth logging.
type Logf func(format string, args ...any)

// Request describes the node that joins.
type Request struct {
	// Cluster is the seed's cluster name, checked and claimed with Claim.
	// Empty skips the check.
	Cluster string
	Name    string
	PeerURL string
	// Logf receives progress lines; nil discards them.
	Logf Logf
	// LockTTL is the membership lock's lease; 0 means DefaultLockTTL.
	LockTTL time.Duration
	// LeaderView tells which members the leader reaches, for removing a
	// stale member with this node's name that started once (its node
	// lost its data). The init passes MetricsLeaderView with the node's
	// client TLS and its seed's HTTP ports. nil: Join removes only stale members that never
	// started, and fails with ErrUnsafeRemoval on a started one.
	LeaderView LeaderView
}

// Joined is a learner added by Join. It holds the membership lock until
// Promote or Release.
type Joined struct {
	// ID is the new member's ID.
	ID uint64
	// InitialCluster is etcd's --initial-cluster for the new member, to
	// use with --initial-cluster-state=existing.
	InitialCluster string
	// Removed are the stale members Join removed first.
	Removed []Member

	cli  *clientv3.Client
	logf Logf
	lock *lock
}

// Join adds this node to the cluster behind cli as a learner. It takes the
// membership lock (LockKey) and keeps it until Joined.Promote or
// Joined.Release, so that a join is one change from MemberAddAsLearner to
// the promotion, and no other node's join or promotion runs meanwhile.
//
// Under the lock, Join re-reads the member list (linearizable) and first
// removes:
//   - every learner that never started, whatever its name: while the lock
//     is held by nobody else, no join is under way, so such a learner is
//     an orphan whose node died between its add and its start (etcd allows
//     one learner at a time, so an orphan would block every later join).
//     A learner added by hand (etcdctl member add --learner) and not yet
//     started counts as one too: add members through etcdbox;
//   - a member with this node's name or peer URL, when MayRemove allows
//     it: it answers neither this node nor the leader, it never started
//     or the leader reports it unreachable (Request.LeaderView), and the
//     remaining voters keep a healthy quorum without it. A member that
//     answers fails Join with ErrNameInUse, any other refusal with
//     ErrUnsafeRemoval; either way Join removes nothing.
//
// It also checks the cluster's name (Claim, ErrOtherCluster). Then it calls
// MemberAddAsLearner and returns the new member with the initial cluster to
// start etcd with. Errors leave the lock released; the caller observes
// again and retries with backoff.
//
// cli should point at the other nodes' client URLs, not at this node's.
func Join(ctx context.Context, cli *clientv3.Client, req Request) (*Joined, error) {
	logf := req.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	l, err := acquire(ctx, cli, req.LockTTL, logf)
	if err != nil {
		return nil, err
	}
	j, err := joinLocked(ctx, cli, req, logf)
	if err != nil {
		l.release(logf)
		return nil, fmt.Errorf("join %s at %s: %w", req.Name, req.PeerURL, err)
	}
	j.cli, j.logf, j.lock = cli, logf, l
	return j, nil
}

func joinLocked(ctx context.Context, cli *clientv3.Client, req Request, logf Logf) (*Joined, error) {
	if err := Claim(ctx, cli, req.Cluster); err != nil {
		return nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, opTimeout)
	resp, err := cli.MemberList(lctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("member list: %w", err)
	}
	ms := make([]Member, len(resp.Members))
	for i, m := range resp.Members {
		ms[i] = fromPB(m)
	}
	mine := func(m Member) bool { return m.Is(req.Name, req.PeerURL) }
	// Every started member is probed: the remaining voters' health is
	// what MayRemove weighs without a leader-side view.
	probeHealth(ctx, cli, ms, func(Member) bool { return true })

	var candidates []Member
	for _, m := range ms {
		if mine(m) || !m.Started && m.IsLearner {
			candidates = append(candidates, m)
		}
	}
	if len(candidates) == 0 {
		return addLearner(ctx, cli, req, logf, nil)
	}
	facts := gatherRemoval(ctx, cli, ms, req.LeaderView, logf)
	var stale []Member
	for _, m := range candidates {
		ok, reason, err := MayRemove(facts, m)
		if !ok {
			logf("membership: not removing %s: %s", m, reason)
			return nil, fmt.Errorf("stale member %s: %s: %w", m, reason, err)
		}
		what := "stale member with this node's name or peer URL"
		if !mine(m) {
			what = "orphan learner"
		}
		logf("membership: removing %s %s: %s", what, m, reason)
		facts.Removing[m.ID] = true
		stale = append(stale, m)
	}
	return addLearner(ctx, cli, req, logf, stale)
}

// addLearner removes the stale members MayRemove allowed, one change at a
// time, then adds this node as a learner.
func addLearner(ctx context.Context, cli *clientv3.Client, req Request, logf Logf, stale []Member) (*Joined, error) {
	j := &Joined{}
	for _, m := range stale {
		err := settled(ctx, logf, "remove "+m.String(), func(ctx context.Context) error {
			_, err := cli.MemberRemove(ctx, m.ID)
			return err
		})
		if err != nil && !errors.Is(err, rpctypes.ErrMemberNotFound) {
			return nil, fmt.Errorf("remove member %s: %w", m, err)
		}
		j.Removed = append(j.Removed, m)
	}

	var add *clientv3.MemberAddResponse
	err := settled(ctx, logf, "add learner", func(ctx context.Context) (err error) {
		add, err = cli.MemberAddAsLearner(ctx, []string{req.PeerURL})
		return err
	})
	if errors.Is(err, rpctypes.ErrTooManyLearners) {
		return nil, fmt.Errorf("add learner: another learner is waiting for its promotion: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("add learner: %w", err)
	}
	j.ID = add.Member.ID
	var initial []string
	for _, m := range add.Members {
		name := m.Name
		if m.ID == j.ID {
			name = req.Name
		}
		if name == "" {
			continue // an unstarted voter of someone else: etcd needs only the running peers
		}
		for _, u := range m.PeerURLs {
			initial = append(initial, name+"="+u)
		}
	}
	slices.Sort(initial)
	j.InitialCluster = strings.Join(initial, ",")
	logf("membership: added %s as learner %x; initial cluster %s", req.Name, j.ID, j.InitialCluster)
	return j, nil
}

// settled runs a membership call, retrying while etcd refuses it for a
// reason that passes by itself:
//   - "unhealthy cluster": with strict reconfiguration checks (etcd's
//     default) a member accepts a change only once it has been connected
//     to a quorum of voters for 5 seconds (etcdserver.HealthInterval), so
//     a change right after another one, or after a restart, is refused
//     for a few seconds;
//   - "member not found" when adding: etcd derives a new member's ID from
//     its peer URLs and the current second, and refuses IDs it removed, so
//     re-adding the peer URL of a member removed in the same second fails
//     until the next second.
func settled(ctx context.Context, logf Logf, what string, call func(context.Context) error) error {
	delay := settleFirstDelay
	for {
		cctx, cancel := context.WithTimeout(ctx, opTimeout)
		err := call(cctx)
		cancel()
		switch {
		case errors.Is(err, rpctypes.ErrUnhealthy):
			logf("membership: %s: %v (etcd waits until its members have been connected for 5s); retrying in %s", what, err, delay)
		case errors.Is(err, rpctypes.ErrMemberNotFound) && strings.HasPrefix(what, "add"):
			logf("membership: %s: %v (the ID of a member removed this second); retrying in %s", what, err, delay)
		default:
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		delay = min(2*delay, settleMaxDelay)
	}
}

// Promote promotes the learner once it has caught up, retrying with
// backoff until etcd agrees or ctx ends, then releases the membership
// lock. It returns the number of promotion attempts.
func (j *Joined) Promote(ctx context.Context) (attempts int, err error) {
	defer j.Release()
	return promote(ctx, j.cli, j.ID, j.logf)
}

// Release gives up the membership lock without promoting, e.g. when etcd
// did not start. It is safe to call more than once.
func (j *Joined) Release() {
	j.lock.release(j.logf)
}

// Promote promotes learner id under the membership lock, retrying with
// backoff until etcd agrees or ctx ends; it returns the number of
// attempts. A member that is already voting counts as promoted; one that
// is gone fails with ErrRemoved. The init calls it for a node that
// restarted as a learner (Plan.Promote); a fresh join uses Joined.Promote.
//
// cli must reach voting members, as for Join: a learner refuses the lock's
// lease ("rpc not supported for learner"), so a client of the learner's
// own endpoint does not do.
func Promote(ctx context.Context, cli *clientv3.Client, id uint64, logf Logf) (attempts int, err error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	l, err := acquire(ctx, cli, 0, logf)
	if errors.Is(err, errNotForLearner) {
		return 0, fmt.Errorf("promote %x: the client reaches only a learner (%s); use the other members' client URLs: %w",
			id, strings.Join(cli.Endpoints(), ","), err)
	}
	if err != nil {
		return 0, err
	}
	defer l.release(logf)
	return promote(ctx, cli, id, logf)
}

func promote(ctx context.Context, cli *clientv3.Client, id uint64, logf Logf) (int, error) {
	delay := promoteFirstDelay
	for attempt := 1; ; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, opTimeout)
		_, err := cli.MemberPromote(pctx, id)
		cancel()
		switch {
		case err == nil:
			logf("membership: promoted %x to a voting member (attempt %d)", id, attempt)
			return attempt, nil
		case errors.Is(err, rpctypes.ErrMemberNotLearner):
			logf("membership: %x is already a voting member", id)
			return attempt, nil
		case errors.Is(err, rpctypes.ErrMemberNotFound):
			return attempt, fmt.Errorf("promote %x: %w", id, ErrRemoved)
		}
		if ctx.Err() != nil {
			return attempt, fmt.Errorf("promote %x: gave up after %d attempts: %w", id, attempt, err)
		}
		logf("membership: promote %x (attempt %d): %v; retrying in %s", id, attempt, err, delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return attempt, fmt.Errorf("promote %x: gave up after %d attempts: %w", id, attempt, err)
		case <-t.C:
		}
		delay = min(2*delay, promoteMaxDelay)
	}
}

// lock is the membership mutex with the session whose lease keeps it.
type lock struct {
	once    sync.Once
	session *concurrency.Session
	mutex   *concurrency.Mutex
}

func acquire(ctx context.Context, cli *clientv3.Client, ttl time.Duration, logf Logf) (*lock, error) {
	if ttl <= 0 {
		ttl = DefaultLockTTL
	}
	// The lease is granted under ctx, which may be short; it is kept alive
	// under a context of its own, ended by release, so the lock outlives
	// Join's context while the learner starts and is promoted.
	gctx, cancel := context.WithTimeout(ctx, opTimeout)
	grant, err := cli.Grant(gctx, int64(max(1, ttl/time.Second)))
	cancel()
	if err != nil {
		return nil, fmt.Errorf("membership lock: lease: %w", err)
	}
	s, err := concurrency.NewSession(cli, concurrency.WithLease(grant.ID), concurrency.WithTTL(int(grant.TTL)),
		concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
		_, _ = cli.Revoke(rctx, grant.ID)
		cancel()
		return nil, fmt.Errorf("membership lock: session: %w", err)
	}
	m := concurrency.NewMutex(s, LockKey)
	if err := m.TryLock(ctx); err != nil {
		if !errors.Is(err, concurrency.ErrLocked) {
			_ = s.Close()
			return nil, fmt.Errorf("membership lock: %w", err)
		}
		logf("membership: waiting for the membership lock (%s), held by another change", LockKey)
		if err := m.Lock(ctx); err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("membership lock: %w", err)
		}
	}
	return &lock{session: s, mutex: m}, nil
}

// release unlocks and revokes the session's lease. It runs with its own
// deadline: the caller's context may be what ended.
func (l *lock) release(logf Logf) {
	l.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := l.mutex.Unlock(ctx); err != nil {
			logf("membership: unlock: %v (the lease expires anyway)", err)
		}
		if err := l.session.Close(); err != nil {
			logf("membership: close lock session: %v", err)
		}
	})
}

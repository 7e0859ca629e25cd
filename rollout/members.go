package rollout

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// This file is scale-down (DESIGN §5): removing one member, by an operator
// (etcdbox members remove) or by the node itself (etcdbox decommission).
// Both run Remove, so both take the same lock and the same quorum check.

// MembershipLockKey is the etcd mutex that serializes membership changes.
// It must equal init/member.LockKey (a test checks it): a join holds it
// from its learner's add to the promotion, a removal while it removes, so
// a join and a removal never overlap. The CLI does not import init/member
// (it is the node's package); both use a concurrency.Mutex on this key.
const MembershipLockKey = "/etcdbox/membership"

// RemoveLockTTL is the lease of the membership lock while a removal holds
// it: a removal takes seconds, and a remover that dies frees the lock
// after that long.
const RemoveLockTTL = 10 * time.Second

// Sentinel errors a caller branches on (the node API answers 409 to both).
var (
	// ErrMembershipLocked: another membership change holds the lock.
	ErrMembershipLocked = errors.New("another membership change is under way")
	// ErrRemoveRefused: the removal would break a rule (not a member, the
	// last one, or a quorum that would not stay healthy).
	ErrRemoveRefused = errors.New("removal refused")
)

// Membership is the member list with each member's health, as seen from
// this host.
type Membership struct {
	Members []MemberState
	// Leader is the leader's ID, 0 when no member answered with one.
	Leader uint64
	// Endpoints maps a member's ID to the client URL it answered at.
	Endpoints map[uint64]string
}

// probeTimeout bounds one member's Status probe, so that an address this
// host cannot reach costs seconds, not the caller's whole deadline. A
// probe dials and handshakes TLS anew; under emulation, from a guest of
// a busy five-node cluster, 3 s was seen to be too short.
const probeTimeout = 10 * time.Second

// observeTries is how often Remove looks again before it refuses because
// members did not answer: a member that is slow to answer once is not a
// lost one, and the refusal is then only a retry away.
const observeTries = 3

// ObserveMembers lists the members (linearizable) and probes each one's
// health: a member is healthy when one of endpoints, or of its own
// advertised client URLs, answers Status as that member without errors.
// endpoints are the client URLs as this host reaches them (a local
// cluster's loopback forwards, say).
func ObserveMembers(ctx context.Context, cli *clientv3.Client, endpoints []string) (Membership, error) {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	ml, err := cli.MemberList(lctx)
	cancel()
	if err != nil {
		return Membership{}, fmt.Errorf("member list: %w", err)
	}
	ms := Membership{Endpoints: map[uint64]string{}}
	probe := slices.Clone(endpoints)
	for _, m := range ml.Members {
		ms.Members = append(ms.Members, MemberState{
			ID: m.ID, Name: m.Name, Learner: m.IsLearner,
			PeerURLs: slices.Clone(m.PeerURLs), ClientURLs: slices.Clone(m.ClientURLs),
			Problem: "no client URL answers for it",
		})
		for _, u := range m.ClientURLs {
			if !slices.Contains(probe, u) {
				probe = append(probe, u)
			}
		}
	}
	type answer struct {
		id, leader uint64
		errs       []string
		err        error
	}
	answers := make([]answer, len(probe))
	var wg sync.WaitGroup
	for i, ep := range probe {
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, probeTimeout)
			defer cancel()
			if err := dialable(sctx, ep); err != nil {
				answers[i].err = err
				return
			}
			st, err := cli.Status(sctx, ep)
			if err != nil {
				answers[i].err = err
				return
			}
			answers[i] = answer{id: st.Header.MemberId, leader: st.Leader, errs: st.Errors}
		})
	}
	wg.Wait()
	for i, a := range answers {
		if a.err != nil {
			continue
		}
		if a.leader != 0 {
			ms.Leader = a.leader
		}
		for j := range ms.Members {
			m := &ms.Members[j]
			if m.ID != a.id || m.Healthy {
				continue
			}
			if len(a.errs) > 0 {
				m.Problem = strings.Join(a.errs, ", ")
				continue
			}
			m.Healthy, m.Problem = true, ""
			ms.Endpoints[m.ID] = probe[i]
		}
	}
	// In name order (an unstarted member by its ID), as people read it.
	slices.SortFunc(ms.Members, func(a, b MemberState) int { return strings.Compare(memberLabel(a), memberLabel(b)) })
	for i := range ms.Members {
		if m := &ms.Members[i]; m.Name == "" && !m.Healthy {
			m.Problem = "not started"
		}
	}
	return ms, nil
}

// dialable opens and closes a TCP connection to the client URL ep, so
// that a member that is down costs its probe a refused connection, not
// the whole probeTimeout: etcd's client retries a refused connection
// until the RPC's deadline, and Remove looks up to observeTries times, so
// an operator waited most of a minute for a "no" while a voter was down.
// A URL this does not parse is left to the RPC.
func dialable(ctx context.Context, ep string) error {
	u, err := url.Parse(ep)
	if err != nil || u.Host == "" {
		return nil
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return err
	}
	return c.Close()
}

// Find returns the member called name, or whose hexadecimal ID is name
// (an unstarted member has no name yet).
func (ms Membership) Find(name string) (MemberState, bool) {
	for _, m := range ms.Members {
		if m.Name != "" && m.Name == name {
			return m, true
		}
	}
	for _, m := range ms.Members {
		if memberID(m.ID) == strings.ToLower(name) {
			return m, true
		}
	}
	return MemberState{}, false
}

// memberLabel names m for messages: its name, else its ID.
func memberLabel(m MemberState) string {
	if m.Name == "" {
		return memberID(m.ID) + " (unstarted)"
	}
	return m.Name
}

// CheckRemove decides, with no I/O, whether the member called name (or
// with that hexadecimal ID) may be removed from members. It refuses, with
// ErrRemoveRefused and the reason, when name is not a member (naming the
// members), when it is the last member or the last voter, or when the
// voters that remain would not have a healthy quorum: a majority of them
// must be healthy after the removal. A learner does not vote, so removing
// one never endangers the quorum.
func CheckRemove(members []MemberState, name string) error {
	ms := Membership{Members: members}
	target, ok := ms.Find(name)
	if !ok {
		var names []string
		for _, m := range members {
			names = append(names, memberLabel(m))
		}
		slices.Sort(names)
		return fmt.Errorf("%w: %s is not a member; the members are %s", ErrRemoveRefused, name, strings.Join(names, ", "))
	}
	if len(members) == 1 {
		return fmt.Errorf("%w: %s is the last member; removing it would end the cluster", ErrRemoveRefused, memberLabel(target))
	}
	if target.Learner {
		return nil
	}
	var remaining, healthy int
	var down []string
	for _, m := range members {
		if m.Learner || m.ID == target.ID {
			continue
		}
		remaining++
		if m.Healthy {
			healthy++
		} else {
			down = append(down, fmt.Sprintf("%s: %s", memberLabel(m), orNone(m.Problem)))
		}
	}
	if remaining == 0 {
		return fmt.Errorf("%w: %s is the last voting member; promote a learner first", ErrRemoveRefused, memberLabel(target))
	}
	if quorum := remaining/2 + 1; healthy < quorum {
		return fmt.Errorf("%w: removing %s would leave %d healthy of %d voters, below their quorum of %d (not healthy: %s)",
			ErrRemoveRefused, memberLabel(target), healthy, remaining, quorum, strings.Join(down, "; "))
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "unknown problem"
	}
	return s
}

// Removal removes one member, under the membership lock.
type Removal struct {
	// Client reaches the cluster; TLS reaches single members (leadership).
	Client *clientv3.Client
	TLS    *tls.Config
	// Endpoints are the client URLs as this host reaches them.
	Endpoints []string
	// BeforeRemove, when set, runs under the lock after the checks passed
	// and leadership moved, just before the removal; its error stops it.
	// A node that removes itself writes its tombstone there.
	BeforeRemove func(MemberState) error
	// Logf receives progress lines; nil discards them.
	Logf func(format string, args ...any)
}

// settleWait bounds the retries of a removal that etcd refuses because its
// members have not been connected for 5s (strict reconfiguration checks).
const settleWait = 20 * time.Second

// Remove removes the member called name (or with that hex ID): it takes
// the membership lock (ErrMembershipLocked when held), observes the
// members and their health, checks CheckRemove (ErrRemoveRefused), hands
// leadership to a healthy voter when the member leads, runs BeforeRemove,
// and removes the member through the other members' endpoints. It returns
// the removed member.
func (r Removal) Remove(ctx context.Context, name string) (MemberState, error) {
	logf := r.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	unlock, err := LockMembership(ctx, r.Client, 0)
	if err != nil {
		return MemberState{}, err
	}
	defer unlock()
	ms, err := r.removable(ctx, name, logf)
	if err != nil {
		return MemberState{}, err
	}
	target, _ := ms.Find(name)
	if ms.Leader == target.ID {
		to, ok := transferee(ms, target.ID)
		if !ok {
			return MemberState{}, fmt.Errorf("%w: %s leads and no other healthy voter can take over", ErrRemoveRefused, memberLabel(target))
		}
		logf("members: %s leads; handing leadership to %s", memberLabel(target), memberLabel(to))
		if err := NewEtcd(r.Client, r.TLS).MoveLeader(ctx, ms.Endpoints[target.ID], to.ID); err != nil {
			return MemberState{}, fmt.Errorf("hand leadership from %s to %s: %w", memberLabel(target), memberLabel(to), err)
		}
	}
	if r.BeforeRemove != nil {
		if err := r.BeforeRemove(target); err != nil {
			return MemberState{}, err
		}
	}
	// The removed member may stop before it answers; ask the others.
	var others []string
	for id, ep := range ms.Endpoints {
		if id != target.ID {
			others = append(others, ep)
		}
	}
	cli := r.Client
	if len(others) > 0 {
		if cli, err = Dial(others, r.TLS); err != nil {
			return MemberState{}, err
		}
		defer cli.Close()
	}
	if err := removeMember(ctx, cli, target, logf); err != nil {
		return MemberState{}, err
	}
	logf("members: removed %s (%s)", memberLabel(target), memberID(target.ID))
	return target, nil
}

// removable observes the members until CheckRemove allows removing name,
// looking again (up to observeTries) while a voter does not answer: a
// member slow to answer once is not a lost one.
func (r Removal) removable(ctx context.Context, name string, logf func(string, ...any)) (Membership, error) {
	for try := 1; ; try++ {
		ms, err := ObserveMembers(ctx, r.Client, r.Endpoints)
		if err != nil {
			return Membership{}, err
		}
		err = CheckRemove(ms.Members, name)
		if err == nil {
			return ms, nil
		}
		if try == observeTries || !slices.ContainsFunc(ms.Members, func(m MemberState) bool { return !m.Healthy && !m.Learner }) {
			return Membership{}, err
		}
		logf("members: %v; looking again (%d of %d)", err, try+1, observeTries)
		select {
		case <-ctx.Done():
			return Membership{}, err
		case <-time.After(time.Second):
		}
	}
}

// removeMember removes target through cli, retrying while etcd refuses
// because its members have not been connected for long enough.
func removeMember(ctx context.Context, cli *clientv3.Client, target MemberState, logf func(string, ...any)) error {
	deadline := time.Now().Add(settleWait)
	var err error
	for delay := 250 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = cli.MemberRemove(rctx, target.ID)
		cancel()
		if !errors.Is(err, rpctypes.ErrUnhealthy) || time.Now().After(deadline) {
			break
		}
		logf("members: remove %s: %v (etcd waits until its members have been connected for 5s); retrying in %s", memberLabel(target), err, delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("remove member %s: %w", memberLabel(target), ctx.Err())
		case <-t.C:
		}
	}
	if err != nil {
		return fmt.Errorf("remove member %s (%s): %w", memberLabel(target), memberID(target.ID), err)
	}
	return nil
}

// transferee is a healthy voter other than id, in name order.
func transferee(ms Membership, id uint64) (MemberState, bool) {
	var cands []MemberState
	for _, m := range ms.Members {
		if m.ID != id && !m.Learner && m.Healthy && ms.Endpoints[m.ID] != "" {
			cands = append(cands, m)
		}
	}
	if len(cands) == 0 {
		return MemberState{}, false
	}
	slices.SortFunc(cands, func(a, b MemberState) int { return strings.Compare(a.Name, b.Name) })
	return cands[0], true
}

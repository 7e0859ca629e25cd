package member

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// formation decides for an expected initial member without data that
// reaches no cluster, on the handshake's answers (see Record): bootstrap
// a new formation when every expected initial member (less the ones the
// operator excluded) answers fresh, bootstrap into a formation that holds
// this node's nonce, or wait and say for what.
func formation(f Facts) Plan {
	answered := answersWhere(f.Answers, func(a Answer) bool { return a.Err == nil })
	for _, a := range answered {
		if slices.Contains(a.Without, f.Self) {
			return wait(fmt.Sprintf("%s forms the cluster without %s (etcdbox bootstrap --without): %s will join as a learner once a quorum of the cluster answers", a.Name, f.Self, f.Self))
		}
	}

	// A formation that started: join its slot only with this node's nonce.
	if started := answersWhere(answered, func(a Answer) bool { return a.Started }); len(started) > 0 {
		return startedFormation(f, answered, started)
	}

	// Anything with data, or that was a member, means the cluster formed.
	if holders := answersWhere(answered, holdsCluster); len(holders) > 0 {
		return wait(formedReason(f, holders, answered))
	}
	return newFormation(f)
}

// answersWhere returns the answers of as for which keep is true.
func answersWhere(as []Answer, keep func(Answer) bool) []Answer {
	var out []Answer
	for _, a := range as {
		if keep(a) {
			out = append(out, a)
		}
	}
	return out
}

// holdsCluster reports whether a comes from a node that has data or was a
// member: the cluster formed.
func holdsCluster(a Answer) bool { return a.HasData || a.WasMember }

// startedFormation decides when some peers (started, among answered)
// started etcd in a formation: bootstrap into its slot when it holds this
// node's nonce and nothing contradicts it, or wait.
func startedFormation(f Facts, answered, started []Answer) Plan {
	self := f.Formation
	t := started[0]
	for _, a := range started[1:] {
		if a.Token != t.Token {
			return wait(fmt.Sprintf("%s started formation %s and %s formation %s: two formations, not bootstrapping; this needs an operator", t.Name, t.Token, a.Name, a.Token))
		}
	}
	if self.Nonce == "" || t.Nonces[f.Self] != self.Nonce {
		holders := answersWhere(answered, holdsCluster)
		if len(holders) == 0 {
			holders = started
		}
		return wait(fmt.Sprintf("%s; formation %s of %s does not hold this node's nonce (its state was lost, or the cluster formed without it)", formedReason(f, holders, answered), t.Token, t.Name))
	}
	for _, a := range answered {
		if holdsCluster(a) && a.Token != t.Token {
			return wait(fmt.Sprintf("%s holds data of this cluster outside formation %s: not bootstrapping; %s will join once a quorum of the cluster answers", a.Name, t.Token, f.Self))
		}
	}
	if Token(f.Cluster, t.Nonces) != t.Token {
		return wait(fmt.Sprintf("%s reports formation %s, which is not the token of its nonces: not bootstrapping", t.Name, t.Token))
	}
	return Plan{
		Action: Bootstrap, State: "new", Token: t.Token, Nonces: maps.Clone(t.Nonces),
		Initial: inOrder(f.ExpectedInitial, slices.Collect(maps.Keys(t.Nonces))),
		Reason: fmt.Sprintf("%s started etcd in formation %s, which holds this node's nonce, and %s never started etcd: bootstrap into its slot",
			names(started), t.Token, f.Self),
	}
}

// newFormation decides when no peer has data or started etcd: bootstrap a
// new formation of the expected initial members, less the ones the
// operator excluded, once every one answers fresh and agrees, or wait.
func newFormation(f Facts) Plan {
	self := f.Formation
	members := slices.DeleteFunc(slices.Clone(f.ExpectedInitial), func(n string) bool { return slices.Contains(self.Without, n) })
	if missing := unanswered(f, members); len(missing) > 0 {
		return wait(fmt.Sprintf("no data and no peer answers: waiting for %s to answer the formation handshake; every expected initial member must say it never formed the cluster (if one never boots, `etcdbox bootstrap --without NAME` forms the cluster without it)", strings.Join(missing, ", ")))
	}
	nonces, why := formationNonces(f, members)
	if why != "" {
		return wait(why)
	}
	if self.Nonce == "" {
		return wait("this node has no formation nonce yet: waiting")
	}
	token := Token(f.Cluster, nonces)
	reason := fmt.Sprintf("no data, and every expected initial member (%s) answers that it has none, never was a member and never started etcd: bootstrap formation %s", strings.Join(members, ", "), token)
	if len(self.Without) > 0 {
		reason += fmt.Sprintf(" without %s, as the operator asked", strings.Join(self.Without, ", "))
	}
	return Plan{Action: Bootstrap, State: "new", Token: token, Nonces: nonces, Initial: members, Reason: reason}
}

// unanswered lists the members, other than this node, that were not asked
// or did not answer, each with why.
func unanswered(f Facts, members []string) []string {
	var missing []string
	for _, n := range members {
		if n == f.Self {
			continue
		}
		i := slices.IndexFunc(f.Answers, func(a Answer) bool { return a.Name == n })
		switch {
		case i < 0:
			missing = append(missing, n+" (not asked)")
		case f.Answers[i].Err != nil:
			missing = append(missing, fmt.Sprintf("%s (%v)", n, f.Answers[i].Err))
		}
	}
	return missing
}

// formationNonces returns the nonces of members, this node's included,
// from their answers, which must all have answered. It returns instead
// why to wait when a member disagrees on the excluded members or the
// cluster, or has no nonce.
func formationNonces(f Facts, members []string) (nonces map[string]string, why string) {
	self := f.Formation
	nonces = map[string]string{f.Self: self.Nonce}
	for _, n := range members {
		if n == f.Self {
			continue
		}
		a := f.Answers[slices.IndexFunc(f.Answers, func(a Answer) bool { return a.Name == n })]
		if !sameSet(a.Without, self.Without) {
			return nil, fmt.Sprintf("%s forms without [%s], this node without [%s]: waiting until every member is told the same (etcdbox bootstrap --without)", n, strings.Join(a.Without, ", "), strings.Join(self.Without, ", "))
		}
		if a.Cluster != f.Cluster {
			return nil, fmt.Sprintf("%s answers for cluster %q, the seed names %q: not bootstrapping", n, a.Cluster, f.Cluster)
		}
		if a.Nonce == "" {
			return nil, fmt.Sprintf("%s answered without a nonce: waiting", n)
		}
		nonces[n] = a.Nonce
	}
	return nonces, ""
}

// formedReason says why a node without data does not bootstrap when
// holders have data, and whether the cluster has lost its quorum.
func formedReason(f Facts, holders, answered []Answer) string {
	hs := names(holders)
	verb := "holds"
	if len(holders) > 1 {
		verb = "hold"
	}
	all, inCluster := true, 0
	for _, n := range f.ExpectedInitial {
		if n != f.Self && !slices.ContainsFunc(answered, func(a Answer) bool { return a.Name == n }) {
			all = false
		}
	}
	for _, h := range holders {
		if slices.Contains(f.ExpectedInitial, h.Name) {
			inCluster++
		}
	}
	// Every expected initial member answered and too few kept their
	// data: a quorum of them lost it. Members added later could still
	// hold a quorum; the node waits either way.
	if quorum := len(f.ExpectedInitial)/2 + 1; all && len(holders) == inCluster && inCluster < quorum {
		return fmt.Sprintf("quorum lost: %s %s data of this cluster, only %d of the expected initial members %s, fewer than the quorum of %d; %s never forms a cluster of its own and waits: recover from %s (etcdbox recover --survivor)",
			hs, verb, inCluster, strings.Join(f.ExpectedInitial, ", "), quorum, f.Self, holders[0].Name)
	}
	return fmt.Sprintf("%s %s data of this cluster: not bootstrapping; %s will join once a quorum of the cluster answers", hs, verb, f.Self)
}

// inOrder returns the names of set in the order of order, then the rest
// sorted.
func inOrder(order, set []string) []string {
	var out []string
	for _, n := range order {
		if slices.Contains(set, n) {
			out = append(out, n)
		}
	}
	var rest []string
	for _, n := range set {
		if !slices.Contains(out, n) {
			rest = append(rest, n)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// quorumLost reports whether the reachable cluster's voters cannot make a
// quorum because too many of them lost their data: started voters that
// do not answer and stand for this node (which has none) or for a peer
// that answers the handshake without data. Unstarted voters are slots
// of a forming cluster, not losses.
func quorumLost(f Facts) (string, bool) {
	var voters, lost, holders []string
	peerLost := false
	for _, m := range f.Members {
		if m.IsLearner {
			continue
		}
		voters = append(voters, m.String())
		if !m.Started || m.Healthy {
			if m.Healthy {
				holders = append(holders, m.Name)
			}
			continue
		}
		i := slices.IndexFunc(f.Answers, func(a Answer) bool { return a.Name == m.Name })
		switch {
		case m.Is(f.Self, f.SelfPeerURL):
			lost = append(lost, cmpOr(m.Name, m.String()))
		case i >= 0 && f.Answers[i].Err == nil && !f.Answers[i].HasData:
			lost = append(lost, cmpOr(m.Name, m.String()))
			peerLost = true
		}
	}
	quorum := len(voters)/2 + 1
	// Only a peer's own word that it lost its data makes this certain;
	// without it, Join tries (and fails and retries while the cluster
	// has no quorum).
	if !peerLost || len(voters)-len(lost) >= quorum {
		return "", false
	}
	return fmt.Sprintf("quorum lost: voters %s lost their data, so %s cannot make the quorum of %d of %s; %s holds data of this cluster: not joining, never forming a cluster of its own; recover from a survivor (etcdbox recover --survivor)",
		strings.Join(lost, ", "), cmpOr(strings.Join(holders, ", "), "none answering"), quorum, strings.Join(voters, ", "), cmpOr(strings.Join(holders, ", "), "no answering member")), true
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

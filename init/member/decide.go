package member

import (
	"fmt"
	"slices"
	"strings"
)

// Action is what a node does with its etcd member at boot.
type Action int

const (
	// Wait: do nothing now; observe again after a backoff. Plan.Reason
	// says what the node waits for.
	Wait Action = iota
	// Restart: start etcd on the data it has, with
	// --initial-cluster-state=existing.
	Restart
	// Bootstrap: start etcd with --initial-cluster-state=new and the
	// expected initial members as --initial-cluster; etcd itself waits
	// for a quorum of them.
	Bootstrap
	// JoinAsLearner: Join (which removes stale members and adds this node
	// as a learner under the membership lock), start etcd with
	// --initial-cluster-state=existing and the initial cluster Join
	// returns, then Promote.
	JoinAsLearner
	// RejoinAfterRemoval: MoveAside the data of the removed member, then
	// as JoinAsLearner.
	RejoinAfterRemoval
)

func (a Action) String() string {
	switch a {
	case Wait:
		return "wait"
	case Restart:
		return "restart"
	case Bootstrap:
		return "bootstrap"
	case JoinAsLearner:
		return "join as learner"
	case RejoinAfterRemoval:
		return "rejoin after removal"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Facts is what a node knows about itself and its cluster before it
// starts etcd. Members and PeerCluster come from Observe.
type Facts struct {
	// Self is this node's member name, SelfPeerURL its peer URL.
	Self, SelfPeerURL string
	// Cluster is the seed's cluster name; PeerCluster the name the
	// reachable cluster claims (Claim), "" when it has none.
	Cluster, PeerCluster string

	// HasData: etcd's data dir holds a member (member/wal exists).
	HasData bool
	// WasMember: the node's state says it has been a member before (a
	// marker in state/ written once etcd first served). Such a node
	// never bootstraps again: with the same initial cluster and token, a
	// fresh etcd gets the old member's ID, and an empty member that
	// votes could let a stale log win an election. Without the marker, a
	// node that lost only its data dir while no peer answers would
	// bootstrap.
	WasMember bool
	// RemovedFromCluster: etcd said this member was removed
	// (RemovedMessage in its log).
	RemovedFromCluster bool
	// DataCluster is the cluster ID (hex) of the member this node last
	// ran as a voter, "" when unknown; PeerClusterID the cluster ID the
	// answering peer gave (Observation.ClusterID, hex).
	DataCluster, PeerClusterID string

	// Reachable: a peer answered a member list (Observe succeeded).
	Reachable bool
	// Members is that list (empty when not Reachable).
	Members []Member

	// ExpectedInitial are the names of the expected initial members
	// (discovery.PeerSet.Initial).
	ExpectedInitial []string

	// Formation is this node's formation record (Store.Load): its nonce
	// and the formation it committed to, if any.
	Formation Record
	// Answers are the other peers' replies to the formation handshake
	// (node API GET /v1/formation), one per peer asked, Err set for
	// those that did not answer. Gathered only without data.
	Answers []Answer
}

// Plan is Decide's answer.
type Plan struct {
	Action Action
	// Reason is one line for the log: what the node saw and why it acts.
	Reason string
	// State is etcd's --initial-cluster-state: "new" for Bootstrap,
	// "existing" for the others, "" for Wait.
	State string
	// Promote asks for Promote once etcd is ready: the node restarts as a
	// learner whose join was interrupted before its promotion.
	Promote bool
	// Stale are the members with this node's name or peer URL that Join
	// will remove: never started, or started and not answering. Join
	// checks again under the lock; these are for the log.
	Stale []Member

	// Bootstrap only: Token is etcd's --initial-cluster-token, Initial
	// the names of the members of --initial-cluster, and Nonces the
	// formation's nonces by name. The node commits Token and Nonces to
	// its Record before it starts etcd.
	Token   string
	Initial []string
	Nonces  map[string]string
}

// Decide chooses what a node does with its member (DESIGN §5). It is pure:
// the same facts give the same plan, and every branch says why in
// Plan.Reason. The rules, in order:
//
//   - A node whose data is a member of another cluster than the one its
//     peers run (a recovery or a restore replaced it) waits: it never
//     starts etcd on that data, and never moves it.
//   - A node with data always restarts with it, and promotes itself when
//     the cluster still lists it as a learner. Only etcd's own word that
//     the member was removed changes that: then the data is moved aside
//     and the node joins again, once a peer answers (until then it waits
//     with its data in place).
//   - A node without data that reaches the cluster joins as a learner,
//     after removing stale members with its name or peer URL (never
//     started, or started and not answering). A started member with its
//     name or peer URL that answers means another node runs with this
//     identity: wait. So does a cluster that claims another name.
//     One exception: the cluster is still forming and this node's slot
//     among the initial members has not started yet (an unstarted voting
//     member with this name and peer URL), and a peer's formation holds
//     this node's nonce: it bootstraps into the slot with that token.
//     And when too many voters are known to have lost their data (this
//     node's, and peers that answer the handshake without data) for the
//     rest to make a quorum, it waits and says the quorum is lost: no
//     join could succeed, and nothing may form a cluster of its own.
//   - A node without data that reaches no cluster bootstraps only when it
//     is an expected initial member, never was a member, never started a
//     formation, and the formation handshake proves the cluster never
//     formed (formation.go): every expected initial member answers that
//     it has no data, or a formation that started holds this node's
//     nonce. Otherwise it waits and says for what.
func Decide(f Facts) Plan {
	mine := f.mine()
	expected := slices.Contains(f.ExpectedInitial, f.Self)
	otherCluster := f.Reachable && f.PeerCluster != "" && f.Cluster != "" && f.PeerCluster != f.Cluster

	if f.HasData {
		if f.Reachable && f.DataCluster != "" && f.PeerClusterID != "" && f.DataCluster != f.PeerClusterID {
			return wait(fmt.Sprintf("refused: this node's data is a member of cluster %s, but the peers run cluster %s (a recovery or a restore replaced it); etcd does not start and the data stays in place. To join cluster %s, run the etcdbox recover (or restore) that made it again, which has this node move its data aside, or give this node an empty disk: it then joins as a learner", f.DataCluster, f.PeerClusterID, f.PeerClusterID))
		}
		if f.RemovedFromCluster {
			switch {
			case !f.Reachable:
				return wait("etcd reported that this member was removed from the cluster; no peer answers, so the data stays in place until the node can rejoin")
			case otherCluster:
				return wait(fmt.Sprintf("etcd reported that this member was removed; the peers run cluster %q, not %q: not rejoining", f.PeerCluster, f.Cluster))
			}
			if m, ok := answering(mine); ok {
				return wait(fmt.Sprintf("etcd reported that this member was removed, and member %s answers with this node's name or peer URL: another node runs as %s; not rejoining", m, f.Self))
			}
			return Plan{
				Action: RejoinAfterRemoval,
				State:  "existing",
				Reason: "etcd reported that this member was removed from the cluster: move its data aside and join again as a learner",
				Stale:  mine,
			}
		}
		p := Plan{Action: Restart, State: "existing", Reason: "the data dir holds a member: restart with it"}
		for _, m := range mine {
			if m.IsLearner {
				p.Promote = true
				p.Reason += fmt.Sprintf("; the cluster lists it as learner %s, so promote it once it has caught up", m)
			}
		}
		return p
	}

	if f.Reachable {
		if otherCluster {
			return wait(fmt.Sprintf("the peers run cluster %q, the seed names %q: not joining", f.PeerCluster, f.Cluster))
		}
		for _, m := range mine {
			if !m.Started && !m.IsLearner && m.Name == f.Self && slices.Contains(m.PeerURLs, f.SelfPeerURL) && expected && !f.WasMember && !f.Formation.Started() {
				if p := formation(f); p.Action == Bootstrap && p.Token != "" && slices.ContainsFunc(f.Answers, func(a Answer) bool { return a.Started && a.Token == p.Token }) {
					p.Reason = fmt.Sprintf("the cluster lists initial member %s, which has not started yet (the node is late or the cluster is forming); %s", m, p.Reason)
					return p
				}
			}
		}
		if m, ok := answering(mine); ok {
			return wait(fmt.Sprintf("member %s is started and answers with this node's name or peer URL: another node runs as %s", m, f.Self))
		}
		if reason, lost := quorumLost(f); lost {
			return wait(reason)
		}
		p := Plan{Action: JoinAsLearner, State: "existing", Stale: mine, Reason: "no data and the cluster answers: join as a learner"}
		if len(mine) > 0 {
			p.Reason += " after removing stale " + list(mine)
		}
		return p
	}

	switch {
	case f.WasMember:
		return wait("no data, but this node was a member before: it never bootstraps again; waiting for a peer to answer so it can rejoin")
	case f.Formation.Started():
		return wait(fmt.Sprintf("no data, but this node started etcd in formation %s before: its etcd data is lost and it never bootstraps again; waiting for a quorum of the cluster to answer so it can rejoin as a learner", f.Formation.Token))
	case !expected:
		return wait(fmt.Sprintf("no data, no peer answers, and %s is not an expected initial member (%s): waiting for the cluster", f.Self, strings.Join(f.ExpectedInitial, ", ")))
	}
	return formation(f)
}

func wait(reason string) Plan { return Plan{Action: Wait, Reason: reason} }

// mine returns the members with this node's name or peer URL.
func (f Facts) mine() []Member {
	var out []Member
	for _, m := range f.Members {
		if m.Is(f.Self, f.SelfPeerURL) {
			out = append(out, m)
		}
	}
	return out
}

// answering returns a started member of ms that answered.
func answering(ms []Member) (Member, bool) {
	for _, m := range ms {
		if m.Started && m.Healthy {
			return m, true
		}
	}
	return Member{}, false
}

func list(ms []Member) string {
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = m.String()
	}
	return strings.Join(s, ", ")
}

// Package member runs the life of this node's etcd member (DESIGN §5):
// whether it restarts, bootstraps, joins as a learner or rejoins after it
// was removed, and the membership changes that go with it.
//
// Deciding is pure and separate from acting. The init gathers Facts (its
// data dir, its state, its formation Record, Observe through the other
// nodes' client URLs, and, without data, every peer's answer to the
// formation handshake through its node API), asks Decide for a Plan, and
// carries it out:
//
//	obs, err := member.Observe(ctx, peers)          // peers: client to the other nodes
//	plan := member.Decide(member.Facts{
//		Self: name, SelfPeerURL: peerURL, Cluster: seed.Cluster,
//		HasData: hasWAL, WasMember: marker, RemovedFromCluster: watch.Seen(),
//		Reachable: err == nil, Members: obs.Members, PeerCluster: obs.Cluster,
//		ExpectedInitial: set.Initial(seed.Discovery.InitialSize).Names(),
//		Formation: rec, Answers: answers, // store.Load(); GET /v1/formation of each peer
//	})
//	log(plan.Action, plan.Reason)
//	switch plan.Action {
//	case member.Wait:               // observe again after a backoff
//	case member.Restart:            // etcd --initial-cluster-state=existing on its data;
//	                                // if plan.Promote: member.Promote(ctx, peers, id, logf) once ready
//	case member.Bootstrap:          // store.Update: commit plan.Token and plan.Nonces, then
//	                                // etcd --initial-cluster-state=new --initial-cluster-token=plan.Token
//	                                // --initial-cluster=plan.Initial; member.Claim once ready
//	case member.RejoinAfterRemoval: // member.MoveAside(dataDir, stateDir), then as below
//	case member.JoinAsLearner:
//		j, err := member.Join(ctx, peers, member.Request{Cluster: c, Name: name, PeerURL: peerURL})
//		// etcd --initial-cluster-state=existing --initial-cluster=j.InitialCluster
//		_, err = j.Promote(ctx) // or j.Release() if etcd did not start
//	}
//
// Loop runs that cycle (observe, decide, act, back off, and again when
// etcd says the member was removed) for the init, which wires it to its
// node through the Loop's fields (Gather, Commit, Launch, Local, Voter);
// the package's tests wire the same Loop to etcd processes.
//
// Once etcd serves, the init records in state/ that the node is a member
// (Facts.WasMember), and keeps that record when MoveAside moves the data:
// a node that has been a member never bootstraps again. A
// NewRemovedWatch on etcd's output says when the cluster removed the
// member (RemovedFromCluster).
//
// A node bootstraps only on proof that the cluster never formed (see
// formation.go for the reasoning): every expected initial member answers
// over mutual TLS, before any etcd starts, that it has no data, was never
// a member and never started a formation, and the members form with a
// token of their own (Token: the cluster name and a hash of their
// nonces). A wiped disk therefore never gets its old member ID back; it
// waits, saying who holds data or that the quorum is lost, and joins as a
// learner once the cluster has a quorum. An expected initial member that
// never boots holds up the first formation until the operator says
// `etcdbox bootstrap --without NAME` (Record.Without).
//
// Every failure is returned for the caller to log and retry with backoff;
// nothing here wipes data (MoveAside moves it into state/) or forms a
// second cluster. Membership changes are serialized cluster-wide by an
// etcd lock (LockKey) held from a learner's add to its promotion.
package member

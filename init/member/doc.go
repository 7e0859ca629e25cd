// Package member runs the life of this node's etcd member (DESIGN §5):
// whether it restarts, bootstraps, joins as a learner or rejoins after it
// was removed, and the membership changes that go with it.
//
// Deciding is pure and separate from acting. The init gathers Facts (its
// data dir, its state, and Observe through the other nodes' client URLs),
// asks Decide for a Plan, and carries it out:
//
//	obs, err := member.Observe(ctx, peers)          // peers: client to the other nodes
//	plan := member.Decide(member.Facts{
//		Self: name, SelfPeerURL: peerURL, Cluster: seed.Cluster,
//		HasData: hasWAL, WasMember: marker, RemovedFromCluster: watch.Seen(),
//		Reachable: err == nil, Members: obs.Members, PeerCluster: obs.Cluster,
//		ExpectedInitial: set.Initial(seed.Discovery.InitialSize).Names(),
//	})
//	log(plan.Action, plan.Reason)
//	switch plan.Action {
//	case member.Wait:               // observe again after a backoff
//	case member.Restart:            // etcd --initial-cluster-state=existing on its data;
//	                                // if plan.Promote: member.Promote(ctx, peers, id, logf) once ready
//	case member.Bootstrap:          // etcd --initial-cluster-state=new, --initial-cluster=set.Initial(n)...;
//	                                // member.Claim once ready
//	case member.RejoinAfterRemoval: // member.MoveAside(dataDir, stateDir), then as below
//	case member.JoinAsLearner:
//		j, err := member.Join(ctx, peers, member.Request{Cluster: c, Name: name, PeerURL: peerURL})
//		// etcd --initial-cluster-state=existing --initial-cluster=j.InitialCluster
//		_, err = j.Promote(ctx) // or j.Release() if etcd did not start
//	}
//
// Once etcd serves, the init records in state/ that the node is a member
// (Facts.WasMember), and keeps that record when MoveAside moves the data:
// a node that has been a member never bootstraps again. A
// NewRemovedWatch on etcd's output says when the cluster removed the
// member (RemovedFromCluster).
//
// Every failure is returned for the caller to log and retry with backoff;
// nothing here wipes data (MoveAside moves it into state/) or forms a
// second cluster (Decide bootstraps only expected initial members that
// reach no cluster). Membership changes are serialized cluster-wide by an
// etcd lock (LockKey) held from a learner's add to its promotion.
package member

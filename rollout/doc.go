// Package rollout rolls an etcdbox image over a cluster, one node at a
// time (DESIGN §7, issue 5). It runs on the operator's host, in the CLI
// (`etcdbox upgrade`, `etcdbox cluster upgrade`) and in tests; nodes only
// stage, reboot and gate themselves.
//
//	r := &rollout.Roll{Image: ref, Nodes: nodes, Etcd: rollout.NewEtcd(cli, tc, endpoints), Log: logf}
//	err := r.Run(ctx) // nil when every node runs ref, blessed
//
// The roll, in order:
//
//  1. It takes the etcd mutex /etcdbox/upgrade/lock (package concurrency),
//     so that two rolls never run at once, and records the target in
//     /etcdbox/upgrade/target (JSON Target).
//  2. Before each node it checks the preconditions (Check): every member
//     started, voting and healthy, every node's slot blessed, no alarm.
//     It waits up to Roll.ReadyWait for them, then stops with the reason.
//  3. Followers go first, in name order; the leader goes last (Order),
//     and before its step leadership moves to a healthy follower that
//     already runs the target.
//  4. Each node: POST /v1/snapshot (kept on DATA), arm the slot staged
//     ahead (staging it again if it went), POST /v1/reboot, then wait
//     until the node is back (Judge): booted on the staged slot, blessed,
//     a healthy voter. A node back on its old slot with the new one bad
//     stops the roll with "node n2 rolled back: <reason>"; a node that is
//     not back within Roll.NodeTimeout stops it too. A turn that fails
//     before the node is asked to arm (the leadership cannot be handed
//     over, or its status or its snapshot cannot be had, as when the
//     node restarted on its own as its turn began)
//     left the node as it was: it is taken again from the preconditions,
//     up to three times in all. From the arm on, a failure stops the roll,
//     since whether the node armed or rebooted is not known.
//  5. Progress goes to Roll.Log, one line per step; each node's record
//     is kept in /etcdbox/upgrade/nodes/<name> (NodeRecord), so
//     `etcdbox upgrade --status` shows it, and a roll started again
//     skips the nodes that are done. Deleting the target (--abort) stops
//     a running roll between two steps.
//
// Version rules (CheckVersions): etcd upgrades one minor at a time, so an
// image whose etcd skips a minor is refused. The cluster version rises
// once the last member runs the new minor; before that member moves (the
// point of no return) the roll checks that the cluster version has not
// risen yet and logs that rolling back by slot swap stops being safe
// after it. An image with etcd one minor lower starts with etcd's
// downgrade API (validate, then enable), which lowers the cluster
// version, before any node moves; each node then moves only once its
// member reports its storage version at the older minor (waitStorage),
// since an older etcd refuses a newer storage schema.
//
// Why the roll runs in the CLI and not in the nodes' agents (the issue
// has nodes take the lock themselves): the checks, the order, the lock
// and the records are the same, but one process sees the whole cluster,
// so the leader-last order, the point of no return and the downgrade
// switch are decided in one place instead of by each node racing for the
// lock; a roll stops for good at the first rollback instead of the next
// node trying; --abort and --status are a key in etcd either way; and a
// node never replaces its own slot unless an operator's command asked it
// to, now. The lock's lease (60 s) frees it when the CLI dies, and the
// records let the next `etcdbox upgrade` resume where it stopped.
package rollout

package rollout

import (
	"context"
	"fmt"
	"slices"
)

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// versionRules applies CheckVersions before any node moves, and starts
// etcd's downgrade when the image's etcd is a minor lower.
func (r *Roll) versionRules(ctx context.Context, c Cluster) (VersionPlan, error) {
	if r.ImageEtcd == "" {
		r.logf("the image's etcd version is unknown: the version rules are checked once the first node runs it")
		return VersionPlan{}, nil
	}
	plan, err := CheckVersions(etcdVersions(c), r.ImageEtcd)
	if err != nil {
		return plan, err
	}
	switch {
	case plan.Upgrade:
		r.logf("etcd %s -> %s: the cluster version rises after the last member moves", plan.From, plan.To)
	case plan.Downgrade:
		cv, err := ParseMinor(c.ClusterVersion)
		if err != nil || cv != plan.To {
			r.logf("etcd %s -> %s: enabling etcd's downgrade to %s before any node moves", plan.From, plan.To, plan.To)
			if err := r.Etcd.Downgrade(ctx, plan.To.String()); err != nil {
				return plan, err
			}
		}
	}
	return plan, nil
}

// waitStorage waits, for up to ReadyWait, until the member of node has
// migrated its storage to the minor to, as etcd does once its downgrade is
// enabled: an older binary refuses a newer storage schema, so the node
// must not boot the older image before that. A member already on the
// older minor passes at once.
func (r *Roll) waitStorage(ctx context.Context, node string, to Minor) (Cluster, error) {
	deadline := r.now().Add(r.ReadyWait)
	for {
		c, err := r.Observe(ctx)
		why := ""
		switch {
		case err != nil:
			why = err.Error()
		default:
			err = Check(c)
			if err != nil {
				why = err.Error()
				break
			}
			ns, _ := c.Node(node)
			m, ok := c.member(ns)
			switch {
			case !ok:
				why = "no member answers for it"
			case m.StorageVersion == "":
				why = "its member reports no storage version"
			default:
				sv, perr := ParseMinor(m.StorageVersion)
				if perr != nil {
					why = fmt.Sprintf("storage version: %v", perr)
				} else if sv != to {
					why = fmt.Sprintf("its storage version is %s", m.StorageVersion)
				}
			}
			if why == "" {
				r.logf("node %s: storage version %s", node, m.StorageVersion)
				return c, nil
			}
		}
		if r.now().After(deadline) {
			return c, fmt.Errorf("before node %s: etcd's downgrade to %s has not migrated its storage after %s: %s", node, to, r.ReadyWait, why)
		}
		if err := r.sleep(ctx); err != nil {
			return c, err
		}
	}
}

// pointOfNoReturn checks, before the last member moves to the new minor,
// that the cluster version has not risen yet: rolling back by slot swap is
// only safe while it has not.
func pointOfNoReturn(plan VersionPlan, c Cluster, node string) error {
	if c.ClusterVersion == "" {
		return fmt.Errorf("before node %s, the last member to move to etcd %s: the cluster version is unknown", node, plan.To)
	}
	cv, err := ParseMinor(c.ClusterVersion)
	if err != nil {
		return fmt.Errorf("before node %s: cluster version: %w", node, err)
	}
	if cv != plan.From {
		return fmt.Errorf("before node %s, the last member to move to etcd %s: the cluster version is %s already, want %s", node, plan.To, c.ClusterVersion, plan.From)
	}
	return nil
}

// etcdVersions maps node names to the etcd version they run.
func etcdVersions(c Cluster) map[string]string {
	out := map[string]string{}
	for _, n := range c.Nodes {
		v := n.Status.EtcdVersion
		if m, ok := c.member(n); ok && m.Version != "" {
			v = m.Version
		}
		out[n.Name] = v
	}
	return out
}

func findRecord(rs []NodeRecord, name string) (NodeRecord, bool) {
	i := slices.IndexFunc(rs, func(r NodeRecord) bool { return r.Name == name })
	if i < 0 {
		return NodeRecord{}, false
	}
	return rs[i], true
}

// checkTarget stops the roll when its target was deleted or replaced.
func (r *Roll) checkTarget(ctx context.Context) error {
	t, ok, err := r.Etcd.Target(ctx)
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("%w: the target %s was deleted", ErrAborted, KeyTarget)
	case t.Image != r.Image:
		return fmt.Errorf("%w: the target is now %s", ErrAborted, t.Image)
	}
	return nil
}

// handOver moves leadership off the leader before its step.
func (r *Roll) handOver(ctx context.Context, c Cluster, leader string, done []string) error {
	id, name, ok := Transferee(c, leader, done)
	if !ok {
		r.logf("node %s: leader, and no other voter to hand leadership to", leader)
		return nil
	}
	i := slices.IndexFunc(r.Nodes, func(n Node) bool { return n.Name == leader })
	r.logf("node %s: leader; moving leadership to %s", leader, name)
	if err := r.Etcd.MoveLeader(ctx, r.Nodes[i].EtcdEndpoint, id); err != nil {
		// The leadership may have left it meanwhile by itself (an
		// election, or its node handing it off a slow disk): then
		// there is nothing left to hand over.
		if now, oerr := r.Observe(ctx); oerr == nil && now.LeaderName() != "" && now.LeaderName() != leader {
			r.logf("node %s: no longer the leader (%s leads now): nothing to hand over (%v)", leader, now.LeaderName(), err)
			return nil
		}
		return fmt.Errorf("node %s: %w", leader, err)
	}
	return nil
}

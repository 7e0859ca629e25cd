package main

import (
	"context"
	"slices"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/etcdbox/etcdbox/rollout"
)

// maintainEvery is how often the leader's node looks for a NOSPACE alarm
// when the seed allows it to clear one (etcd.autoMaintain); a variable for
// the test hooks.
var maintainEvery = time.Minute

// autoMaintain clears a NOSPACE alarm by itself, when the seed allows it,
// as etcdbox maintain does: only on the node whose member leads (one node
// at a time without a lock, which NOSPACE would refuse to write), and
// never a CORRUPT alarm (Maintain refuses to go on with one raised).
func (n *node) autoMaintain(ctx context.Context) {
	if !n.seed.Etcd.AutoMaintain {
		return
	}
	t := time.NewTicker(maintainEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n.supervisor() == nil {
			continue
		}
		c, err := n.localMember().client()
		if err != nil {
			continue
		}
		m := &rollout.Maintenance{Client: c, Logf: func(format string, args ...any) { n.log.Printf("maintain: "+format, args...) }}
		if n.leadsWithNOSPACE(ctx, m) {
			n.log.Printf("maintain: NOSPACE is raised and the seed allows this node to clear it (etcd.autoMaintain): compact, defragment, disarm")
			mctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
			if err := m.Maintain(mctx); err != nil {
				n.log.Printf("maintain: %v", err)
			} else {
				n.log.Printf("maintain: done")
			}
			cancel()
		}
		c.Close()
	}
}

// leadsWithNOSPACE reports whether the local member leads and the cluster
// has a NOSPACE alarm raised.
func (n *node) leadsWithNOSPACE(ctx context.Context, m *rollout.Maintenance) bool {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := m.Client.Status(sctx, m.Client.Endpoints()[0])
	if err != nil || st.Leader != st.Header.MemberId {
		return false
	}
	alarms, err := m.Alarms(sctx)
	return err == nil && slices.ContainsFunc(alarms, func(a rollout.Alarm) bool { return a.Type == pb.AlarmType_NOSPACE.String() })
}

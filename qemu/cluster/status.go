package cluster

import (
	"context"
	"crypto/tls"
	"regexp"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdbox/etcdbox/qemu"
)

// NodeStatus is one row of Status.
type NodeStatus struct {
	Node Node
	// Running reports whether the node's VM runs.
	Running bool
	// State is the VM's state: running, stopped, paused or partitioned.
	State string
	MemberStatus
	// Slot is the boot slot (a or b) from the kernel command line on the
	// console, "-" when unknown.
	Slot string
	// Disk is the limit LimitDisk set on the node's disk, zero for none
	// (and for a VM that does not run).
	Disk qemu.DiskLimit
	// Links says how Impair degraded the node's links ("20% loss, 100ms
	// delay"), "" when it did not.
	Links string
}

// Role is "voter", "learner", or "-" when the node did not answer.
func (s NodeStatus) Role() string {
	switch {
	case s.MemberID == 0:
		return "-"
	case s.Learner:
		return "learner"
	}
	return "voter"
}

// Status asks every node, in parallel, for its member ID, role and
// health; a node that does not answer gets a row that says why.
func (c *Cluster) Status(ctx context.Context) ([]NodeStatus, error) {
	tc, err := c.adminTLS()
	if err != nil {
		return nil, err
	}
	_ = c.syncIPs(ctx)
	cut := c.partitioned(ctx)
	links := c.impaired(ctx)
	rows := make([]NodeStatus, len(c.st.Nodes))
	var wg sync.WaitGroup
	for i, n := range c.st.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows[i] = c.nodeStatus(ctx, n, tc)
			rows[i].State = c.VMState(ctx, n.Name, cut)
			rows[i].Links = links[n.Name]
		}()
	}
	wg.Wait()
	return rows, nil
}

func (c *Cluster) nodeStatus(ctx context.Context, n Node, tc *tls.Config) NodeStatus {
	s := NodeStatus{Node: n, Slot: "-"}
	vm, err := c.VM(n.Name)
	if err != nil {
		s.Health = "vm not running"
		return s
	}
	s.Running = true
	s.Slot = slotOf(vm.Console())
	s.Disk, _ = vm.DiskLimit(ctx) // unreadable: shown as none
	s.MemberStatus = askMember(ctx, n.Endpoint(), tc)
	return s
}

// MemberStatus is what a node says about itself.
type MemberStatus struct {
	// MemberID is the node's etcd member ID, 0 when it did not answer.
	MemberID uint64
	// Learner and Leader are the member's role, when it answered.
	Learner, Leader bool
	// Health is "healthy" when the node answered a read (linearizable
	// for a voter, serializable for a learner), else what went wrong.
	Health string
}

// askMember asks the etcd at endpoint for its status and makes a read.
func askMember(ctx context.Context, endpoint string, tc *tls.Config) MemberStatus {
	var s MemberStatus
	ctx, cancel := context.WithTimeout(ctx, probeLimit)
	defer cancel()
	cl, err := clientv3.New(clientv3.Config{
		Endpoints: []string{endpoint}, TLS: tc, DialTimeout: probeLimit, Logger: zap.NewNop(),
	})
	if err != nil {
		s.Health = shortErr(err)
		return s
	}
	defer cl.Close()
	st, err := cl.Status(ctx, endpoint)
	if err != nil {
		s.Health = shortErr(err)
		return s
	}
	s.MemberID, s.Learner = st.Header.MemberId, st.IsLearner
	s.Leader = st.Leader != 0 && st.Leader == st.Header.MemberId
	var opts []clientv3.OpOption
	if s.Learner {
		opts = append(opts, clientv3.WithSerializable())
	}
	if _, err := cl.Get(ctx, "etcdbox/health", opts...); err != nil {
		s.Health = shortErr(err)
		return s
	}
	s.Health = "healthy"
	return s
}

var slotRE = regexp.MustCompile(`etcdbox\.slot=([a-z0-9]+)`)

// slotOf returns the slot on the last kernel command line of a console
// log, or "-".
func slotOf(console string) string {
	m := slotRE.FindAllStringSubmatch(console, -1)
	if len(m) == 0 {
		return "-"
	}
	return m[len(m)-1][1]
}

package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdbox/etcdbox/nodeapi"
)

// decommission asks node n, through its node API, to leave the cluster
// for good (etcdbox decommission).
func (c *Cluster) decommission(ctx context.Context, n Node) (nodeapi.Decommissioned, error) {
	api, err := nodeapi.NewClient("https://127.0.0.1:"+strconv.Itoa(n.APIPort), c.PKIDir())
	if err != nil {
		return nodeapi.Decommissioned{}, err
	}
	defer api.Close()
	return api.Decommission(ctx, n.Name, "etcdbox cluster remove")
}

// removeMember removes node n's etcd member through the other nodes and
// returns its ID (0 when n was no member). It refuses when the voters
// left would not keep a healthy quorum. This is the local harness's own
// removal; `etcdbox members remove` and `decommission` are the
// operator's.
func (c *Cluster) removeMember(ctx context.Context, n Node) (uint64, error) {
	tc, err := c.adminTLS()
	if err != nil {
		return 0, err
	}
	var (
		others    []string
		healthyBy = map[uint64]bool{}
	)
	for _, o := range c.st.Nodes {
		if o.Name == n.Name {
			continue
		}
		others = append(others, o.Endpoint())
		if s := askMember(ctx, o.Endpoint(), tc); s.Health == "healthy" && !s.Learner {
			healthyBy[s.MemberID] = true
		}
	}
	cl, err := clientv3.New(clientv3.Config{Endpoints: others, TLS: tc, DialTimeout: probeLimit, Logger: zap.NewNop()})
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	lctx, cancel := context.WithTimeout(ctx, probeLimit)
	ml, err := cl.MemberList(lctx)
	cancel()
	if err != nil {
		return 0, fmt.Errorf("member list through the other nodes: %w", err)
	}
	var id uint64
	voters, healthy := 0, 0
	for _, m := range ml.Members {
		if isNode(m, n, c.st.Domain) {
			id = m.ID
			continue
		}
		if m.IsLearner {
			continue
		}
		voters++
		if healthyBy[m.ID] {
			healthy++
		}
	}
	if id == 0 {
		c.cfg.Log("%s: not a member of the cluster", n.Name)
		return 0, nil
	}
	if voters == 0 {
		return 0, errors.New("it is the only voting member")
	}
	if need := voters/2 + 1; healthy < need {
		return 0, fmt.Errorf("the %d voters left would have %d healthy, fewer than the quorum of %d: not removing", voters, healthy, need)
	}
	rctx, cancel := context.WithTimeout(ctx, probeLimit)
	defer cancel()
	if _, err := cl.MemberRemove(rctx, id); err != nil {
		return 0, fmt.Errorf("remove member %016x: %w", id, err)
	}
	return id, nil
}

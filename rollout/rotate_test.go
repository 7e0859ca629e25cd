package rollout

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
)

// rotNode is a sim node that takes CA rotation phases, in order.
type rotNode struct {
	*simNode
	mu     sync.Mutex
	id     string
	phase  string
	refuse error // RotateCA fails with it
	fails  int   // RotateCA fails this many times with a 500 first
}

func (n *rotNode) CARotation(context.Context) (nodeapi.CARotation, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return nodeapi.CARotation{ID: n.id, Phase: n.phase}, nil
}

func (n *rotNode) RotateCA(_ context.Context, req nodeapi.CARotationRequest) (nodeapi.CARotation, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.refuse != nil {
		return nodeapi.CARotation{}, n.refuse
	}
	if n.fails > 0 {
		n.fails--
		return nodeapi.CARotation{}, &nodeapi.Error{StatusCode: http.StatusInternalServerError, Message: "etcd restarted for new trusted CAs does not serve"}
	}
	id, _ := RotationID([]byte(req.NewCA))
	if nodeapi.PhaseIndex(req.Phase) != nodeapi.PhaseIndex(n.phase)+1 {
		return nodeapi.CARotation{}, &nodeapi.Error{StatusCode: http.StatusConflict, Message: "out of order: " + req.Phase + " after " + n.phase}
	}
	if req.Phase == nodeapi.RotationReissue && req.NodeCACert == "" {
		return nodeapi.CARotation{}, &nodeapi.Error{StatusCode: http.StatusBadRequest, Message: "no node CA"}
	}
	n.id, n.phase = id, req.Phase
	n.s.mu.Lock()
	n.s.event("%s %s", n.name, req.Phase)
	n.s.mu.Unlock()
	return nodeapi.CARotation{ID: id, Phase: n.phase}, nil
}

// rotEtcd is the sim's etcd with a rotation's records.
type rotEtcd struct {
	*simEtcd
	mu     sync.Mutex
	target *RotationTarget
	recs   map[string]RotationRecord
	// abortAfter deletes the target once this node's record is put.
	abortAfter string
}

func (e *rotEtcd) PutRotationTarget(_ context.Context, t RotationTarget) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.target = &t
	return nil
}

func (e *rotEtcd) RotationTarget(context.Context) (RotationTarget, bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.target == nil {
		return RotationTarget{}, false, nil
	}
	return *e.target, true, nil
}

func (e *rotEtcd) DeleteRotationTarget(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.target = nil
	return nil
}

func (e *rotEtcd) PutRotationRecord(_ context.Context, r RotationRecord) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.recs[r.Name] = r
	if r.Name == e.abortAfter {
		e.target = nil
	}
	return nil
}

func (e *rotEtcd) RotationRecords(context.Context) ([]RotationRecord, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []RotationRecord
	for _, r := range e.recs {
		out = append(out, r)
	}
	return out, nil
}

// rotation is a rotation of the sim's nodes to a new root.
func rotation(t *testing.T, s *sim, names ...string) (*Rotation, map[string]*rotNode, *rotEtcd) {
	ca, err := pki.NewCA("next", 0)
	require.NoError(t, err)
	nodeCA, err := ca.IssueNodeCA(pki.NodeScope{}, 0)
	require.NoError(t, err)
	key, err := nodeCA.KeyPEM()
	require.NoError(t, err)
	e := &rotEtcd{simEtcd: (*simEtcd)(s), recs: map[string]RotationRecord{}}
	r := &Rotation{NewCA: ca.CertPEM(), NodeCACert: nodeCA.CertPEM(), NodeCAKey: key, Etcd: e, Poll: 1e6, ReadyWait: 5e7, NodeTimeout: 5e9}
	nodes := map[string]*rotNode{}
	for _, n := range names {
		rn := &rotNode{simNode: s.nodes[n]}
		nodes[n] = rn
		r.Nodes = append(r.Nodes, Node{API: rn, EtcdEndpoint: "https://" + n + ":2379"})
	}
	return r, nodes, e
}

// TestRotationPhasesInOrder: each phase runs on every node before the
// next, followers first; the leader last, after leadership moved off it
// in the phases that restart etcd; a rotation run again asks nothing.
func TestRotationPhasesInOrder(t *testing.T) {
	s := newSim("3.7.3", "n1", "n2", "n3")
	s.leader = "n2"
	r, nodes, e := rotation(t, s, "n1", "n2", "n3")
	nodes["n3"].fails = 2
	require.NoError(t, r.Run(t.Context()))
	assert.Equal(t, []string{
		"n1 trust", "n3 trust", "leader n2 -> n1", "n2 trust",
		"n2 reissue", "n3 reissue", "n1 reissue",
		"n2 drop", "n3 drop", "leader n1 -> n2", "n1 drop",
	}, s.events, "the leader last; a 500 asked again")
	for name, n := range nodes {
		assert.Equal(t, nodeapi.RotationDrop, n.phase, name)
		assert.Equal(t, StateDone, e.recs[name].State, name)
	}
	require.NotNil(t, e.target)
	assert.False(t, e.target.Done.IsZero(), "the target says done")
	assert.False(t, s.locked, "the lock is released")

	s.events = nil
	require.NoError(t, r.Run(t.Context()))
	assert.Empty(t, s.events, "run again: every node is done")
}

// TestRotationStops: a refused phase stops the rotation with the node's
// reason and a failed record; an abort stops it before the next node.
func TestRotationStops(t *testing.T) {
	s := newSim("3.7.3", "n1", "n2", "n3")
	r, nodes, e := rotation(t, s, "n1", "n2", "n3")
	nodes["n3"].refuse = &nodeapi.Error{StatusCode: http.StatusConflict, Message: "rotation abc is at phase trust on this node; finish it before another"}
	err := r.Run(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "node n3: phase trust: 409")
	assert.Equal(t, StateFailed, e.recs["n3"].State)
	assert.Equal(t, []string{"n2 trust"}, s.events, "n2 went first (n1 leads), nothing after n3")

	s = newSim("3.7.3", "n1", "n2", "n3")
	r, _, e = rotation(t, s, "n1", "n2", "n3")
	e.abortAfter = "n2"
	err = r.Run(t.Context())
	require.True(t, errors.Is(err, ErrAborted), "%v", err)
	assert.Equal(t, []string{"n2 trust"}, s.events)
}

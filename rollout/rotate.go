package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
)

// CARotator is the part of a node's API a CA rotation uses besides
// NodeAPI; *nodeapi.Client has it.
type CARotator interface {
	RotateCA(ctx context.Context, req nodeapi.CARotationRequest) (nodeapi.CARotation, error)
	CARotation(ctx context.Context) (nodeapi.CARotation, error)
}

var _ CARotator = (*nodeapi.Client)(nil)

// Rotation rolls a new root CA over a cluster with no downtime (DESIGN
// §6), in three phases, each on every node before the next: trust (old
// and new roots together; etcd restarts), reissue (leaves from the new
// node CA; no restart), drop (the new root alone; etcd restarts). Each
// node's step waits for the cluster to be ready as an upgrade's does
// (Check), so a restart costs one member at a time; the leader goes last,
// after leadership moved, in the phases that restart etcd. Every node
// keeps its phase on DATA, so a node that reboots mid-rotation comes
// back in it, and a rotation run again skips what is done.
type Rotation struct {
	// NewCA is the new root's certificate; NodeCACert and NodeCAKey a
	// node CA under it (PEM).
	NewCA, NodeCACert, NodeCAKey []byte
	// Nodes' APIs must be CARotators too.
	Nodes []Node
	Etcd  interface {
		Etcd
		RotationRecords
	}
	By string
	// NodeTimeout bounds one node's phase (default 10 minutes);
	// ReadyWait how long the cluster may take to be ready before a step
	// (default 2 minutes, as an upgrade's); Poll the polling interval.
	NodeTimeout, ReadyWait, Poll time.Duration
	Log                          func(format string, args ...any)
	// AfterNode, when set, is called once a node's phase is in effect.
	AfterNode func(phase, node string)
}

// RotationID is the ID nodes give the rotation to the root certPEM: the
// first 16 hex digits of the SHA-256 of its DER.
func RotationID(certPEM []byte) (string, error) {
	c, err := pki.ParseCertPEM(certPEM)
	if err != nil {
		return "", fmt.Errorf("new CA: %w", err)
	}
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])[:16], nil
}

// Run rolls the rotation (see Rotation). It returns nil once the last
// phase is in effect on every node and the cluster is ready.
func (r *Rotation) Run(ctx context.Context) error {
	id, err := RotationID(r.NewCA)
	if err != nil {
		return err
	}
	newCA, _ := pki.ParseCertPEM(r.NewCA)
	roll := &Roll{Nodes: r.Nodes, Etcd: r.Etcd, NodeTimeout: r.NodeTimeout, ReadyWait: r.ReadyWait, Poll: r.Poll, Log: r.Log}
	roll.defaults()
	for _, n := range r.Nodes {
		if _, ok := n.API.(CARotator); !ok {
			return fmt.Errorf("node %s: its API cannot rotate a CA", n.Name)
		}
	}
	unlock, err := r.Etcd.Lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	start := time.Now()
	if err := r.Etcd.PutRotationTarget(ctx, RotationTarget{ID: id, New: newCA.Subject.CommonName, Started: start, By: r.By}); err != nil {
		return err
	}
	roll.logf("CA rotation %s (to %q) over %d nodes", id, newCA.Subject.CommonName, len(r.Nodes))
	c, err := roll.waitReady(ctx)
	if err != nil {
		return err
	}
	for i := range roll.Nodes {
		roll.Nodes[i].Name = c.Nodes[i].Name
	}
	for _, phase := range nodeapi.RotationPhases {
		phaseStart := time.Now()
		var done []string
		c, err := roll.waitReady(ctx)
		if err != nil {
			return fmt.Errorf("before phase %s: %w", phase, err)
		}
		var names []string
		for _, n := range c.Nodes {
			names = append(names, n.Name)
		}
		for _, name := range Order(names, c.LeaderName()) {
			if err := r.node(ctx, roll, id, phase, name, done); err != nil {
				r.record(ctx, RotationRecord{Name: name, ID: id, Phase: phase, State: StateFailed, Error: err.Error()})
				return fmt.Errorf("node %s: phase %s: %w", name, phase, err)
			}
			done = append(done, name)
			r.record(ctx, RotationRecord{Name: name, ID: id, Phase: phase, State: StateDone})
			if r.AfterNode != nil {
				r.AfterNode(phase, name)
			}
		}
		roll.logf("phase %s in effect on every node in %s", phase, time.Since(phaseStart).Round(time.Second))
	}
	if _, err := roll.waitReady(ctx); err != nil {
		return err
	}
	if err := r.Etcd.PutRotationTarget(ctx, RotationTarget{ID: id, New: newCA.Subject.CommonName, Started: start, By: r.By, Done: time.Now()}); err != nil {
		roll.logf("record the rotation done: %v", err)
	}
	roll.logf("CA rotation %s done in %s", id, time.Since(start).Round(time.Second))
	return nil
}

// node takes one node through phase: unless it is there already, with
// the cluster ready, leadership moved off it where etcd restarts, and
// the phase asked until the node answers or NodeTimeout.
func (r *Rotation) node(ctx context.Context, roll *Roll, id, phase, name string, done []string) error {
	if err := r.checkTarget(ctx, id); err != nil {
		return err
	}
	c, err := roll.waitReady(ctx)
	if err != nil {
		return err
	}
	api := roll.api(name).(CARotator)
	if st, err := api.CARotation(ctx); err == nil && st.ID == id && nodeapi.PhaseIndex(st.Phase) >= nodeapi.PhaseIndex(phase) {
		roll.logf("node %s: phase %s in effect already", name, phase)
		return nil
	}
	restarts := phase != nodeapi.RotationReissue
	if restarts && name == c.LeaderName() {
		if err := roll.handOver(ctx, c, name, done); err != nil {
			return err
		}
	}
	req := nodeapi.CARotationRequest{Phase: phase, NewCA: string(r.NewCA)}
	if phase == nodeapi.RotationReissue {
		req.NodeCACert, req.NodeCAKey = string(r.NodeCACert), string(r.NodeCAKey)
	}
	begin := time.Now()
	nctx, cancel := context.WithTimeout(ctx, roll.NodeTimeout)
	defer cancel()
	for {
		_, err := api.RotateCA(nctx, req)
		if err == nil {
			roll.logf("node %s: phase %s in effect in %s", name, phase, time.Since(begin).Round(time.Millisecond))
			return nil
		}
		var ae *nodeapi.Error
		if errors.As(err, &ae) && ae.StatusCode >= 400 && ae.StatusCode < 500 {
			return err // refused: asking again changes nothing
		}
		roll.logf("node %s: phase %s: %v; asking again", name, phase, err)
		if serr := roll.sleep(nctx); serr != nil {
			return fmt.Errorf("not in effect within %s: %w", roll.NodeTimeout, err)
		}
	}
}

// checkTarget stops the rotation when its target was deleted (--abort)
// or replaced.
func (r *Rotation) checkTarget(ctx context.Context, id string) error {
	t, ok, err := r.Etcd.RotationTarget(ctx)
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("%w: %s deleted", ErrAborted, KeyRotationTarget)
	case t.ID != id:
		return fmt.Errorf("%w: %s is rotation %s now", ErrAborted, KeyRotationTarget, t.ID)
	}
	return nil
}

// record keeps a node's record; one that cannot be written costs the
// --status view only.
func (r *Rotation) record(ctx context.Context, rec RotationRecord) {
	rec.Updated = time.Now()
	if err := r.Etcd.PutRotationRecord(context.WithoutCancel(ctx), rec); err != nil && r.Log != nil {
		r.Log("node %s: record: %v", rec.Name, err)
	}
}

// RotationStatus is a rotation's view for --status.
type RotationStatus struct {
	Target  RotationTarget
	Running bool // a target without Done
	Nodes   []RotationRecord
}

// ReadRotationStatus reads the rotation's records.
func ReadRotationStatus(ctx context.Context, e RotationRecords) (RotationStatus, error) {
	var st RotationStatus
	t, ok, err := e.RotationTarget(ctx)
	if err != nil {
		return st, err
	}
	if ok {
		st.Target, st.Running = t, t.Done.IsZero()
	}
	recs, err := e.RotationRecords(ctx)
	if err != nil {
		return st, err
	}
	st.Nodes = slices.DeleteFunc(recs, func(r RotationRecord) bool { return ok && r.ID != t.ID })
	return st, nil
}

package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Keys of a CA rotation's records in etcd. It takes the roll's lock
// (KeyLock): a rotation and an upgrade never run at once.
const (
	RotationPrefix     = "/etcdbox/rotate-ca/"
	KeyRotationTarget  = RotationPrefix + "target"
	RotationNodePrefix = RotationPrefix + "nodes/"
)

// RotationTarget is the rotation's goal, /etcdbox/rotate-ca/target.
type RotationTarget struct {
	// ID is the new root's fingerprint (nodeapi.CARotation.ID), New its
	// common name.
	ID      string    `json:"id"`
	New     string    `json:"new"`
	Started time.Time `json:"started"`
	By      string    `json:"by"`
	// Done is when the last phase was in effect on every node.
	Done time.Time `json:"done,omitzero"`
}

// RotationRecord is one node's part of a rotation,
// /etcdbox/rotate-ca/nodes/<name>: the last phase asked of it and how
// that went.
type RotationRecord struct {
	Name    string    `json:"name"`
	ID      string    `json:"id"`
	Phase   string    `json:"phase"`
	State   string    `json:"state"` // StateDone or StateFailed
	Error   string    `json:"error,omitempty"`
	Updated time.Time `json:"updated"`
}

// RotationRecords is what a rotation keeps in etcd; *EtcdClient has it.
type RotationRecords interface {
	PutRotationTarget(ctx context.Context, t RotationTarget) error
	RotationTarget(ctx context.Context) (RotationTarget, bool, error)
	DeleteRotationTarget(ctx context.Context) error
	PutRotationRecord(ctx context.Context, r RotationRecord) error
	RotationRecords(ctx context.Context) ([]RotationRecord, error)
}

var _ RotationRecords = (*EtcdClient)(nil)

// PutRotationTarget implements RotationRecords.
func (e *EtcdClient) PutRotationTarget(ctx context.Context, t RotationTarget) error {
	return e.put(ctx, KeyRotationTarget, t)
}

// RotationTarget implements RotationRecords.
func (e *EtcdClient) RotationTarget(ctx context.Context) (RotationTarget, bool, error) {
	var t RotationTarget
	kvs, err := e.get(ctx, KeyRotationTarget)
	if err != nil || len(kvs) == 0 {
		return t, false, err
	}
	if err := json.Unmarshal(kvs[0], &t); err != nil {
		return t, false, fmt.Errorf("%s: %w", KeyRotationTarget, err)
	}
	return t, true, nil
}

// DeleteRotationTarget implements RotationRecords.
func (e *EtcdClient) DeleteRotationTarget(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := e.c.Delete(ctx, KeyRotationTarget); err != nil {
		return fmt.Errorf("delete %s: %w", KeyRotationTarget, err)
	}
	return nil
}

// PutRotationRecord implements RotationRecords.
func (e *EtcdClient) PutRotationRecord(ctx context.Context, r RotationRecord) error {
	return e.put(ctx, RotationNodePrefix+r.Name, r)
}

// RotationRecords implements RotationRecords, in name order.
func (e *EtcdClient) RotationRecords(ctx context.Context) ([]RotationRecord, error) {
	kvs, err := e.get(ctx, RotationNodePrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	var out []RotationRecord
	for _, v := range kvs {
		var r RotationRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", RotationNodePrefix, err)
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// get reads key's values.
func (e *EtcdClient) get(ctx context.Context, key string, opts ...clientv3.OpOption) ([][]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	r, err := e.c.Get(ctx, key, opts...)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	var out [][]byte
	for _, kv := range r.Kvs {
		out = append(out, kv.Value)
	}
	return out, nil
}

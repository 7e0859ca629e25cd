package rollout

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdbox/etcdbox/internal/etcdhttp"
	"github.com/etcdbox/etcdbox/internal/etcdlock"
)

// Keys of the roll's records in etcd.
const (
	KeyPrefix  = "/etcdbox/upgrade/"
	KeyTarget  = KeyPrefix + "target"
	KeyLock    = KeyPrefix + "lock"
	NodePrefix = KeyPrefix + "nodes/"
)

// ErrLocked means another roll holds the lock.
var ErrLocked = errors.New("another roll is running")

// Target is the roll's goal, /etcdbox/upgrade/target.
type Target struct {
	Image   string    `json:"image"`
	Started time.Time `json:"started"`
	By      string    `json:"by"`
	// Etcd is the image's etcd version, when known.
	Etcd string `json:"etcd,omitempty"`
}

// Node record states.
const (
	StateSnapshot   = "snapshot"
	StateStaging    = "staging"
	StateRebooting  = "rebooting"
	StateDone       = "done"
	StateRolledBack = "rolled-back"
	StateFailed     = "failed"
)

// NodeRecord is one node's part of a roll, /etcdbox/upgrade/nodes/<name>.
type NodeRecord struct {
	Name     string    `json:"name"`
	Image    string    `json:"image"`
	State    string    `json:"state"`
	From     string    `json:"from,omitempty"` // slot left
	To       string    `json:"to,omitempty"`   // slot staged
	Snapshot string    `json:"snapshot,omitempty"`
	Error    string    `json:"error,omitempty"`
	Started  time.Time `json:"started"`
	Updated  time.Time `json:"updated"`
}

// Etcd is what the roll needs from etcd: the cluster's members, its
// leadership and downgrade controls, a lock and the roll's records.
// *EtcdClient is the real one.
type Etcd interface {
	// Observe reports the members, the leader, the alarms and the cluster
	// version; endpoints are the nodes' etcd client URLs as this host
	// reaches them.
	Observe(ctx context.Context, endpoints []string) (members []MemberState, leader uint64, alarms []string, clusterVersion string, err error)
	// MoveLeader hands leadership from the leader, reached at
	// leaderEndpoint, to the member to.
	MoveLeader(ctx context.Context, leaderEndpoint string, to uint64) error
	// Downgrade validates and enables etcd's downgrade to minor.
	Downgrade(ctx context.Context, minor string) error
	// Lock takes the roll lock or fails with ErrLocked.
	Lock(ctx context.Context) (unlock func(), err error)
	PutTarget(ctx context.Context, t Target) error
	// Target returns the recorded target; ok is false when there is none.
	Target(ctx context.Context) (t Target, ok bool, err error)
	DeleteTarget(ctx context.Context) error
	PutRecord(ctx context.Context, r NodeRecord) error
	Records(ctx context.Context) ([]NodeRecord, error)
}

// EtcdClient is Etcd over a clientv3 client with the admin certificate.
type EtcdClient struct {
	c  *clientv3.Client
	tc *tls.Config
}

var _ Etcd = (*EtcdClient)(nil)

// NewEtcd returns the roll's etcd over c, whose TLS configuration tc also
// serves to reach single endpoints (leadership, /version).
func NewEtcd(c *clientv3.Client, tc *tls.Config) *EtcdClient { return &EtcdClient{c: c, tc: tc} }

// Dial connects to endpoints with tc.
//
// The connection to each member is pinged every 10 s (as often as etcd's
// default --grpc-keepalive-min-time of 5 s allows, with a margin) and given
// 2 s to answer, which gRPC also sets as the socket's TCP_USER_TIMEOUT. A
// member that is killed or powered off as a roll runs sends no reset, and
// a request the client sends it would otherwise wait out its whole
// deadline: a chaos run's roll stopped at its first write, the target
// record, 15 s after the leader it was sent to was killed. Now such a
// request fails within about 2 s as Unavailable, which the roll's writes
// ask again (retryUnavailable) over another member.
func Dial(endpoints []string, tc *tls.Config) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		TLS:                  tc,
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		Logger:               zap.NewNop(),
	})
}

// Observe implements Etcd.
func (e *EtcdClient) Observe(ctx context.Context, endpoints []string) ([]MemberState, uint64, []string, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ml, err := e.c.MemberList(ctx)
	if err != nil {
		return nil, 0, nil, "", fmt.Errorf("member list: %w", err)
	}
	members := make([]MemberState, len(ml.Members))
	for i, m := range ml.Members {
		members[i] = MemberState{ID: m.ID, Name: m.Name, Learner: m.IsLearner, Problem: "no endpoint of this roll answers for it"}
	}
	type answer struct {
		id, leader uint64
		version    string
		storage    string
		errs       []string
		err        error
	}
	answers := make([]answer, len(endpoints))
	var wg sync.WaitGroup
	for i, ep := range endpoints {
		wg.Go(func() {
			st, err := e.c.Status(ctx, ep)
			if err != nil {
				answers[i].err = err
				return
			}
			answers[i] = answer{id: st.Header.MemberId, leader: st.Leader, version: st.Version, storage: st.StorageVersion, errs: st.Errors}
		})
	}
	wg.Wait()
	var leader uint64
	for _, a := range answers {
		if a.err != nil {
			continue
		}
		if a.leader != 0 {
			leader = a.leader
		}
		for i := range members {
			if members[i].ID != a.id {
				continue
			}
			members[i].Version, members[i].StorageVersion = a.version, a.storage
			if len(a.errs) > 0 {
				members[i].Problem = strings.Join(a.errs, ", ")
			} else {
				members[i].Healthy, members[i].Problem = true, ""
			}
		}
	}
	ar, err := e.c.AlarmList(ctx)
	if err != nil {
		return nil, 0, nil, "", fmt.Errorf("alarm list: %w", err)
	}
	var alarms []string
	for _, a := range ar.Alarms {
		alarms = append(alarms, fmt.Sprintf("%s on %x", a.Alarm, a.MemberID))
	}
	cv := ""
	for _, ep := range endpoints {
		if cv, err = e.clusterVersion(ctx, ep); err == nil {
			break
		}
	}
	return members, leader, alarms, cv, nil
}

// clusterVersion reads etcdcluster from the endpoint's /version, which a
// member serves on its client URL only when its etcd serves HTTP there
// (an image from before etcd.httpPort, or a seed that shares the port);
// Roll.Observe falls back on the nodes' own reports.
func (e *EtcdClient) clusterVersion(ctx context.Context, endpoint string) (string, error) {
	return etcdhttp.ClusterVersion(ctx, e.tc, endpoint)
}

// MoveLeader implements Etcd: etcd takes the request only at the leader.
func (e *EtcdClient) MoveLeader(ctx context.Context, leaderEndpoint string, to uint64) error {
	c, err := Dial([]string{leaderEndpoint}, e.tc)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := c.MoveLeader(ctx, to); err != nil {
		return fmt.Errorf("move leader to %x: %w", to, err)
	}
	return nil
}

// Downgrade implements Etcd.
func (e *EtcdClient) Downgrade(ctx context.Context, minor string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := e.c.Downgrade(ctx, clientv3.DowngradeValidate, minor); err != nil {
		return fmt.Errorf("downgrade validate %s: %w", minor, err)
	}
	if _, err := e.c.Downgrade(ctx, clientv3.DowngradeEnable, minor); err != nil {
		return fmt.Errorf("downgrade enable %s: %w", minor, err)
	}
	return nil
}

// lockTTL is the lease of the roll lock: it outlives a leader change and
// a member's reboot, and frees the lock a minute after a roll dies.
const lockTTL = 60 * time.Second

// Lock implements Etcd. The lock holds no stream open on any member
// (etcdlock): a member the roll reboots would wait for it, up to etcd's
// request timeout, before it stops.
func (e *EtcdClient) Lock(ctx context.Context) (func(), error) {
	l, err := etcdlock.TryLock(ctx, e.c, KeyLock, lockTTL, nil)
	if errors.Is(err, etcdlock.ErrLocked) {
		return nil, fmt.Errorf("%w: %s is held", ErrLocked, KeyLock)
	}
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", KeyLock, err)
	}
	return l.Unlock, nil
}

func (e *EtcdClient) put(ctx context.Context, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	// The same value again is the same record: asked again when the
	// connection breaks under it (a member killed as the roll starts).
	err = retryUnavailable(ctx, func() error {
		_, err := e.c.Put(ctx, key, string(b))
		return err
	})
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// PutTarget implements Etcd.
func (e *EtcdClient) PutTarget(ctx context.Context, t Target) error { return e.put(ctx, KeyTarget, t) }

// Target implements Etcd.
func (e *EtcdClient) Target(ctx context.Context) (Target, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	r, err := e.c.Get(ctx, KeyTarget)
	if err != nil {
		return Target{}, false, fmt.Errorf("get %s: %w", KeyTarget, err)
	}
	if len(r.Kvs) == 0 {
		return Target{}, false, nil
	}
	var t Target
	if err := json.Unmarshal(r.Kvs[0].Value, &t); err != nil {
		return Target{}, false, fmt.Errorf("%s: %w", KeyTarget, err)
	}
	return t, true, nil
}

// DeleteTarget implements Etcd.
func (e *EtcdClient) DeleteTarget(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := e.c.Delete(ctx, KeyTarget); err != nil {
		return fmt.Errorf("delete %s: %w", KeyTarget, err)
	}
	return nil
}

// PutRecord implements Etcd.
func (e *EtcdClient) PutRecord(ctx context.Context, r NodeRecord) error {
	return e.put(ctx, NodePrefix+r.Name, r)
}

// Records implements Etcd.
func (e *EtcdClient) Records(ctx context.Context) ([]NodeRecord, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	r, err := e.c.Get(ctx, NodePrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", NodePrefix, err)
	}
	var out []NodeRecord
	for _, kv := range r.Kvs {
		var rec NodeRecord
		if err := json.Unmarshal(kv.Value, &rec); err != nil {
			return nil, fmt.Errorf("%s: %w", kv.Key, err)
		}
		out = append(out, rec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Maintenance keeps a cluster writable (DESIGN §5): it lists and disarms
// alarms, defragments the members one at a time, and recovers from the
// NOSPACE alarm. None of it runs by itself: an operator asks
// (etcdbox alarm, defrag, maintain). A CORRUPT alarm is never disarmed
// here unless the operator names it.
type Maintenance struct {
	Client *clientv3.Client
	// Endpoints are the members' client URLs as this host reaches them
	// (a local cluster's loopback forwards, say); the members' own
	// advertised URLs are tried too.
	Endpoints []string
	// Logf receives progress lines; nil discards them.
	Logf func(format string, args ...any)
	// Settle bounds the wait for a defragmented member to serve again,
	// and for the others to be healthy before the next; default 2m.
	Settle time.Duration
	// Headroom is the share of the quota a member's database may use after
	// maintain for the NOSPACE alarm to be disarmed; default 0.8.
	Headroom float64
}

// Alarm is one raised alarm.
type Alarm struct {
	Member string // the member's name, or its hex ID
	ID     uint64
	Type   string // NOSPACE, CORRUPT
}

func (a Alarm) String() string { return a.Type + " on " + a.Member }

// Alarms lists the raised alarms.
func (m *Maintenance) Alarms(ctx context.Context) ([]Alarm, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ar, err := m.Client.AlarmList(ctx)
	if err != nil {
		return nil, fmt.Errorf("alarm list: %w", err)
	}
	names := map[uint64]string{}
	if ml, err := m.Client.MemberList(ctx); err == nil {
		for _, mm := range ml.Members {
			names[mm.ID] = mm.Name
		}
	}
	var out []Alarm
	for _, a := range ar.Alarms {
		name := names[a.MemberID]
		if name == "" {
			name = strconv.FormatUint(a.MemberID, 16)
		}
		out = append(out, Alarm{Member: name, ID: a.MemberID, Type: a.Alarm.String()})
	}
	return out, nil
}

// ErrCorrupt refuses to disarm a CORRUPT alarm that the caller did not
// name: a member's data differs from the others', and only an operator
// who found out why may clear it.
var ErrCorrupt = errors.New("a CORRUPT alarm is raised: find out which member's data differs (etcdbox status, the members' logs) and replace that member; disarm it only by naming it")

// Disarm clears every raised alarm of type typ (NOSPACE or CORRUPT) and
// returns those it cleared.
func (m *Maintenance) Disarm(ctx context.Context, typ string) ([]Alarm, error) {
	t, ok := pb.AlarmType_value[strings.ToUpper(typ)]
	if !ok || t == int32(pb.AlarmType_NONE) {
		return nil, fmt.Errorf("alarm type %q: want NOSPACE or CORRUPT", typ)
	}
	alarms, err := m.Alarms(ctx)
	if err != nil {
		return nil, err
	}
	var done []Alarm
	for _, a := range alarms {
		if a.Type != pb.AlarmType(t).String() {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := m.Client.AlarmDisarm(dctx, &clientv3.AlarmMember{MemberID: a.ID, Alarm: pb.AlarmType(t)})
		cancel()
		if err != nil {
			return done, fmt.Errorf("disarm %s: %w", a, err)
		}
		m.logf("disarmed %s", a)
		done = append(done, a)
	}
	return done, nil
}

// memberStatus is one member's answer, found through the endpoints.
type memberStatus struct {
	name     string
	endpoint string
	status   *clientv3.StatusResponse
}

// members finds every member's endpoint and status; a member that does
// not answer is an error: maintenance needs the whole cluster.
func (m *Maintenance) members(ctx context.Context) ([]memberStatus, uint64, error) {
	ms, err := ObserveMembers(ctx, m.Client, m.Endpoints)
	if err != nil {
		return nil, 0, err
	}
	var out []memberStatus
	var leader uint64
	for _, mm := range ms.Members {
		ep, ok := ms.Endpoints[mm.ID]
		if !ok {
			// A raised alarm makes every Status carry an error, which
			// ObserveMembers counts against health; look again here.
			ep, ok = m.answering(ctx, mm)
		}
		if !ok {
			return nil, 0, fmt.Errorf("member %s does not answer (%s): maintenance needs every member", memberLabel(mm), mm.Problem)
		}
		sctx, cancel := context.WithTimeout(ctx, probeTimeout)
		st, err := m.Client.Status(sctx, ep)
		cancel()
		if err != nil {
			return nil, 0, fmt.Errorf("member %s at %s: %w", memberLabel(mm), ep, err)
		}
		if st.Leader != 0 {
			leader = st.Leader
		}
		out = append(out, memberStatus{name: memberLabel(mm), endpoint: ep, status: st})
	}
	if leader == 0 {
		return nil, 0, errors.New("the cluster has no leader")
	}
	return out, leader, nil
}

// answering returns the endpoint at which mm answers Status as itself,
// whatever errors (alarms) the answer carries.
func (m *Maintenance) answering(ctx context.Context, mm MemberState) (string, bool) {
	for _, ep := range append(slices.Clone(m.Endpoints), mm.ClientURLs...) {
		sctx, cancel := context.WithTimeout(ctx, probeTimeout)
		st, err := m.Client.Status(sctx, ep)
		cancel()
		if err == nil && st.Header.MemberId == mm.ID {
			return ep, true
		}
	}
	return "", false
}

// Defrag defragments every member, one at a time, the leader last, each
// only once every member answers with a leader in place: a member is
// blocked while it defragments, and the others must keep the quorum.
func (m *Maintenance) Defrag(ctx context.Context) error {
	ms, leader, err := m.members(ctx)
	if err != nil {
		return err
	}
	slices.SortStableFunc(ms, func(a, b memberStatus) int {
		return boolInt(a.status.Header.MemberId == leader) - boolInt(b.status.Header.MemberId == leader)
	})
	for _, mm := range ms {
		if err := m.waitHealthy(ctx); err != nil {
			return fmt.Errorf("before defragmenting %s: %w", mm.name, err)
		}
		start := time.Now()
		dctx, cancel := context.WithTimeout(ctx, m.settle())
		_, err := m.Client.Defragment(dctx, mm.endpoint)
		cancel()
		if err != nil {
			return fmt.Errorf("defragment %s: %w", mm.name, err)
		}
		sctx, cancel := context.WithTimeout(ctx, probeTimeout)
		st, err := m.Client.Status(sctx, mm.endpoint)
		cancel()
		after := "?"
		if err == nil {
			after = size(st.DbSize)
		}
		m.logf("defragmented %s in %s: database %s, now %s", mm.name, time.Since(start).Round(time.Millisecond), size(mm.status.DbSize), after)
	}
	return m.waitHealthy(ctx)
}

// waitHealthy waits until every member answers and one leads.
func (m *Maintenance) waitHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.settle())
	defer cancel()
	for {
		_, _, err := m.members(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the cluster is not whole: %w", err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Maintain brings a cluster that raised NOSPACE back to accepting writes:
// it compacts the history up to the current revision, defragments every
// member (Defrag), and disarms NOSPACE only when every member's database
// fits in the headroom of its quota. No key is deleted: when the data
// itself fills the quota, it says so and leaves the alarm raised. A
// CORRUPT alarm stops it before anything is done.
func (m *Maintenance) Maintain(ctx context.Context) error {
	alarms, err := m.Alarms(ctx)
	if err != nil {
		return err
	}
	for _, a := range alarms {
		if a.Type == pb.AlarmType_CORRUPT.String() {
			return fmt.Errorf("%s: %w", a, ErrCorrupt)
		}
	}
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	resp, err := m.Client.Get(gctx, "/etcdbox/maintain", clientv3.WithCountOnly())
	cancel()
	if err != nil {
		return fmt.Errorf("read the revision: %w", err)
	}
	rev := resp.Header.Revision
	cctx, cancel := context.WithTimeout(ctx, m.settle())
	_, err = m.Client.Compact(cctx, rev, clientv3.WithCompactPhysical())
	cancel()
	switch {
	case err == nil:
		m.logf("compacted the history up to revision %d", rev)
	case strings.Contains(err.Error(), "required revision has been compacted"):
		m.logf("the history is compacted up to revision %d already", rev)
	default:
		return fmt.Errorf("compact at revision %d: %w", rev, err)
	}
	if err := m.Defrag(ctx); err != nil {
		return err
	}
	ms, _, err := m.members(ctx)
	if err != nil {
		return err
	}
	for _, mm := range ms {
		q := mm.status.DbSizeQuota
		if q > 0 && float64(mm.status.DbSize) > m.headroom()*float64(q) {
			return fmt.Errorf("%s: its database is %s of a %s quota after compaction and defragmentation: the live data fills it; raise the seed's etcd.quotaBackendBytes or delete keys, then run maintain again (NOSPACE stays raised)",
				mm.name, size(mm.status.DbSize), size(q))
		}
	}
	done, err := m.Disarm(ctx, pb.AlarmType_NOSPACE.String())
	if err != nil {
		return err
	}
	if len(done) == 0 {
		m.logf("no NOSPACE alarm was raised")
	}
	return nil
}

func (m *Maintenance) logf(format string, args ...any) {
	if m.Logf != nil {
		m.Logf(format, args...)
	}
}

func (m *Maintenance) settle() time.Duration {
	if m.Settle > 0 {
		return m.Settle
	}
	return 2 * time.Minute
}

func (m *Maintenance) headroom() float64 {
	if m.Headroom > 0 {
		return m.Headroom
	}
	return 0.8
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// size prints a byte count in MiB, or KiB below one MiB.
func size(b int64) string {
	if b < 1<<20 {
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

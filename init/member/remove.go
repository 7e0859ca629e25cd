package member

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrUnsafeRemoval: Join found a stale member with this node's name or
// peer URL that it may not remove (MayRemove says which rule stopped it).
var ErrUnsafeRemoval = errors.New("stale member may not be removed")

// LeaderView tells which members the leader reaches: the IDs of the peers
// it has an active raft stream with. Join asks it about the stale members
// with this node's name, since this node's own view proves nothing behind
// a partition. MetricsLeaderView is the real one.
type LeaderView func(ctx context.Context, leader Member) (active map[uint64]bool, err error)

// RemovalFacts is what MayRemove decides on, gathered by Join.
type RemovalFacts struct {
	// Members is the linearizable member list; Healthy says whether a
	// member answered this node's Status probe.
	Members []Member
	// Leader is the leader's member ID, 0 when no member said.
	Leader uint64
	// LeaderActive are the members the leader has an active stream with
	// (LeaderView); nil when there is no leader-side view.
	LeaderActive map[uint64]bool
	// Removing are the IDs Join already decided to remove in this round:
	// they do not count among the remaining voters.
	Removing map[uint64]bool
}

// leaderReaches reports whether the leader's view has m: the leader
// itself, or a peer it has an active stream with.
func (f RemovalFacts) leaderReaches(m Member) bool {
	return f.Leader != 0 && m.ID == f.Leader || f.LeaderActive[m.ID]
}

// MayRemove decides whether Join may remove stale, a member with this
// node's name or peer URL (or an orphan learner). It is pure: reason says
// which rule allowed or stopped it, for the log and the error. The rules:
//   - a member that answers, from this node's side or per the leader, is
//     never removed (ErrNameInUse): another node may run with this
//     identity, or this node is only cut off from it;
//   - otherwise it is removed only when it never started, or the leader
//     reports it unreachable (a leader-side view is required for a member
//     that started: this node not reaching it proves nothing);
//   - and only when the voters that remain without it (and without the
//     other members removed in this round) still form a healthy quorum:
//     healthy per the leader when there is a leader-side view, else per
//     this node's probes (ErrUnsafeRemoval).
func MayRemove(f RemovalFacts, stale Member) (ok bool, reason string, err error) {
	switch {
	case stale.Healthy:
		return false, fmt.Sprintf("%s answers at %s", stale, strings.Join(stale.ClientURLs, ",")), ErrNameInUse
	case f.Leader != 0 && stale.ID == f.Leader:
		return false, fmt.Sprintf("%s is the leader", stale), ErrNameInUse
	case f.LeaderActive[stale.ID]:
		return false, fmt.Sprintf("the leader %x reaches %s", f.Leader, stale), ErrNameInUse
	}
	var why string
	switch {
	case !stale.Started:
		why = "it never started"
	case f.LeaderActive == nil:
		return false, fmt.Sprintf("%s started and does not answer this node, but there is no leader-side view to tell whether it is down", stale), ErrUnsafeRemoval
	default:
		why = fmt.Sprintf("the leader %x reports it unreachable", f.Leader)
	}
	if stale.IsLearner {
		// A learner is not part of any quorum; etcd still needs one to
		// commit the removal, which the call itself finds out.
		return true, why, nil
	}
	var remaining, healthy int
	for _, m := range f.Members {
		if m.IsLearner || m.ID == stale.ID || f.Removing[m.ID] {
			continue
		}
		remaining++
		if f.LeaderActive != nil && f.leaderReaches(m) || f.LeaderActive == nil && m.Healthy {
			healthy++
		}
	}
	quorum := remaining/2 + 1
	view := "per the leader"
	if f.LeaderActive == nil {
		view = "answering this node"
	}
	if healthy < quorum {
		return false, fmt.Sprintf("%s: %s, but the remaining voters would lose quorum: %d of %d healthy (%s), quorum %d",
			stale, why, healthy, remaining, view, quorum), ErrUnsafeRemoval
	}
	return true, fmt.Sprintf("%s; %d of %d remaining voters healthy (%s), quorum %d", why, healthy, remaining, view, quorum), nil
}

// gatherRemoval fills the leader fields of RemovalFacts: the leader's ID
// from the first endpoint of cli that answers a Status request, and its
// view when view is set. A failure of either leaves the field empty, so
// MayRemove refuses what needs it; the line for the log says why.
func gatherRemoval(ctx context.Context, cli *clientv3.Client, ms []Member, view LeaderView, logf Logf) RemovalFacts {
	f := RemovalFacts{Members: ms, Removing: map[uint64]bool{}}
	for _, ep := range cli.Endpoints() {
		sctx, cancel := context.WithTimeout(ctx, healthTimeout)
		st, err := cli.Status(sctx, ep)
		cancel()
		if err == nil && st.Leader != 0 {
			f.Leader = st.Leader
			break
		}
	}
	if f.Leader == 0 {
		logf("membership: no member names a leader; only unstarted stale members may be removed")
		return f
	}
	if view == nil {
		return f
	}
	for _, m := range ms {
		if m.ID != f.Leader {
			continue
		}
		active, err := view(ctx, m)
		if err != nil {
			logf("membership: leader %s: which peers it reaches: %v", m, err)
			return f
		}
		f.LeaderActive = active
		if f.LeaderActive == nil {
			f.LeaderActive = map[uint64]bool{}
		}
	}
	return f
}

// activePeersMetric is etcd's gauge of the peers a member has an active
// raft stream with (rafthttp's peer status), labelled by the local and
// the remote member's ID in hex: 1 while connected, 0 once etcd logged
// "peer became inactive"; absent for a peer it never reached.
const activePeersMetric = "etcd_network_active_peers"

// MetricsLeaderView is a LeaderView that reads etcd_network_active_peers
// from the leader's /metrics, with tlsConfig (the node's client
// certificate: etcd serves /metrics behind the same mutual TLS as its
// API). httpPort gives a member's etcd HTTP port by its name
// (seed.Seed.HTTPPortOf); nil, or a member of an image from before its
// HTTP port, is read on its client URLs, where etcd serves both by default.
func MetricsLeaderView(tlsConfig *tls.Config, httpPort func(name string) int) LeaderView {
	return func(ctx context.Context, leader Member) (map[uint64]bool, error) {
		tr := &http.Transport{TLSClientConfig: tlsConfig.Clone()}
		defer tr.CloseIdleConnections()
		hc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
		var errs []error
		for _, u := range HTTPURLs(leader, httpPort) {
			active, err := fetchActivePeers(ctx, hc, u+"/metrics", leader.ID)
			if err == nil {
				return active, nil
			}
			errs = append(errs, err)
		}
		if len(errs) == 0 {
			return nil, fmt.Errorf("leader %s has no client URL", leader)
		}
		return nil, errors.Join(errs...)
	}
}

// HTTPURLs returns the URLs to try for m's etcd HTTP endpoints: each
// client URL with its port replaced by httpPort(m.Name), then the client
// URLs themselves (a member whose etcd serves both on one port).
func HTTPURLs(m Member, httpPort func(name string) int) []string {
	var first, then []string
	for _, c := range m.ClientURLs {
		c = strings.TrimRight(c, "/")
		if u, err := url.Parse(c); err == nil && httpPort != nil && u.Hostname() != "" {
			if p := httpPort(m.Name); p > 0 {
				h := u.Scheme + "://" + net.JoinHostPort(u.Hostname(), strconv.Itoa(p))
				if h != c && !slices.Contains(first, h) {
					first = append(first, h)
				}
			}
		}
		then = append(then, c)
	}
	return append(first, then...)
}

func fetchActivePeers(ctx context.Context, hc *http.Client, url string, leader uint64) (map[uint64]bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("metrics %s: %w", url, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics %s: %s", url, resp.Status)
	}
	active, err := parseActivePeers(resp.Body, leader)
	if err != nil {
		return nil, fmt.Errorf("metrics %s: %w", url, err)
	}
	return active, nil
}

// The gauges that say whose /metrics these are: etcd_server_id is 1 for
// the label of the member's own ID, etcd_server_is_leader 1 on the leader.
const (
	serverIDMetric = "etcd_server_id"
	isLeaderMetric = "etcd_server_is_leader"
)

// parseActivePeers reads Prometheus text exposition and returns the peers
// that member leader has an active stream with. It fails unless the
// metrics say they are leader's and that it is the leader: an empty view
// from some other member, or from a leader that lost its office, would
// read as "every peer unreachable".
func parseActivePeers(r io.Reader, leader uint64) (map[uint64]bool, error) {
	active := map[uint64]bool{}
	var self uint64
	isLeader := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		name, labels, value, ok := parseSample(sc.Text())
		if !ok {
			continue
		}
		switch name {
		case serverIDMetric:
			if id, err := strconv.ParseUint(labels["server_id"], 16, 64); err == nil && value == 1 {
				self = id
			}
		case isLeaderMetric:
			isLeader = value == 1
		case activePeersMetric:
			l, err1 := strconv.ParseUint(labels["Local"], 16, 64)
			id, err2 := strconv.ParseUint(labels["Remote"], 16, 64)
			if err1 == nil && err2 == nil && l == leader && value > 0 {
				active[id] = true
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	switch {
	case self != leader:
		return nil, fmt.Errorf("metrics of member %x (%s), not of the leader %x", self, serverIDMetric, leader)
	case !isLeader:
		return nil, fmt.Errorf("member %x is no longer the leader (%s)", leader, isLeaderMetric)
	}
	return active, nil
}

// parseSample splits one sample line, `name{k="v",...} value`, without
// escapes in label values (etcd's labels are IDs and names).
func parseSample(line string) (name string, labels map[string]string, value float64, ok bool) {
	if line == "" || line[0] == '#' {
		return "", nil, 0, false
	}
	head, val, found := strings.Cut(line, " ")
	if i := strings.IndexByte(line, '}'); i >= 0 {
		head, val, found = line[:i+1], strings.TrimSpace(line[i+1:]), true
	}
	if !found {
		return "", nil, 0, false
	}
	if f := strings.Fields(val); len(f) > 0 {
		val = f[0] // a timestamp may follow
	}
	v, err := strconv.ParseFloat(val, 64)
	if err != nil {
		return "", nil, 0, false
	}
	name, rest, hasLabels := strings.Cut(head, "{")
	labels = map[string]string{}
	if hasLabels {
		for kv := range strings.SplitSeq(strings.TrimSuffix(rest, "}"), ",") {
			k, v, _ := strings.Cut(kv, "=")
			labels[strings.TrimSpace(k)] = strings.Trim(v, `"`)
		}
	}
	return name, labels, v, true
}

package member

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Member is one entry of etcd's member list.
type Member struct {
	ID uint64
	// Name is "" for a member added with MemberAdd that has not started;
	// initial members carry their name from --initial-cluster already.
	Name                 string
	PeerURLs, ClientURLs []string
	IsLearner            bool
	// Started: the member has run and published its client URLs.
	Started bool
	// Healthy: the member is started and its client URL answered a
	// Status request (Observe and Join check the members that matter).
	Healthy bool
}

// String names m for logs: "n2 (8e9e05c52164694d, learner, unstarted)".
func (m Member) String() string {
	name := m.Name
	if name == "" {
		name = strings.Join(m.PeerURLs, ",")
	}
	attrs := []string{fmt.Sprintf("%x", m.ID)}
	if m.IsLearner {
		attrs = append(attrs, "learner")
	}
	if !m.Started {
		attrs = append(attrs, "unstarted")
	}
	return name + " (" + strings.Join(attrs, ", ") + ")"
}

// Is reports whether m has name or peerURL: it stands for that node.
func (m Member) Is(name, peerURL string) bool {
	return (name != "" && m.Name == name) || (peerURL != "" && slices.Contains(m.PeerURLs, peerURL))
}

func fromPB(p *pb.Member) Member {
	return Member{
		ID:         p.ID,
		Name:       p.Name,
		PeerURLs:   slices.Clone(p.PeerURLs),
		ClientURLs: slices.Clone(p.ClientURLs),
		IsLearner:  p.IsLearner,
		Started:    len(p.ClientURLs) > 0,
	}
}

// Observation is what a node sees of the cluster through a peer.
type Observation struct {
	// ClusterID is etcd's cluster ID as the answering member knows it.
	ClusterID uint64
	Members   []Member
	// Cluster is the name the cluster claims (Claim), "" when it has none.
	Cluster string
}

// healthTimeout bounds one Status probe of a member.
const healthTimeout = 2 * time.Second

// Observe asks the cluster behind cli for its member list and its claimed
// name, and probes the health of every started member. The list is
// serializable: any running member answers from its own view, even one
// still waiting for a quorum at bootstrap, so a node sees its unstarted
// slot in a forming cluster (see Decide). An error means no peer answered:
// Facts.Reachable is false.
//
// cli should point at the other nodes' client URLs, not at this node's.
func Observe(ctx context.Context, cli *clientv3.Client) (Observation, error) {
	return observe(ctx, cli, true)
}

// ObserveMembers is Observe without the health probes: every Member's
// Healthy is false. It is for a node whose data holds a member that etcd
// has not reported removed: Decide restarts such a node with its data
// whatever the members' health (it reads the list's cluster ID and this
// node's learner entry), and each probe of a peer costs a mutual-TLS
// connection of its own, which every restart of a node paid before it
// started etcd.
func ObserveMembers(ctx context.Context, cli *clientv3.Client) (Observation, error) {
	return observe(ctx, cli, false)
}

func observe(ctx context.Context, cli *clientv3.Client, health bool) (Observation, error) {
	resp, err := cli.MemberList(ctx, clientv3.WithSerializable())
	if err != nil {
		return Observation{}, fmt.Errorf("member list from %s: %w", strings.Join(cli.Endpoints(), ","), err)
	}
	o := Observation{ClusterID: resp.Header.GetClusterId()}
	for _, m := range resp.Members {
		o.Members = append(o.Members, fromPB(m))
	}
	if health {
		probeHealth(ctx, cli, o.Members, func(Member) bool { return true })
	}
	if g, err := cli.Get(ctx, ClusterKey, clientv3.WithSerializable()); err == nil && len(g.Kvs) > 0 {
		o.Cluster = string(g.Kvs[0].Value)
	}
	return o, nil
}

// probeHealth sets Healthy on the started members that want selects,
// probing them concurrently.
func probeHealth(ctx context.Context, cli *clientv3.Client, ms []Member, want func(Member) bool) {
	var wg sync.WaitGroup
	for i := range ms {
		if !ms[i].Started || !want(ms[i]) {
			continue
		}
		wg.Go(func() { ms[i].Healthy = answers(ctx, cli, ms[i].ClientURLs) })
	}
	wg.Wait()
}

// answers reports whether any of urls answers a Status request. A URL
// whose port refuses the connection does not answer and is not asked:
// etcd's client retries a Status it cannot connect for until the
// deadline, so asking cost the whole healthTimeout. Every restart of a
// node paid it, 2 s before etcd started: the member list names the
// node's own member, whose etcd is not running yet. Any other failure to
// connect (a timeout, no route, a name that does not resolve yet) is
// left to the Status and its retries, as before.
func answers(ctx context.Context, cli *clientv3.Client, urls []string) bool {
	for _, u := range urls {
		sctx, cancel := context.WithTimeout(ctx, healthTimeout)
		ok := !refused(sctx, u)
		if ok {
			_, err := cli.Status(sctx, u)
			ok = err == nil
		}
		cancel()
		if ok {
			return true
		}
	}
	return false
}

// refused reports whether the host of the client URL u refused a TCP
// connection to its port (ECONNREFUSED): nothing listens there now. A URL
// that does not parse or has no port is not refused; the Status says.
func refused(ctx context.Context, u string) bool {
	p, err := url.Parse(u)
	if err != nil || p.Port() == "" {
		return false
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", p.Host)
	if err != nil {
		return errors.Is(err, syscall.ECONNREFUSED)
	}
	_ = c.Close()
	return false
}

// ClusterKey holds the name of the etcdbox cluster (the seed's cluster),
// so that a node whose seed names another cluster does not join this one.
const ClusterKey = "/etcdbox/cluster"

// ErrOtherCluster means the cluster claims another name than the seed's.
var ErrOtherCluster = errors.New("the cluster has another name")

// Claim records cluster as the cluster's name unless it has one, and fails
// with ErrOtherCluster when the name it has differs. A node that
// bootstrapped calls it once etcd is ready; Join calls it too, so clusters
// made before the claim existed get one.
func Claim(ctx context.Context, cli *clientv3.Client, cluster string) error {
	if cluster == "" {
		return nil
	}
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(ClusterKey), "=", 0)).
		Then(clientv3.OpPut(ClusterKey, cluster)).
		Else(clientv3.OpGet(ClusterKey)).
		Commit()
	if err != nil {
		return fmt.Errorf("claim cluster name %q: %w", cluster, err)
	}
	if resp.Succeeded {
		return nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) > 0 && string(kvs[0].Value) != cluster {
		return fmt.Errorf("claim cluster name %q: the peers run cluster %q: %w", cluster, kvs[0].Value, ErrOtherCluster)
	}
	return nil
}

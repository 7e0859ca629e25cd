package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/etcdbox/etcdbox/discovery"
	"github.com/etcdbox/etcdbox/init/member"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// lifecycle finds the peers, decides what to do with this node's member
// (member.Decide: restart with data, bootstrap as an expected initial
// member, join as a learner, or wait), starts etcd accordingly, and
// promotes a learner once it has caught up. When etcd later says the
// member was removed, it stops etcd, moves the data aside and goes round
// again. Every failure is logged with what was wrong and retried with
// backoff; nothing here ever bootstraps a second cluster or deletes data.
func (n *node) lifecycle(ctx context.Context) {
	removed := false
	backoff := time.Second
	for ctx.Err() == nil {
		again, err := n.memberRound(ctx, removed)
		if err == nil && !again {
			return
		}
		if again {
			removed, backoff = true, time.Second
			continue
		}
		n.log.Printf("membership: %v; retrying in %s", err, backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		// A node that waits for its peers asks again soon: the handshake
		// and a member list are cheap, and a cluster that comes back
		// should not wait 30s for its last member.
		limit := 30 * time.Second
		if errors.Is(err, errWaiting) {
			limit = 5 * time.Second
		}
		backoff = min(2*backoff, limit)
	}
}

// errWaiting marks a round that decided to wait.
var errWaiting = errors.New("waiting")

// memberRound runs one decision. It returns again=true when etcd
// reported the member removed after it started, so the caller decides
// once more with that fact.
func (n *node) memberRound(ctx context.Context, removed bool) (again bool, err error) {
	self := n.localMember()
	peers, err := n.peers(ctx, self)
	if err != nil {
		return false, err
	}
	rec, err := n.formationStore().Load()
	if err != nil {
		return false, err
	}
	facts := member.Facts{
		Formation:          rec,
		Self:               self.Name,
		SelfPeerURL:        self.PeerURL(),
		Cluster:            n.seed.Cluster,
		HasData:            self.hasData(),
		WasMember:          n.wasMember(),
		RemovedFromCluster: removed,
		ExpectedInitial:    peers.Initial(n.seed.Discovery.InitialSize).Names(),
	}
	var cli *clientv3.Client
	if others := peers.ClientURLs(self.Name); len(others) > 0 {
		if cli, err = n.peerClient(others); err != nil {
			return false, err
		}
		defer cli.Close()
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		obs, err := member.Observe(octx, cli)
		cancel()
		if err != nil {
			n.log.Printf("membership: no peer answers: %v", err)
		} else {
			facts.Reachable, facts.Members, facts.PeerCluster = true, obs.Members, obs.Cluster
		}
	}
	if !facts.HasData {
		// The formation handshake: only a node without data may
		// bootstrap, and only on its peers' word.
		facts.Answers = n.askFormation(ctx, peers)
	}
	plan := member.Decide(facts)
	n.log.Printf("membership: %s: %s", plan.Action, plan.Reason)

	m := self
	m.State = plan.State
	m.InitialCluster = peers.InitialCluster()
	m.Token = rec.Token
	var joined *member.Joined
	switch plan.Action {
	case member.Wait:
		return false, fmt.Errorf("%w: %s", errWaiting, plan.Reason)
	case member.Bootstrap:
		var initial discovery.PeerSet
		for _, name := range plan.Initial {
			p, ok := peers.Get(name)
			if !ok {
				return false, fmt.Errorf("bootstrap: formation member %s is not in the peer set", name)
			}
			initial = append(initial, p)
		}
		m.InitialCluster, m.Token = initial.InitialCluster(), plan.Token
		if err := n.commitFormation(plan); err != nil {
			return false, err
		}
	case member.Restart:
	case member.RejoinAfterRemoval, member.JoinAsLearner:
		if plan.Action == member.RejoinAfterRemoval {
			to, err := member.MoveAside(m.DataDir, n.stateDir())
			if err != nil {
				return false, fmt.Errorf("move the removed member's data aside: %w", err)
			}
			n.log.Printf("membership: moved the removed member's data to %s", to)
			// state/member stays: a node that was a member never
			// bootstraps again, even with its data gone.
			if err := os.MkdirAll(m.DataDir, 0o700); err != nil {
				return false, err
			}
		}
		joined, err = member.Join(ctx, cli, member.Request{Cluster: n.seed.Cluster, Name: m.Name, PeerURL: m.PeerURL(), Logf: n.log.Printf})
		if err != nil {
			return false, fmt.Errorf("join: %w", err)
		}
		m.InitialCluster = joined.InitialCluster
		n.log.Printf("membership: added as learner %x", joined.ID)
	}
	if m.State == "new" {
		n.log.Printf("etcd: bootstrapping member %s of cluster %q with %s, token %s", m.Name, n.seed.Cluster, m.InitialCluster, m.Token)
	} else {
		n.log.Printf("etcd: restarting member %s with its data", m.Name)
		if !self.hasData() {
			n.log.Printf("etcd: starting member %s as a learner of the running cluster", m.Name)
		}
	}
	watch := member.NewRemovedWatch()
	sup, readyc := n.launch(ctx, m, watch)
	if sup == nil {
		if joined != nil {
			joined.Release()
		}
		return false, nil // shutting down
	}
	select {
	case <-ctx.Done():
		return false, nil
	case <-watch.Removed():
		return n.stopRemoved(sup, joined)
	case <-readyc:
	}
	if err := n.afterReady(ctx, m, plan, joined, cli); err != nil {
		n.log.Printf("membership: %v", err)
	}
	select {
	case <-ctx.Done():
		return false, nil
	case <-watch.Removed():
		return n.stopRemoved(sup, joined)
	}
}

// stopRemoved stops an etcd whose member was removed from the cluster.
func (n *node) stopRemoved(sup interface{ Stop(time.Duration) error }, joined *member.Joined) (bool, error) {
	n.log.Printf("membership: etcd says this member was removed from the cluster; stopping it")
	if joined != nil {
		joined.Release()
	}
	if err := sup.Stop(30 * time.Second); err != nil {
		n.log.Printf("stop etcd: %v", err)
	}
	return true, nil
}

// afterReady finishes a start once the local member serves: a learner is
// promoted (retrying until it has caught up), a new cluster is claimed
// under the seed's name, and the node records that it is a member.
// peerCli reaches the other members; a learner's own member refuses the
// lease the membership lock needs.
func (n *node) afterReady(ctx context.Context, m etcdMember, plan member.Plan, joined *member.Joined, peerCli *clientv3.Client) error {
	local, err := m.client()
	if err != nil {
		return err
	}
	defer local.Close()
	switch {
	case joined != nil:
		attempts, err := joined.Promote(ctx)
		if err != nil {
			return fmt.Errorf("promote learner %x: %w", joined.ID, err)
		}
		n.log.Printf("membership: promoted to a voting member after %d attempt(s)", attempts)
	case plan.Promote:
		st, err := local.Status(ctx, local.Endpoints()[0])
		if err != nil {
			return fmt.Errorf("promote: status: %w", err)
		}
		if peerCli == nil {
			return fmt.Errorf("promote learner %x: no peer to reach the cluster through", st.Header.MemberId)
		}
		attempts, err := member.Promote(ctx, peerCli, st.Header.MemberId, n.log.Printf)
		if err != nil {
			return fmt.Errorf("promote learner: %w", err)
		}
		n.log.Printf("membership: promoted to a voting member after %d attempt(s)", attempts)
	}
	if err := member.Claim(ctx, local, n.seed.Cluster); err != nil {
		return fmt.Errorf("claim cluster name %q: %w", n.seed.Cluster, err)
	}
	if err := os.WriteFile(n.memberFile(), []byte(m.Name+"\n"), 0o600); err != nil {
		return fmt.Errorf("record membership: %w", err)
	}
	n.log.Printf("membership: %s is a voting member of cluster %q", m.Name, n.seed.Cluster)
	return nil
}

// memberFile records that this node has been a voting member: such a node
// never bootstraps again, even if its data is lost.
func (n *node) memberFile() string { return filepath.Join(n.stateDir(), "member") }

func (n *node) wasMember() bool {
	_, err := os.Stat(n.memberFile())
	return err == nil
}

// peers returns the peer set: from SRV records, a static list, or this
// node alone.
func (n *node) peers(ctx context.Context, self etcdMember) (discovery.PeerSet, error) {
	d := n.seed.Discovery
	switch {
	case d.SRV != "":
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		ps, err := discovery.SRV(lctx, discoveryResolver, d.SRV, d.SRVName)
		if err != nil {
			return nil, fmt.Errorf("discovery: %w", err)
		}
		if !ps.Contains(self.Name) {
			n.log.Printf("discovery: SRV records of %s do not list this node (%s); it can only join a running cluster", d.SRV, self.Name)
		}
		return ps, nil
	case len(d.Peers) > 0:
		return discovery.StaticPeers(d.Peers), nil
	default:
		return discovery.PeerSet{{Name: self.Name, Host: self.AdvertiseHost, PeerPort: self.PeerPort, ClientPort: self.ClientPort}}, nil
	}
}

// discoveryResolver reads /etc/resolv.conf, which the network step wrote.
var discoveryResolver discovery.Resolver = net.DefaultResolver

// peerClient connects to the other members with this node's certificate.
func (n *node) peerClient(endpoints []string) (*clientv3.Client, error) {
	tc, err := n.localMember().tlsConfig()
	if err != nil {
		return nil, err
	}
	return clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		TLS:         tc,
		DialTimeout: 3 * time.Second,
		Logger:      zap.NewNop(),
	})
}

// localMember returns the member as last started (or planned).
func (n *node) localMember() etcdMember {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.member
}

// readyOnce tells the lifecycle that the current etcd serves.
func (n *node) readyOnce(context.Context) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.readyc == nil {
		return
	}
	select {
	case <-n.readyc:
	default:
		close(n.readyc)
	}
}

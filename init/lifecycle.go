package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/etcdbox/etcdbox/discovery"
	"github.com/etcdbox/etcdbox/init/member"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// lifecycle runs the member loop (member.Loop: find the peers, decide
// what to do with this node's member, start etcd accordingly, promote a
// learner once it has caught up, and go round again when etcd says the
// member was removed), wired to this node. A bootstrap needs the
// formation handshake's proof (member.Decide, formation.go) and commits
// its token to state/ before etcd starts.
func (n *node) lifecycle(ctx context.Context) {
	self := n.localMember()
	tc, err := self.tlsConfig()
	if err != nil {
		n.log.Printf("membership: %v", err)
	}
	l := &member.Loop{
		Cluster: n.seed.Cluster, Name: self.Name, PeerURL: self.PeerURL(),
		DataDir: self.DataDir, StateDir: n.stateDir(),
		Logf:       n.log.Printf,
		LeaderView: member.MetricsLeaderView(tc, n.seed.HTTPPortOf),
		Gather:     n.gather,
		Commit:     n.commitFormation,
		Launch:     n.startMember,
		Local:      func() (*clientv3.Client, error) { return n.localMember().client() },
		Voter: func(member.Plan) error {
			if err := os.WriteFile(n.memberFile(), []byte(self.Name+"\n"), 0o600); err != nil {
				return err
			}
			return n.recordIdentity(ctx)
		},
	}
	l.Run(ctx)
}

// gather collects the facts of one round: the node's data and state, the
// peers' member list, and without data the formation handshake.
func (n *node) gather(ctx context.Context, removed bool) (member.Round, error) {
	// A decommissioned node never joins again by itself (decommission.go).
	if dead, why := decommissioned(n.stateDir()); dead {
		return member.Round{}, errors.New("waiting: " + why)
	}
	self := n.localMember()
	peers, err := n.peers(ctx, self)
	if err != nil {
		return member.Round{}, err
	}
	// An incomplete answer leaves ExpectedInitial empty: the node may
	// restart with its data or join a running cluster, never bootstrap.
	initial, ierr := peers.Initial(n.seed.Discovery.InitialSize)
	if ierr != nil {
		n.log.Printf("discovery: %v; no bootstrap until all are listed", ierr)
	}
	rec, err := n.formationStore().Load()
	if err != nil {
		return member.Round{}, err
	}
	dataCluster, _ := n.identity()
	r := member.Round{
		Facts: member.Facts{
			Formation:          rec,
			Self:               self.Name,
			SelfPeerURL:        self.PeerURL(),
			Cluster:            n.seed.Cluster,
			HasData:            self.hasData(),
			WasMember:          n.wasMember(),
			RemovedFromCluster: removed,
			DataCluster:        dataCluster,
			ExpectedInitial:    initial.Names(),
		},
		InitialCluster: func(names []string) (string, error) {
			if names == nil {
				return peers.InitialCluster(), nil
			}
			var set discovery.PeerSet
			for _, name := range names {
				p, ok := peers.Get(name)
				if !ok {
					return "", fmt.Errorf("member %s is not in the peer set", name)
				}
				set = append(set, p)
			}
			return set.InitialCluster(), nil
		},
	}
	// The formation handshake: only a node without data may bootstrap,
	// and only on its peers' word. It runs beside the member list, so
	// that a cold formation does not wait out the list's deadline.
	var early chan []member.Answer
	if others := peers.ClientURLs(self.Name); len(others) > 0 {
		if r.Peers, err = n.peerClient(others); err != nil {
			return member.Round{}, err
		}
		// The client waits for a connection until the deadline: peers
		// that do not run cost the whole of it, every round. When every
		// peer answers the handshake that it never served as a member,
		// no member list can come yet, and the wait ends there: at a
		// cold formation that saves the whole 5 s on every node, and
		// again on a late member's next round, while the peers that
		// started first wait for it to make their quorum.
		octx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var fresh atomic.Bool
		if !r.Facts.HasData {
			early = make(chan []member.Answer, 1)
			go func() {
				// A peer whose node API is not up yet is asked
				// again a moment later, rather than costing the
				// whole of the list's wait.
				as := member.AskUntilAnswered(octx, formationRetry, func(ctx context.Context) []member.Answer {
					return n.askFormation(ctx, peers)
				})
				if member.NoneServed(as) {
					fresh.Store(true)
					cancel()
				}
				early <- as
			}()
		}
		// A node restarting with its data needs no member's health
		// (member.ObserveMembers).
		observe := member.Observe
		if r.Facts.HasData && !removed {
			observe = member.ObserveMembers
		}
		obs, err := observe(octx, r.Peers)
		switch {
		case err != nil && fresh.Load():
			n.log.Printf("membership: no peer has served etcd yet: every peer answered the formation handshake that it never was a member; not waiting for a member list")
		case err != nil:
			n.log.Printf("membership: no peer answers: %v", err)
		default:
			r.Facts.Reachable, r.Facts.Members, r.Facts.PeerCluster = true, obs.Members, obs.Cluster
			r.Facts.PeerClusterID = fmt.Sprintf("%x", obs.ClusterID)
			cancel() // the early answers are asked again below
		}
		if early != nil {
			r.Facts.Answers = <-early
		}
		cancel()
	}
	// Answers asked beside a member list that came may be older than
	// the list: peers may have started etcd in between, and a late
	// initial member would then see its slot in a running cluster but
	// answers that say nobody started, and join as a learner instead
	// of starting in its slot (a simultaneous first boot showed it: the
	// two others formed while this one waited). So when the list
	// came, the node asks again: its answers then postdate the list, as
	// Decide's rule for an unstarted slot assumes.
	if !r.Facts.HasData && (r.Facts.Reachable || early == nil) {
		r.Facts.Answers = n.askFormation(ctx, peers)
	}
	return r, nil
}

// formationRetry is how long a node waits before it asks a peer that did
// not answer the formation handshake again (member.AskUntilAnswered).
const formationRetry = 300 * time.Millisecond

// startMember launches etcd as the loop asks (member.Loop.Launch).
func (n *node) startMember(ctx context.Context, s member.Start) (member.Etcd, error) {
	m := n.localMember()
	m.State, m.InitialCluster = s.State, s.InitialCluster
	m.Token = s.Token
	if m.Token == "" {
		rec, err := n.formationStore().Load()
		if err != nil {
			return nil, err
		}
		m.Token = rec.Token
	}
	// etcd's word that the member was removed counts once a quorum's
	// member list confirms it (member.ConfirmThrough).
	var opts []member.WatchOption
	if s.Peers != nil {
		opts = append(opts, member.ConfirmThrough(ctx, s.Peers, n.log.Printf))
	}
	watch := member.NewRemovedWatch(opts...)
	sup, readyc := n.launch(ctx, m, watch)
	if sup == nil {
		return nil, nil // shutting down
	}
	return runningEtcd{sup: sup, ready: readyc, watch: watch}, nil
}

// runningEtcd is a supervised etcd as the member loop sees it.
type runningEtcd struct {
	sup   interface{ Stop(time.Duration) error }
	ready <-chan struct{}
	watch *member.RemovedWatch
}

func (e runningEtcd) Ready() <-chan struct{}     { return e.ready }
func (e runningEtcd) Removed() <-chan struct{}   { return e.watch.Removed() }
func (e runningEtcd) Stop(d time.Duration) error { return e.sup.Stop(d) }

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

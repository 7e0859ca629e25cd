package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// Joined tells how a node that Add booted joined the cluster.
type Joined struct {
	Node Node
	// AsLearner reports whether a member list showed the node as a
	// learner before it showed it voting. The member lists are sampled
	// (every node every half second), so a promotion faster than that
	// could go unseen; under emulation it takes seconds.
	AsLearner bool
	// Learner is the time from the VM's start until the node was first
	// seen as a learner (0 when it was not); Voter until it was a voting
	// member that serves linearizable reads.
	Learner, Voter time.Duration
}

// Add boots one more node, named after the highest-numbered one (n4
// after n1..n3): it gets a lease and DNS records (so it is in the SRV
// records, which every node reads), its forwards and the cluster's seed
// volume. Add returns once the node is a voting member that serves
// linearizable reads, and every other node still serves. Every node must
// be running.
func (c *Cluster) Add(ctx context.Context) (Joined, error) { return c.AddNode(ctx, AddOptions{}) }

// AddOptions make a node that Add boots differ from the others.
type AddOptions struct {
	// Image, when set, is the image the node's disk is made from (raw,
	// qcow2 or VMDK, told apart by content) instead of the cluster's; it
	// is pinned in the node's directory, as up pins the cluster's.
	Image string
	// SeedSource, when set, is where the node reads its seed from
	// instead of the cluster's source (see SourceNoCloud).
	SeedSource string
}

// AddNode is Add with opts.
func (c *Cluster) AddNode(ctx context.Context, opts AddOptions) (Joined, error) {
	if err := CheckSeedSource(opts.SeedSource); err != nil {
		return Joined{}, err
	}
	unlockDir, err := lockDir(c.cfg.Dir)
	if err != nil {
		return Joined{}, err
	}
	var once sync.Once
	unlock := func() { once.Do(unlockDir) }
	defer unlock()
	if _, err := c.net.Status(ctx); err != nil {
		return Joined{}, fmt.Errorf("the cluster's network is down (%w); run up first", err)
	}
	names, n, err := c.nextNode(ctx)
	if err != nil {
		return Joined{}, err
	}
	n.SeedSource = opts.SeedSource
	if opts.Image != "" {
		if n.Image, err = pinNodeImage(opts.Image, n.Dir); err != nil {
			return Joined{}, fmt.Errorf("add %s: %w", n.Name, err)
		}
	}
	if err := c.register(ctx, &n); err != nil {
		return Joined{}, err
	}
	c.st.Nodes = append(c.st.Nodes, n)
	if err := c.save(); err != nil {
		return Joined{}, err
	}
	c.cfg.Log("%s: added to DHCP and DNS as %s (%s.%s, now in the SRV records)", n.Name, n.IP, n.Name, c.st.Domain)
	seedImg, err := c.ensureSeed()
	if err != nil {
		return Joined{}, err
	}
	if err := c.boot(ctx, seedImg, n); err != nil {
		return Joined{Node: n}, err
	}
	unlock() // the wait changes no state; down may stop a node that does not join
	start := time.Now()
	j := Joined{}
	names = append(names, n.Name)
	err = c.wait(ctx, want{names: names, members: len(names), fresh: []string{n.Name},
		onMembers: func(members []*pb.Member) {
			for _, m := range members {
				if m.IsLearner && j.Learner == 0 && isNode(m, n, c.st.Domain) {
					j.AsLearner, j.Learner = true, time.Since(start)
				}
			}
		}})
	j.Node, _ = c.Node(n.Name)
	if err != nil {
		return j, err
	}
	j.Voter = time.Since(start)
	return j, nil
}

// nextNode checks that every node runs and returns their names and the
// next node: named after the highest-numbered one, with its address, or
// a free one when a renumbered node took it.
func (c *Cluster) nextNode(ctx context.Context) ([]string, Node, error) {
	var names []string
	next := 0
	for _, n := range c.st.Nodes {
		if _, err := c.VM(n.Name); err != nil {
			return nil, Node{}, fmt.Errorf("%s: %w; run up first", n.Name, err)
		}
		names = append(names, n.Name)
		if i, err := strconv.Atoi(strings.TrimPrefix(n.Name, "n")); err == nil && i > next {
			next = i
		}
	}
	next++
	if next > maxNodes {
		return nil, Node{}, fmt.Errorf("add n%d: at most %d nodes", next, maxNodes)
	}
	if err := c.syncIPs(ctx); err != nil {
		return nil, Node{}, err
	}
	used := map[netip.Addr]bool{}
	for _, o := range c.st.Nodes {
		used[o.IP], used[o.NextIP] = true, true
	}
	ip := nodeIP(next)
	if used[ip] { // a renumbered node took it
		var err error
		if ip, err = freeIP(used); err != nil {
			return nil, Node{}, fmt.Errorf("add n%d: %w", next, err)
		}
	}
	name := "n" + strconv.Itoa(next)
	return names, Node{Name: name, Dir: filepath.Join(c.cfg.Dir, name), IP: ip}, nil
}

// isNode reports whether member m is node n: by name once it has started,
// before that by the host of its peer URLs.
func isNode(m *pb.Member, n Node, domain string) bool {
	if m.Name != "" {
		return m.Name == n.Name
	}
	for _, p := range m.PeerURLs {
		u, err := url.Parse(p)
		if err != nil {
			continue
		}
		if h := u.Hostname(); h == n.Name+"."+domain || h == n.IP.String() || h == n.Name {
			return true
		}
	}
	return false
}

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/etcdbox/etcdbox/discovery"
	"github.com/etcdbox/etcdbox/init/member"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/nodeapi/server"
	"github.com/etcdbox/etcdbox/seed"
)

// The node's side of the formation handshake (member.Record, DESIGN §5):
// it answers GET /v1/formation from the node API, which serves before the
// lifecycle starts etcd, and asks its peers the same before it decides.

// formationStore returns the node's formation record store.
func (n *node) formationStore() *member.Store {
	n.formOnce.Do(func() { n.formation = member.NewStore(n.stateDir()) })
	return n.formation
}

// formationAnswer is this node's answer to the handshake.
func (n *node) formationAnswer() (nodeapi.Formation, error) {
	r, err := n.formationStore().Load()
	if err != nil {
		return nodeapi.Formation{}, err
	}
	_, err = os.Stat(filepath.Join(n.root, "etcd", "member", "wal"))
	f := nodeapi.Formation{
		Name: n.name, HasData: err == nil, WasMember: n.wasMember(),
		Nonce: r.Nonce, Started: r.Started(), Token: r.Token, Nonces: r.Nonces, Without: r.Without,
	}
	if n.seed != nil {
		f.Cluster = n.seed.Cluster
	}
	return f, nil
}

func (a *apiNode) Formation(context.Context) (nodeapi.Formation, error) {
	return a.n.formationAnswer()
}

// FormWithout records the operator's bootstrap --without: the named
// expected initial members are left out of this node's formation. It is
// refused once the node started a formation: then it is too late.
func (a *apiNode) FormWithout(ctx context.Context, names []string) (nodeapi.Formation, error) {
	n := a.n
	self := n.localMember()
	peers, err := n.peers(ctx, self)
	if err != nil {
		return nodeapi.Formation{}, err
	}
	initial, err := peers.Initial(n.seed.Discovery.InitialSize)
	if err != nil {
		return nodeapi.Formation{}, fmt.Errorf("%w: %v", server.ErrBusy, err)
	}
	expected := initial.Names()
	for _, name := range names {
		switch {
		case name == n.name:
			return nodeapi.Formation{}, fmt.Errorf("%w: %s cannot form the cluster without itself", server.ErrBadRequest, name)
		case !slices.Contains(expected, name):
			return nodeapi.Formation{}, fmt.Errorf("%w: %s is not an expected initial member (%v)", server.ErrBadRequest, name, expected)
		}
	}
	_, err = n.formationStore().Update(func(r *member.Record) error {
		if r.Started() {
			return fmt.Errorf("%w: this node started formation %s already", server.ErrBusy, r.Token)
		}
		for _, name := range names {
			if !slices.Contains(r.Without, name) {
				r.Without = append(r.Without, name)
			}
		}
		slices.Sort(r.Without)
		return nil
	})
	if err != nil {
		return nodeapi.Formation{}, err
	}
	n.log.Printf("formation: the operator asked to form the cluster without %v", names)
	return n.formationAnswer()
}

// apiEndpoint is peer p's node API: its host, and its own api port or
// the seed's.
func (n *node) apiEndpoint(p seed.Peer) string {
	port := p.APIPort
	if port == 0 {
		port = n.seed.API.Port
	}
	return "https://" + hostPort(p.Host, port)
}

// askFormation asks every peer but this node for its formation answer,
// concurrently, each within a few seconds.
func (n *node) askFormation(ctx context.Context, peers discovery.PeerSet) []member.Answer {
	tc, err := n.localMember().tlsConfig()
	var out []member.Answer
	for _, p := range peers {
		if p.Name != n.name {
			out = append(out, member.Answer{Name: p.Name, Err: err})
		}
	}
	if err != nil {
		return out
	}
	var wg sync.WaitGroup
	i := 0
	for _, p := range peers {
		if p.Name == n.name {
			continue
		}
		a := &out[i]
		i++
		wg.Go(func() {
			c, err := nodeapi.NewClientTLS(n.apiEndpoint(p), tc)
			if err != nil {
				a.Err = err
				return
			}
			defer c.Close()
			actx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			f, err := c.Formation(actx)
			switch {
			case err != nil:
				a.Err = err
			case f.Name != p.Name:
				a.Err = fmt.Errorf("the node API at %s answers as %q", n.apiEndpoint(p), f.Name)
			default:
				a.Formation = f
			}
		})
	}
	wg.Wait()
	return out
}

// commitFormation writes the formation's token and nonces to the record
// before etcd starts with them: from then on the node never bootstraps
// another formation, even when its etcd dir alone is lost.
func (n *node) commitFormation(plan member.Plan) error {
	_, err := n.formationStore().Update(func(r *member.Record) error {
		if r.Started() && r.Token != plan.Token {
			return fmt.Errorf("this node started formation %s already, not %s", r.Token, plan.Token)
		}
		r.Token, r.Nonces = plan.Token, plan.Nonces
		return nil
	})
	if err != nil {
		return fmt.Errorf("commit formation %s: %w", plan.Token, err)
	}
	return nil
}

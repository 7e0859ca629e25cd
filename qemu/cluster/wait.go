package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdbox/etcdbox/qemu"
)

// Poll intervals: each node is probed every probeEvery; the verdict is
// taken every checkEvery.
const (
	probeEvery = 500 * time.Millisecond
	checkEvery = 250 * time.Millisecond
	probeLimit = 5 * time.Second
)

// consoleMarkers are the init's console lines the wait reports; a seed
// error ends it at once, since that node will not get further.
var consoleMarkers = []string{"etcdbox: etcd ready", "etcdbox: etcd exited", "etcdbox: etcd: ", "etcdbox: membership: ", "etcdbox: fatal:", "etcdbox: seed error:"}

// want is what a wait waits for.
type want struct {
	names   []string // nodes that must each answer a linearizable read
	members int      // the number of members, all voting and started
	fresh   []string // nodes whose VMs this call started: their consoles are read from the start
	// onMembers sees each member list that differs from the last.
	onMembers func(members []*pb.Member)
}

// observation is one probe of one node.
type observation struct {
	err       error
	clusterID uint64
	memberID  uint64
	members   []*pb.Member
}

// wait waits until w holds, reporting progress: console markers, each
// node once it serves, each new member list. Nodes that report different
// cluster IDs end it at once: two clusters formed. On failure it logs the
// console tails of the nodes that were not ready.
func (c *Cluster) wait(ctx context.Context, w want) error {
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel, which ends the probes and watchers
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	tc, err := c.adminTLS()
	if err != nil {
		return err
	}
	obs := &observations{seen: map[string]observation{}}
	fail := make(chan error, 3*len(w.names))
	vms, err := c.watchNodes(ctx, &wg, w, tc, obs, fail)
	if err != nil {
		return err
	}
	served := map[string]bool{}
	var last string
	tick := time.NewTicker(checkEvery)
	defer tick.Stop()
	for {
		snap := obs.snapshot()
		members, err := c.members(snap, w.names, served)
		if err != nil {
			return err
		}
		if members != nil {
			if d := describeMembers(members); d != last {
				last = d
				c.cfg.Log("members: %s", d)
				if w.onMembers != nil {
					w.onMembers(members)
				}
			}
		}
		if allServe(snap, w.names) && membersDone(members, w.names, w.members) {
			return nil
		}
		select {
		case <-ctx.Done():
			return c.notReady(ctx.Err(), w, snap, vms, last)
		case err := <-fail:
			return err
		case <-tick.C:
		}
	}
}

// observations holds the latest probe of each node: the probes write it,
// wait reads it.
type observations struct {
	mu   sync.Mutex
	seen map[string]observation
}

func (o *observations) set(name string, ob observation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen[name] = ob
}

func (o *observations) snapshot() map[string]observation {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.seen)
}

// watchNodes starts, for each node of w, a probe that records what its
// etcd answers into obs, and a console watcher that reports on fail why
// the node cannot get ready. It returns the nodes' VMs.
func (c *Cluster) watchNodes(ctx context.Context, wg *sync.WaitGroup, w want, tc *tls.Config, obs *observations, fail chan<- error) (map[string]*qemu.VM, error) {
	vms := map[string]*qemu.VM{}
	for _, name := range w.names {
		n, _ := c.Node(name)
		vm, err := c.VM(name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		vms[name] = vm
		var from int64
		if slices.Contains(w.fresh, name) {
			// Started by this call: from power-on, and its boot up to
			// the init is watched too.
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := c.watchBoot(ctx, vm, bootLimit(vm.Accel())); err != nil {
					fail <- err
				}
			}()
		} else {
			from = vm.Mark()
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			t := time.NewTicker(probeEvery)
			defer t.Stop()
			for {
				obs.set(name, probe(ctx, n.Endpoint(), tc))
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
		go func() {
			defer wg.Done()
			if err := c.watchConsole(ctx, vm, from); err != nil {
				fail <- err
			}
		}()
	}
	return vms, nil
}

// members returns the member list of the first node that answers, logging
// each node the first time it serves (served records that); two nodes in
// different clusters are an error.
func (c *Cluster) members(obs map[string]observation, names []string, served map[string]bool) ([]*pb.Member, error) {
	clusters := map[uint64][]string{}
	var members []*pb.Member
	for _, name := range names {
		o, ok := obs[name]
		if !ok || o.err != nil {
			continue
		}
		clusters[o.clusterID] = append(clusters[o.clusterID], name)
		if !served[name] {
			served[name] = true
			c.cfg.Log("%s: serves linearizable reads (member %016x, cluster %016x)", name, o.memberID, o.clusterID)
		}
		if members == nil {
			members = o.members
		}
	}
	if len(clusters) > 1 {
		return nil, fmt.Errorf("two clusters formed: %s", describeClusters(clusters))
	}
	return members, nil
}

// notReady is wait's error when its time is up (cause): which nodes do
// not serve and why, with their last console lines in the log, or the
// members as last seen.
func (c *Cluster) notReady(cause error, w want, obs map[string]observation, vms map[string]*qemu.VM, lastMembers string) error {
	err := fmt.Errorf("wait for %d voting members: %w", w.members, cause)
	var why []string
	for _, name := range w.names {
		o, ok := obs[name]
		if ok && o.err == nil {
			continue
		}
		reason := "not probed yet"
		if ok {
			reason = shortErr(o.err)
		}
		why = append(why, name+": "+reason+"; its console ends "+consoleEnd(vms[name].Console(), 3))
		c.cfg.Log("%s: not ready (%s); last console lines (%s):\n%s", name, reason, vms[name].ConsolePath(), vms[name].ConsoleTail(40))
	}
	if len(why) == 0 {
		why = append(why, "members: "+lastMembers)
	}
	return fmt.Errorf("%w; %s", err, strings.Join(why, "; "))
}

// watchConsole reports vm's console markers from offset from on, until
// ctx ends. It returns an error when the node cannot get ready: its VM
// exited, its seed is bad, or it failed the same way on two boots.
func (c *Cluster) watchConsole(ctx context.Context, vm *qemu.VM, from int64) error {
	fatal := ""
	for {
		m, err := vm.WaitConsole(ctx, from, consoleMarkers...)
		switch {
		case errors.Is(err, qemu.ErrExited):
			c.cfg.Log("%s: the VM powered off; last console lines (%s):\n%s", vm.Name(), vm.ConsolePath(), vm.ConsoleTail(40))
			return fmt.Errorf("%s: the VM powered off", vm.Name())
		case err != nil:
			return nil // ctx ended
		}
		line := qemu.Printable(m.Line)
		c.cfg.Log("%s: console: %s", vm.Name(), line)
		switch m.Text {
		case "etcdbox: seed error:":
			return fmt.Errorf("%s: %s", vm.Name(), line)
		case "etcdbox: fatal:":
			// The init reboots after a fatal error; the same error on the
			// next boot will not go away by itself.
			if line == fatal {
				c.cfg.Log("%s: the same fatal error on two boots in a row; last console lines (%s):\n%s", vm.Name(), vm.ConsolePath(), vm.ConsoleTail(40))
				return fmt.Errorf("%s: on two boots in a row: %s", vm.Name(), line)
			}
			fatal = line
		case "etcdbox: etcd ready":
			fatal = ""
		}
		from = m.Next
	}
}

// probe makes one linearizable read at endpoint and lists the members.
// A fresh client per probe keeps gRPC's reconnect backoff (up to two
// minutes) out of the boot time.
func probe(ctx context.Context, endpoint string, tc *tls.Config) observation {
	ctx, cancel := context.WithTimeout(ctx, probeLimit)
	defer cancel()
	cl, err := clientv3.New(clientv3.Config{
		Endpoints: []string{endpoint}, TLS: tc, DialTimeout: probeLimit, Logger: zap.NewNop(),
	})
	if err != nil {
		return observation{err: err}
	}
	defer cl.Close()
	r, err := cl.Get(ctx, "etcdbox/health")
	if err != nil {
		return observation{err: err}
	}
	ml, err := cl.MemberList(ctx)
	if err != nil {
		return observation{err: err}
	}
	return observation{clusterID: r.Header.ClusterId, memberID: r.Header.MemberId, members: ml.Members}
}

// allServe reports whether every node of names answered its last probe.
func allServe(obs map[string]observation, names []string) bool {
	for _, n := range names {
		if o, ok := obs[n]; !ok || o.err != nil {
			return false
		}
	}
	return true
}

// membersDone reports whether members are exactly want members, all
// started voters, among them every node of names.
func membersDone(members []*pb.Member, names []string, want int) bool {
	if len(members) != want {
		return false
	}
	for _, m := range members {
		if m.IsLearner || m.Name == "" || len(m.ClientURLs) == 0 {
			return false
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(members, func(m *pb.Member) bool { return m.Name == n }) {
			return false
		}
	}
	return true
}

// describeMembers is a member list in one line, sorted: "n1 n2 n3
// n4(learner) ?(learner, unstarted: https://n5.d:2380)".
func describeMembers(members []*pb.Member) string {
	var parts []string
	for _, m := range members {
		var tags []string
		if m.IsLearner {
			tags = append(tags, "learner")
		}
		name := m.Name
		if name == "" {
			name = "?"
			tags = append(tags, "unstarted: "+strings.Join(m.PeerURLs, ","))
		}
		if len(tags) > 0 {
			name += "(" + strings.Join(tags, ", ") + ")"
		}
		parts = append(parts, name)
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// describeClusters names the nodes of each cluster ID.
func describeClusters(clusters map[uint64][]string) string {
	var parts []string
	for id, names := range clusters {
		parts = append(parts, fmt.Sprintf("%s in %016x", strings.Join(names, ", "), id))
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

// consoleEnd quotes the last n non-blank lines of a console log, each
// cut to 160 bytes, on one line: enough to tell, from the error alone, a
// guest stuck in the firmware or the kernel from one whose init waits.
func consoleEnd(log string, n int) string {
	var end []string
	lines := strings.Split(qemu.Printable(log), "\n")
	for i := len(lines) - 1; i >= 0 && len(end) < n; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" {
			continue
		}
		if len(l) > 160 {
			l = l[:160] + "..."
		}
		end = append([]string{strconv.Quote(l)}, end...)
	}
	if len(end) == 0 {
		return "empty"
	}
	return strings.Join(end, " ")
}

// shortErr is the first line of err, without gRPC's wrapping.
func shortErr(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimPrefix(s, "rpc error: ")
	return s
}

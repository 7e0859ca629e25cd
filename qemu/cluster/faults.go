package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/etcdbox/etcdbox/qemu"
	"github.com/etcdbox/etcdbox/qemu/vnet"
)

// The fault verbs act on one node of a cluster and return once the fault
// is in place (DESIGN §9): the same calls back `etcdbox cluster kill`,
// the end-to-end tests and make bench. Each refuses, and changes nothing,
// when its node is unknown or not in the state the verb needs.

// VM states, as Status and `cluster status` show them.
const (
	StateRunning     = "running"
	StateStopped     = "stopped"
	StatePaused      = "paused"
	StatePartitioned = "partitioned"
)

var (
	// ErrUnknownNode means the cluster has no node of that name.
	ErrUnknownNode = errors.New("no such node")
	// ErrStopped means the verb needs a running VM and the node's is not.
	ErrStopped = errors.New("node is stopped")
	// ErrNodeRunning means the verb needs a stopped VM.
	ErrNodeRunning = errors.New("node is running")
)

// node returns the node of that name, or an error naming the known ones.
func (c *Cluster) node(name string) (Node, error) {
	if n, ok := c.Node(name); ok {
		return n, nil
	}
	var names []string
	for _, n := range c.st.Nodes {
		names = append(names, n.Name)
	}
	return Node{}, fmt.Errorf("node %q: %w in %s (nodes: %s)", name, ErrUnknownNode, c.cfg.Dir, strings.Join(names, ", "))
}

// runningVM returns the VM of a known, running node.
func (c *Cluster) runningVM(verb, name string) (*qemu.VM, error) {
	if _, err := c.node(name); err != nil {
		return nil, fmt.Errorf("%s: %w", verb, err)
	}
	vm, err := c.VM(name)
	if errors.Is(err, qemu.ErrNotRunning) {
		return nil, fmt.Errorf("%s %s: %w; start it first", verb, name, ErrStopped)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", verb, name, err)
	}
	return vm, nil
}

// Kill cuts the node's power (QMP quit) and returns once QEMU has exited.
func (c *Cluster) Kill(ctx context.Context, name string) error {
	vm, err := c.runningVM("kill", name)
	if err != nil {
		return err
	}
	if err := vm.Quit(ctx); err != nil {
		return fmt.Errorf("kill %s: %w", name, err)
	}
	if err := vm.Wait(ctx); err != nil && !errors.Is(err, qemu.ErrExited) && ctx.Err() != nil {
		return fmt.Errorf("kill %s: %w", name, err)
	}
	delete(c.vms, name)
	c.cfg.Log("%s: power cut (qemu quit)", name)
	return nil
}

// Poweroff presses the node's ACPI power button and waits up to grace for
// the guest to power off; after that QEMU is stopped by force and the
// error wraps qemu.ErrForced.
func (c *Cluster) Poweroff(ctx context.Context, name string, grace time.Duration) error {
	vm, err := c.runningVM("poweroff", name)
	if err != nil {
		return err
	}
	if err := c.stopVM(ctx, vm, grace); err != nil {
		return fmt.Errorf("poweroff %s: %w", name, err)
	}
	delete(c.vms, name)
	c.cfg.Log("%s: powered off", name)
	return nil
}

// Reset presses the node's reset button: it reboots without shutting down.
func (c *Cluster) Reset(ctx context.Context, name string) error {
	return c.vmAction(ctx, name, "reset", "reset", nil, (*qemu.VM).Reset)
}

// Pause freezes the node's VM (QMP stop), like Jepsen's pause nemesis: it
// misses heartbeats and answers nothing until Resume.
func (c *Cluster) Pause(ctx context.Context, name string) error {
	return c.vmAction(ctx, name, "pause", "paused", notPaused, (*qemu.VM).Pause)
}

// Resume thaws a paused node.
func (c *Cluster) Resume(ctx context.Context, name string) error {
	return c.vmAction(ctx, name, "resume", "resumed", isPaused, (*qemu.VM).Resume)
}

// vmAction applies act to the node's running VM and logs "<name>: <done>".
// With check, it first reads the VM's QMP status and lets check refuse.
// Errors start "<verb> <name>: ".
func (c *Cluster) vmAction(ctx context.Context, name, verb, done string, check func(status string, err error) error, act func(*qemu.VM, context.Context) error) error {
	vm, err := c.runningVM(verb, name)
	if err != nil {
		return err
	}
	if check != nil {
		if err := check(vm.Status(ctx)); err != nil {
			return fmt.Errorf("%s %s: %w", verb, name, err)
		}
	}
	if err := act(vm, ctx); err != nil {
		return fmt.Errorf("%s %s: %w", verb, name, err)
	}
	c.cfg.Log("%s: %s", name, done)
	return nil
}

// notPaused refuses to pause a VM whose status says it is paused already;
// a status that cannot be read does not keep it from pausing.
func notPaused(status string, err error) error {
	if err == nil && status == "paused" {
		return errors.New("already paused")
	}
	return nil
}

// isPaused refuses to resume a VM unless its status says it is paused.
func isPaused(status string, err error) error {
	if err != nil {
		return err
	}
	if status != "paused" {
		return fmt.Errorf("not paused (%s)", status)
	}
	return nil
}

// Start boots stopped nodes on their disks (a wiped node on a fresh copy
// of the image) and returns once their VMs run and their firmware has
// written to the console; WaitReady waits for their members. The
// cluster's network must be up.
func (c *Cluster) Start(ctx context.Context, names ...string) error {
	unlock, err := lockDir(c.cfg.Dir)
	if err != nil {
		return err
	}
	defer unlock()
	if len(names) == 0 {
		return errors.New("start: no node named")
	}
	var nodes []Node
	for _, name := range names {
		n, err := c.node(name)
		if err != nil {
			return fmt.Errorf("start: %w", err)
		}
		if vm, err := c.VM(name); err == nil {
			return fmt.Errorf("start %s: %w (pid %d)", name, ErrNodeRunning, vm.PID())
		}
		nodes = append(nodes, n)
	}
	if _, err := c.net.Status(ctx); err != nil {
		return fmt.Errorf("start: the cluster's network is down (%w); run up", err)
	}
	if err := c.resolveAccel(ctx); err != nil {
		return err
	}
	seedImg, err := c.ensureSeed()
	if err != nil {
		return err
	}
	return c.boot(ctx, seedImg, nodes...)
}

// WaitReady waits until every running node serves linearizable reads and
// the members are exactly the cluster's nodes, all started voters. Nodes
// in fresh were started by this process: their consoles are read from
// their start.
func (c *Cluster) WaitReady(ctx context.Context, fresh ...string) error {
	var names []string
	for _, n := range c.st.Nodes {
		names = append(names, n.Name)
	}
	if err := c.wait(ctx, want{names: names, members: len(names), fresh: fresh}); err != nil {
		return err
	}
	return c.syncIPs(ctx)
}

// Wipe replaces the stopped node's disk with a fresh copy of the image: a
// replaced, empty disk with the same name and MAC. The node stays
// stopped until Start.
func (c *Cluster) Wipe(ctx context.Context, name string) error {
	unlock, err := lockDir(c.cfg.Dir)
	if err != nil {
		return err
	}
	defer unlock()
	n, err := c.node(name)
	if err != nil {
		return fmt.Errorf("wipe: %w", err)
	}
	if vm, err := c.VM(name); err == nil {
		return fmt.Errorf("wipe %s: %w (pid %d); kill or power it off first", name, ErrNodeRunning, vm.PID())
	}
	had, err := qemu.RemoveDisk(n.Dir)
	if err != nil {
		return fmt.Errorf("wipe %s: %w", name, err)
	}
	if !had {
		c.cfg.Log("%s: had no disk; its next start makes one", name)
		return nil
	}
	c.cfg.Log("%s: disk replaced by a fresh copy of the image (it boots on it at its next start)", name)
	return nil
}

// Partition cuts names off from the other nodes on the network's switch,
// both ways; the named nodes still reach each other. The host still
// reaches every node through its forwards.
func (c *Cluster) Partition(ctx context.Context, names ...string) error {
	if err := c.checkCut("partition", names); err != nil {
		return err
	}
	if err := c.net.Partition(ctx, names); err != nil {
		return fmt.Errorf("partition: %w", err)
	}
	c.cfg.Log("network: %s cut off from the other nodes", strings.Join(names, ", "))
	return nil
}

// CutOneWay cuts names off from the other nodes in one direction only:
// with out, the frames of the named nodes to the others are dropped (they
// hear the others but cannot answer them); otherwise the others' frames
// to them (they are heard but hear nothing). TCP needs both directions,
// so new connections fail both ways, while data already under way in the
// open direction keeps arriving, unacknowledged: a half-failed link,
// which an etcd member must survive as it survives a partition. The host
// still reaches every node through its forwards. Heal undoes it.
func (c *Cluster) CutOneWay(ctx context.Context, out bool, names ...string) error {
	if err := c.checkCut("one-way cut", names); err != nil {
		return err
	}
	var others []string
	for _, n := range c.st.Nodes {
		if !slices.Contains(names, n.Name) {
			others = append(others, n.Name)
		}
	}
	cut, what := vnet.OneWay{From: names, To: others}, "frames to"
	if !out {
		cut, what = vnet.OneWay{From: others, To: names}, "frames from"
	}
	if err := c.net.CutOneWay(ctx, cut); err != nil {
		return fmt.Errorf("one-way cut: %w", err)
	}
	c.cfg.Log("network: %s: %s the other nodes dropped (one way)", strings.Join(names, ", "), what)
	return nil
}

// checkCut refuses a partition or one-way cut of no node, of a node
// named twice or unknown, or of every node.
func (c *Cluster) checkCut(verb string, names []string) error {
	if len(names) == 0 {
		return fmt.Errorf("%s: no node named", verb)
	}
	seen := map[string]bool{}
	for _, name := range names {
		if _, err := c.node(name); err != nil {
			return fmt.Errorf("%s: %w", verb, err)
		}
		if seen[name] {
			return fmt.Errorf("%s: %s named twice", verb, name)
		}
		seen[name] = true
	}
	if len(seen) == len(c.st.Nodes) {
		return fmt.Errorf("%s %s: that is every node; name the nodes to cut off from the others", verb, strings.Join(names, " "))
	}
	return nil
}

// Heal undoes every partition, one-way cut and impaired link (Impair).
func (c *Cluster) Heal(ctx context.Context) error {
	if err := c.net.Partition(ctx); err != nil {
		return fmt.Errorf("heal: %w", err)
	}
	c.cfg.Log("network: healed")
	return nil
}

// Renumber gives every node a new address for its next DHCP lease: each
// node moves on its next boot, and its DNS name and forwards follow once
// it has taken the lease. Running nodes keep their addresses until then.
// It returns the new addresses.
func (c *Cluster) Renumber(ctx context.Context) (map[string]netip.Addr, error) {
	unlock, err := lockDir(c.cfg.Dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := c.syncIPs(ctx); err != nil {
		return nil, err
	}
	used := map[netip.Addr]bool{}
	for _, n := range c.st.Nodes {
		used[n.IP] = true
		if n.NextIP.IsValid() {
			used[n.NextIP] = true
		}
	}
	out := map[string]netip.Addr{}
	for i := range c.st.Nodes {
		n := &c.st.Nodes[i]
		next, err := freeIP(used)
		if err != nil {
			return nil, fmt.Errorf("renumber %s: %w", n.Name, err)
		}
		used[next] = true
		n.NextIP = next
		if err := c.net.AddHost(ctx, c.host(*n)); err != nil {
			return nil, fmt.Errorf("renumber %s: %w", n.Name, err)
		}
		out[n.Name] = next
		c.cfg.Log("%s: its next lease is %s (now %s)", n.Name, next, n.IP)
	}
	return out, c.save()
}

// freeIP returns the lowest node address not in used.
func freeIP(used map[netip.Addr]bool) (netip.Addr, error) {
	for i := 1; i <= maxNodes; i++ {
		if ip := nodeIP(i); !used[ip] {
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("no free address among the %d node addresses", maxNodes)
}

// syncIPs takes the nodes' addresses from the network, where a renumbered
// node's new lease moved it.
func (c *Cluster) syncIPs(ctx context.Context) error {
	st, err := c.net.Status(ctx)
	if err != nil {
		return nil // the network is down: the state's addresses stand
	}
	changed := false
	for i := range c.st.Nodes {
		n := &c.st.Nodes[i]
		j := slices.IndexFunc(st.Hosts, func(h vnetHost) bool { return h.Name == n.Name })
		if j < 0 {
			continue
		}
		h := st.Hosts[j]
		if h.IP != n.IP || h.Next != n.NextIP {
			if h.IP != n.IP {
				c.cfg.Log("%s: moved from %s to %s", n.Name, n.IP, h.IP)
			}
			n.IP, n.NextIP = h.IP, h.Next
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return c.save()
}

// Remove takes a node out of the cluster for good. A running node is
// decommissioned through its node API (it hands leadership over, removes
// its own member under the membership lock while the voters left keep a
// healthy quorum, writes its tombstone and powers off); a stopped one has
// its member removed through the other nodes under the same quorum rule.
// Then its DHCP lease, DNS records and forwards go, and its directory.
func (c *Cluster) Remove(ctx context.Context, name string) error {
	unlock, err := lockDir(c.cfg.Dir)
	if err != nil {
		return err
	}
	defer unlock()
	n, err := c.node(name)
	if err != nil {
		return fmt.Errorf("remove: %w", err)
	}
	if len(c.st.Nodes) == 1 {
		return fmt.Errorf("remove %s: it is the last node; use down", name)
	}
	if vm, err := c.VM(name); err == nil {
		d, err := c.decommission(ctx, n)
		if err != nil {
			return fmt.Errorf("remove %s: %w", name, err)
		}
		c.cfg.Log("%s: decommissioned member %s (tombstone %s); waiting for it to power off", name, d.MemberID, d.Tombstone)
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err = vm.Wait(wctx)
		cancel()
		if err != nil {
			c.cfg.Log("%s: did not power off (%v); cutting its power", name, err)
			if err := vm.Quit(ctx); err != nil {
				vm.Kill()
			}
			if err := vm.Wait(ctx); err != nil && ctx.Err() != nil {
				return fmt.Errorf("remove %s: %w", name, err)
			}
		}
		delete(c.vms, name)
	} else {
		id, err := c.removeMember(ctx, n)
		if err != nil {
			return fmt.Errorf("remove %s: %w", name, err)
		}
		if id != 0 {
			c.cfg.Log("%s: member %016x removed", name, id)
		}
	}
	if err := c.net.RemoveHost(ctx, name); err != nil {
		c.cfg.Log("%s: network: %v", name, err)
	}
	for _, hp := range []int{n.ClientPort, n.APIPort} {
		c.unforward(ctx, hp)
	}
	for _, hp := range n.Ports {
		c.unforward(ctx, hp)
	}
	if err := os.RemoveAll(n.Dir); err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	c.st.Nodes = slices.DeleteFunc(c.st.Nodes, func(o Node) bool { return o.Name == name })
	c.cfg.Log("%s: deleted (%s)", name, n.Dir)
	return c.save()
}

func (c *Cluster) unforward(ctx context.Context, hostPort int) {
	if hostPort == 0 {
		return
	}
	if err := c.net.RemoveForward(ctx, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(hostPort))); err != nil {
		c.cfg.Log("network: remove forward of port %d: %v", hostPort, err)
	}
}

// VMState is the node's VM state: running, stopped, paused, or
// partitioned (running, and cut off by Partition).
func (c *Cluster) VMState(ctx context.Context, name string, partitioned map[string]bool) string {
	vm, err := c.VM(name)
	if err != nil {
		return StateStopped
	}
	if st, err := vm.Status(ctx); err == nil && st == "paused" {
		return StatePaused
	}
	if partitioned[name] {
		return StatePartitioned
	}
	return StateRunning
}

// partitioned returns the nodes a partition cut off.
func (c *Cluster) partitioned(ctx context.Context) map[string]bool {
	out := map[string]bool{}
	st, err := c.net.Status(ctx)
	if err != nil {
		return out
	}
	for _, g := range st.Partition {
		for _, name := range g {
			out[name] = true
		}
	}
	// A one-way cut marks its smaller side, the nodes it names.
	for _, c := range st.OneWay {
		side := c.From
		if len(c.To) < len(c.From) {
			side = c.To
		}
		for _, name := range side {
			out[name] = true
		}
	}
	return out
}

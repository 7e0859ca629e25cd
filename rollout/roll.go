package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/etcdbox/etcdbox/nodeapi"
)

// NodeAPI is the part of a node's API the roll uses; *nodeapi.Client
// has it.
type NodeAPI interface {
	Status(ctx context.Context) (nodeapi.Status, error)
	Snapshot(ctx context.Context) (nodeapi.Snapshot, error)
	HoldUpgrade(ctx context.Context, image string) error
	ArmUpgrade(ctx context.Context, image string) (nodeapi.UpgradeProgress, error)
	Upgrade(ctx context.Context) (nodeapi.UpgradeProgress, error)
	RebootWith(ctx context.Context, req nodeapi.RebootRequest) error
}

var _ NodeAPI = (*nodeapi.Client)(nil)

// Node is one node of the roll.
type Node struct {
	// Name is the node's name; empty means the name its status gives.
	Name string
	API  NodeAPI
	// EtcdEndpoint is its member's client URL as this host reaches it.
	EtcdEndpoint string
}

// ErrAborted means the target was deleted (--abort) or replaced while
// the roll ran.
var ErrAborted = errors.New("roll aborted")

// Roll is one rolling upgrade. Image, Nodes and Etcd are required.
type Roll struct {
	// Image is the reference every node stages, pinned by digest.
	Image string
	// ImageEtcd is the image's etcd version ("3.7.3"), for the version
	// rules before any node moves; empty means unknown: the rules are
	// then checked against the first node that comes back.
	ImageEtcd string
	Nodes     []Node
	Etcd      Etcd
	// By says who started the roll, for the target record.
	By string
	// NoKexec makes every node reboot through the firmware. Without it a
	// node jumps into its armed slot with kexec where it can, counting
	// the try as systemd-boot would (DESIGN §7).
	NoKexec bool
	// NodeTimeout bounds one node's step, snapshot to blessed; default
	// 10 minutes. ReadyWait is how long the roll waits for the
	// preconditions before a step; default 2 minutes. Poll is the
	// polling interval; default 1 second, as in make bench: a node's
	// reboot and bless, and the cluster's readiness after it, are seen
	// half a second sooner on average than at 2 s, three times a node,
	// for one status request a second to the node that reboots.
	NodeTimeout, ReadyWait, Poll time.Duration
	// Log receives the progress lines; nil discards them.
	Log func(format string, args ...any)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (r *Roll) logf(format string, args ...any) {
	if r.Log != nil {
		r.Log(format, args...)
	}
}

func (r *Roll) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Roll) defaults() {
	if r.NodeTimeout <= 0 {
		r.NodeTimeout = 10 * time.Minute
	}
	if r.ReadyWait <= 0 {
		r.ReadyWait = 2 * time.Minute
	}
	if r.Poll <= 0 {
		r.Poll = time.Second
	}
}

// Observe asks every node's API and etcd at once.
func (r *Roll) Observe(ctx context.Context) (Cluster, error) {
	var c Cluster
	c.Nodes = make([]NodeState, len(r.Nodes))
	var wg sync.WaitGroup
	for i, n := range r.Nodes {
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			st, err := n.API.Status(sctx)
			c.Nodes[i] = NodeState{Name: n.Name, Status: st, Err: err}
			if c.Nodes[i].Name == "" {
				c.Nodes[i].Name = st.Name
			}
			if c.Nodes[i].Name == "" {
				c.Nodes[i].Name = n.EtcdEndpoint // until it answers
			}
		})
	}
	var eps []string
	for _, n := range r.Nodes {
		eps = append(eps, n.EtcdEndpoint)
	}
	var err error
	c.Members, c.Leader, c.Alarms, c.ClusterVersion, err = r.Etcd.Observe(ctx, eps)
	wg.Wait()
	if c.ClusterVersion == "" {
		// etcd serves /version on its HTTP port, which this host may not
		// reach (a forwarded client port): the nodes read it themselves.
		for _, n := range c.Nodes {
			if v := n.Status.Member.ClusterVersion; n.Err == nil && v != "" {
				c.ClusterVersion = v
				break
			}
		}
	}
	return c, err
}

// waitReady polls until Check passes, for up to ReadyWait.
func (r *Roll) waitReady(ctx context.Context) (Cluster, error) {
	deadline := r.now().Add(r.ReadyWait)
	for {
		c, err := r.Observe(ctx)
		if err == nil {
			err = Check(c)
		}
		if err == nil {
			return c, nil
		}
		if r.now().After(deadline) {
			return c, err
		}
		if err := r.sleep(ctx); err != nil {
			return c, err
		}
	}
}

func (r *Roll) sleep(ctx context.Context) error {
	t := time.NewTimer(r.Poll)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Run rolls Image over the nodes (see the package doc). It returns nil
// when every node runs Image, blessed, and otherwise stops at the first
// problem with its reason.
func (r *Roll) Run(ctx context.Context) error {
	r.defaults()
	if err := nodeapi.CheckImageRef(r.Image); err != nil {
		return err
	}
	if len(r.Nodes) == 0 {
		return errors.New("no nodes to roll")
	}
	if r.ImageEtcd == "unknown" { // what etcdbox build labels a binary without build info
		r.ImageEtcd = ""
	}
	unlock, err := r.Etcd.Lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	start := r.now()
	if err := r.Etcd.PutTarget(ctx, Target{Image: r.Image, Started: start, By: r.By, Etcd: r.ImageEtcd}); err != nil {
		return err
	}
	r.logf("roll %s over %d nodes", r.Image, len(r.Nodes))

	c, err := r.waitReady(ctx)
	if err != nil {
		return err
	}
	// The nodes' names come from their status when not given.
	for i := range r.Nodes {
		r.Nodes[i].Name = c.Nodes[i].Name
	}
	if bare := Unwatched(c); len(bare) > 0 {
		r.logf("warning: no hardware watchdog on %s: a new slot that hangs there stays hung until the machine is power-cycled, and the roll stops at its node timeout", strings.Join(bare, ", "))
	}
	plan, err := r.versionRules(ctx, c)
	if err != nil {
		return err
	}
	records, err := r.Etcd.Records(ctx)
	if err != nil {
		return err
	}
	var names, todo []string
	for _, n := range c.Nodes {
		names = append(names, n.Name)
		if !r.moved(c, records, n.Name) {
			todo = append(todo, n.Name)
		}
	}
	if err := r.prestage(ctx, todo); err != nil {
		return err
	}
	p := &progress{plan: plan, records: records}
	for _, name := range Order(names, c.LeaderName()) {
		if err := r.rollNode(ctx, name, p); err != nil {
			return err
		}
	}
	c, _ = r.Observe(ctx)
	r.logf("roll done in %s: %d nodes on %s; cluster version %s", r.now().Sub(start).Round(time.Second), len(p.done), r.Image, orUnknown(c.ClusterVersion))
	return nil
}

// progress is what a roll carries from node to node: its version plan
// (which the first node on the image may refine), the records of the
// nodes that moved before it began, and the nodes it has moved.
type progress struct {
	plan    VersionPlan
	records []NodeRecord
	done    []string
}

// turnTries is how often a roll takes a node's turn when it fails before
// the node was asked to arm its slot (untouched).
const turnTries = 3

// rollNode moves node name onto the image, unless it runs it already
// (turn). A turn that failed before the node was asked to arm its slot
// left the node as it was: the leadership could not be handed over, or
// its status or its snapshot could not be had, most often because the
// node restarted on its own just after the preconditions held. That turn
// is taken again from the preconditions, which wait for the node to be
// back, up to turnTries in all. A failure from the arm on is not: whether
// the node armed or rebooted is not known then, and the roll stops for
// the operator.
func (r *Roll) rollNode(ctx context.Context, name string, p *progress) error {
	for try := 1; ; try++ {
		err := r.turn(ctx, name, p)
		var u untouched
		if err == nil || !errors.As(err, &u) || try == turnTries || ctx.Err() != nil {
			return err
		}
		r.logf("node %s: %v; nothing changed on it: its turn again once the cluster is ready (%d of %d)", name, u.err, try+1, turnTries)
	}
}

// turn moves node name onto the image, unless it runs it already: with
// the cluster ready, past the point of no return or the storage version a
// downgrade waits for, leadership handed over, one step.
func (r *Roll) turn(ctx context.Context, name string, p *progress) error {
	if err := r.checkTarget(ctx); err != nil {
		return err
	}
	c, err := r.waitReady(ctx)
	if err != nil {
		return fmt.Errorf("before node %s: %w", name, err)
	}
	if r.moved(c, p.records, name) {
		r.logf("node %s: already on %s, skipped", name, r.Image)
		p.done = append(p.done, name)
		return nil
	}
	if p.plan.Upgrade && LastMover(p.plan, etcdVersions(c), name) {
		if err := pointOfNoReturn(p.plan, c, name); err != nil {
			if c.ClusterVersion == "" {
				// No node read it this time (a /version read that
				// timed out): nothing moved, so look again.
				return untouched{err}
			}
			return err
		}
		r.logf("node %s: point of no return: it is the last member on etcd %s; once it runs %s the cluster version rises to %s, and rolling back by slot swap is no longer safe (downgrade through etcd's downgrade API)",
			name, p.plan.From, p.plan.To, p.plan.To)
	}
	if p.plan.Downgrade {
		if c, err = r.waitStorage(ctx, name, p.plan.To); err != nil {
			return err
		}
	}
	if name == c.LeaderName() {
		if err := r.handOver(ctx, c, name, p.done); err != nil {
			// Nothing changed on the node: it still leads, or no
			// longer does, and either is a state the turn starts from.
			return untouched{err}
		}
	}
	if err := r.step(ctx, name); err != nil {
		return err
	}
	p.done = append(p.done, name)
	if r.ImageEtcd == "" {
		// Learn the image's etcd from the first node that runs it.
		if c, err := r.Observe(ctx); err == nil {
			if ns, ok := c.Node(name); ok && ns.Err == nil {
				r.ImageEtcd = ns.Status.EtcdVersion
				if p.plan, err = CheckVersions(etcdVersions(c), r.ImageEtcd); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// moved says whether node name runs Image already, blessed, as a record
// of this roll says it moved there.
func (r *Roll) moved(c Cluster, records []NodeRecord, name string) bool {
	ns, _ := c.Node(name)
	rec, ok := findRecord(records, name)
	return ok && rec.State == StateDone && rec.Image == r.Image && rec.To == ns.Status.Slot && ns.Status.Blessed
}

// prestage stages Image, held, into the inactive slot of every node in
// names at once, before the first node reboots: each node's turn is then
// only the hand-over, the reboot and the gate. A held slot does not boot
// (nodeapi.SlotHeld), so an unplanned reboot, or a roll stopped before a
// node's turn, leaves that node on its running slot; a later roll of the
// same image reuses the held slot, another image overwrites it. A node
// that cannot stage stops the roll before any node reboots.
func (r *Roll) prestage(ctx context.Context, names []string) error {
	if len(names) == 0 {
		return nil
	}
	start := r.now()
	r.logf("staging %s ahead on %s", r.Image, strings.Join(names, ", "))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			if err := r.hold(ctx, name); err != nil {
				errs[i] = fmt.Errorf("node %s: staging ahead: %w", name, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.logf("staged ahead on %d nodes in %s", len(names), r.now().Sub(start).Round(time.Second))
	return nil
}

// hold stages Image held on node name and waits until it is, for up to
// NodeTimeout.
func (r *Roll) hold(ctx context.Context, name string) error {
	api := r.api(name)
	ctx, cancel := context.WithTimeout(ctx, r.NodeTimeout)
	defer cancel()
	if err := api.HoldUpgrade(ctx, r.Image); err != nil {
		return err
	}
	return r.waitStaged(ctx, name, api)
}

func (r *Roll) api(name string) NodeAPI {
	i := slices.IndexFunc(r.Nodes, func(n Node) bool { return n.Name == name })
	return r.Nodes[i].API
}

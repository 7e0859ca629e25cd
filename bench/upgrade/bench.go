package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hashicorp/go-multierror"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/qemu"
	"github.com/etcdbox/etcdbox/qemu/cluster"
	"github.com/etcdbox/etcdbox/rollout"
)

// The cluster's upgrade settings: one try, so that a bad slot falls back
// after a single boot; a short settle time, so that a roll spends little
// of its time waiting on a healthy node.
var upgradeSettings = cluster.Upgrade{Tries: 1, Settle: 10 * time.Second, Gate: 90 * time.Second}

// freshAge is how long a node has been a healthy voter again when the
// fresh moves hand it leadership: the settle time, then about the 2 s
// that the roll took in session 36 from blessing n1 to moving n3's
// leadership to it (README, Figures).
var freshAge = upgradeSettings.Settle + 2*time.Second

// Deadlines under software emulation.
const (
	upDeadline     = 10 * time.Minute // cluster up of three nodes
	readyDeadline  = 3 * time.Minute  // the cluster healthy again between steps
	rebootDeadline = 5 * time.Minute  // one plain reboot
	rollDeadline   = 25 * time.Minute // the roll of three nodes
	stageDeadline  = 3 * time.Minute  // a pull and a slot write
	backDeadline   = 6 * time.Minute  // node API reboot into a bad slot and back
	downGrace      = 30 * time.Second
)

// nodes is the number of nodes of the cluster.
const nodes = 3

// rig is the running cluster and the clients the measurements share.
type rig struct {
	c     *cluster.Cluster
	tc    *tls.Config
	cli   *clientv3.Client
	etcd  *rollout.EtcdClient
	nodes []rollout.Node
	apis  map[string]*nodeapi.Client
	poll  time.Duration
	log   func(format string, args ...any)
}

// bench builds the images, brings the cluster up and runs the
// measurements in order (the CA rotation last), printing each one's
// figures as soon as it has them; the cluster goes down and the work
// directory away in every case.
func (o options) bench(ctx context.Context, stdout, stderr io.Writer) (err error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	dir := o.workDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "etcdbox-bench-upgrade-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintf(stderr, "bench upgrade: work directory %s is kept\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, "  "+format+"\n", args...) }

	t := time.Now()
	im, err := o.buildImages(ctx, dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "images (v1 raw, v2 and %d bad OCI) built in %.1fs; qemu accel %s, %d MiB per VM; upgrade tries %d, settle %s, gate %s\n",
		len(im.bad), time.Since(t).Seconds(), qemu.Accel(), o.memoryMiB, upgradeSettings.Tries, upgradeSettings.Settle, upgradeSettings.Gate)

	t = time.Now()
	r, err := o.up(ctx, filepath.Join(dir, "cluster"), im.v1, logf)
	if r != nil {
		defer func() {
			if derr := r.down(); derr != nil {
				logf("down: %v", derr)
			}
		}()
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "cluster of %d nodes on %s up in %.1fs\n", nodes, v1Version, time.Since(t).Seconds())

	reb, err := r.reboots(ctx, o.reboots, stdout)
	if err != nil {
		return r.withConsoles(err)
	}
	if reb.watched, err = r.watchedReboots(ctx, o.watched, stdout); err != nil {
		return r.withConsoles(err)
	}
	mv, err := r.moveLeaders(ctx, 3, stdout)
	if err != nil {
		return r.withConsoles(err)
	}
	fresh, err := r.freshMoves(ctx, o.fresh, freshAge, stdout)
	if err != nil {
		return r.withConsoles(err)
	}
	roll, err := r.roll(ctx, im.v2, stdout)
	if err != nil {
		return r.withConsoles(err)
	}
	printRatios(stdout, reb, mv, fresh, roll)
	if err := recordRoll(reb, mv, fresh, roll); err != nil {
		return err
	}
	if err := drawRoll(o.svg, roll.timeline, stdout); err != nil {
		return fmt.Errorf("roll timeline: %w", err)
	}
	if len(im.bad) > 0 {
		node, err := r.follower(ctx)
		if err != nil {
			return err
		}
		for _, b := range im.bad {
			back, err := r.rollback(ctx, node, b, stdout)
			if err != nil {
				return r.withConsoles(fmt.Errorf("%s: %w", b.what, err))
			}
			printBack(stdout, b, back, reb)
			if err := recordBack(b, back, reb); err != nil {
				return err
			}
		}
	}
	// Last: the rig's admin certificate is refused once it is done.
	if err := r.rotateCA(ctx, roll, stdout); err != nil {
		return r.withConsoles(err)
	}
	return nil
}

// up brings the cluster up on v1 and connects the clients.
func (o options) up(ctx context.Context, dir, v1 string, logf func(string, ...any)) (*rig, error) {
	ovmf := filepath.Join(o.sysroot, "usr/share/OVMF")
	uctx, cancel := context.WithTimeout(ctx, upDeadline)
	defer cancel()
	c, err := cluster.Up(uctx, cluster.Config{
		Dir: dir, Image: v1, MemoryMiB: o.memoryMiB,
		OVMFCode: filepath.Join(ovmf, "OVMF_CODE_4M.fd"), OVMFVars: filepath.Join(ovmf, "OVMF_VARS_4M.fd"),
		Log: func(format string, args ...any) { logf("cluster: "+format, args...) }, Upgrade: upgradeSettings,
	}, nodes)
	if c == nil {
		return nil, fmt.Errorf("cluster up: %w", err)
	}
	r := &rig{c: c, apis: map[string]*nodeapi.Client{}, poll: o.poll, log: logf}
	if err != nil {
		return r, r.withConsoles(fmt.Errorf("cluster up: %w", err))
	}
	if r.tc, err = c.TLS(); err != nil {
		return r, err
	}
	for _, n := range c.Nodes() {
		api, err := nodeapi.NewClient("https://127.0.0.1:"+strconv.Itoa(n.APIPort), c.PKIDir())
		if err != nil {
			return r, fmt.Errorf("node API of %s: %w", n.Name, err)
		}
		r.apis[n.Name] = api
		r.nodes = append(r.nodes, rollout.Node{Name: n.Name, API: api, EtcdEndpoint: n.Endpoint()})
	}
	if r.cli, err = rollout.Dial(c.Endpoints(), r.tc); err != nil {
		return r, fmt.Errorf("etcd client: %w", err)
	}
	r.etcd = rollout.NewEtcd(r.cli, r.tc)
	return r, nil
}

// down closes the clients and powers the cluster off.
func (r *rig) down() error {
	var errs *multierror.Error
	for _, api := range r.apis {
		api.Close()
	}
	if r.cli != nil {
		errs = multierror.Append(errs, r.cli.Close())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs = multierror.Append(errs, r.c.Down(ctx, downGrace))
	return errs.ErrorOrNil()
}

// withConsoles logs the end of every node's console, for a failed step.
func (r *rig) withConsoles(err error) error {
	for _, n := range r.c.Nodes() {
		if vm, verr := r.c.VM(n.Name); verr == nil {
			r.log("console of %s (last 60 lines):\n%s", n.Name, vm.ConsoleTail(60))
		}
	}
	return err
}

// observe asks every node's API and etcd at once, as the roll does.
func (r *rig) observe(ctx context.Context) (rollout.Cluster, error) {
	return (&rollout.Roll{Nodes: r.nodes, Etcd: r.etcd}).Observe(ctx)
}

// waitReady waits until the cluster may move a node (rollout.Check): every
// member a healthy voter, every slot blessed.
func (r *rig) waitReady(ctx context.Context) (rollout.Cluster, error) {
	ctx, cancel := context.WithTimeout(ctx, readyDeadline)
	defer cancel()
	for {
		c, err := r.observe(ctx)
		if err == nil {
			err = rollout.Check(c)
		}
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			return c, fmt.Errorf("cluster not ready within %s: %w", readyDeadline, err)
		}
		if err := sleep(ctx, r.poll); err != nil {
			return c, err
		}
	}
}

// follower returns a node that does not lead, once the cluster is ready.
func (r *rig) follower(ctx context.Context) (string, error) {
	c, err := r.waitReady(ctx)
	if err != nil {
		return "", err
	}
	for _, n := range c.Nodes {
		if n.Name != c.LeaderName() {
			return n.Name, nil
		}
	}
	return "", errors.New("no follower")
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

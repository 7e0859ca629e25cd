package main

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"time"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/qemu/cluster"
)

// drFigures are issue 13's: a restore of the three nodes and a quorum-loss
// recovery, each next to one node's plain reboot, and the recovery point
// a failure finds.
type drFigures struct {
	reboot   time.Duration // reset of one node until the cluster is whole
	restore  time.Duration // etcdbox restore until every node votes again
	detect   time.Duration // two nodes killed until the survivor says so
	recover  time.Duration // etcdbox recover until the survivor serves
	rejoin   time.Duration // two empty disks started until three voters
	interval time.Duration // the seed's backup interval
	age      time.Duration // the newest backup's age when the nodes died
}

// disasters measures drFigures on c (n1, n2, n3), running the etcdbox
// CLI at cli. It ends with the three nodes voting again.
func disasters(ctx context.Context, c *cluster.Cluster, cli string) (drFigures, error) {
	var f drFigures
	r := drRig{c: c, cli: cli}
	var err error
	if f.reboot, err = r.reboot(ctx, "n2"); err != nil {
		return f, err
	}
	if f.restore, err = r.restore(ctx); err != nil {
		return f, err
	}
	if err := r.loseQuorum(ctx, &f); err != nil {
		return f, err
	}
	if f.recover, err = r.etcdbox(ctx, "recover", "--survivor", "n3"); err != nil {
		return f, err
	}
	if f.rejoin, err = r.rejoin(ctx, "n1", "n2"); err != nil {
		return f, err
	}
	return f, nil
}

// drRig is what disasters acts on: the cluster, and the etcdbox CLI at
// cli.
type drRig struct {
	c   *cluster.Cluster
	cli string
}

// api returns a client of the named node's API.
func (r drRig) api(name string) (*nodeapi.Client, error) {
	n, ok := r.c.Node(name)
	if !ok {
		return nil, fmt.Errorf("no node %s", name)
	}
	return nodeapi.NewClient("https://127.0.0.1:"+strconv.Itoa(n.APIPort), r.c.PKIDir())
}

// etcdbox runs the CLI with args on the cluster's directory and returns
// how long it took.
func (r drRig) etcdbox(ctx context.Context, args ...string) (time.Duration, error) {
	start := time.Now()
	out, err := exec.CommandContext(ctx, r.cli, append(args, "--dir", r.c.Dir())...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("etcdbox %s: %w\n%s", args[0], err, out)
	}
	return time.Since(start), nil
}

// reboot resets node and times it until the cluster is whole again.
func (r drRig) reboot(ctx context.Context, node string) (time.Duration, error) {
	start := time.Now()
	if err := r.c.Reset(ctx, node); err != nil {
		return 0, err
	}
	if err := r.c.WaitReady(ctx, node); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// restore takes a backup through n1 and times etcdbox restore of the three
// nodes to it.
func (r drRig) restore(ctx context.Context) (time.Duration, error) {
	a1, err := r.api("n1")
	if err != nil {
		return 0, err
	}
	defer a1.Close()
	snap, err := a1.Backup(ctx)
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	return r.etcdbox(ctx, "restore", "--snapshot", snap.Name, "--discard", "n1,n2,n3")
}

// loseQuorum notes n3's backup interval and the newest backup's age in f,
// kills n1 and n2, and times it until n3 says its quorum is lost
// (f.detect).
func (r drRig) loseQuorum(ctx context.Context, f *drFigures) error {
	a3, err := r.api("n3")
	if err != nil {
		return err
	}
	defer a3.Close()
	st, err := a3.Status(ctx)
	if err != nil {
		return err
	}
	f.interval = st.Backups.Interval
	if !st.Backups.LastTaken.IsZero() {
		f.age = time.Since(st.Backups.LastTaken)
	}
	for _, n := range []string{"n1", "n2"} {
		if err := r.c.Kill(ctx, n); err != nil {
			return err
		}
	}
	start := time.Now()
	for {
		st, err := a3.Status(ctx)
		if err == nil && st.Quorum.Lost {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("n3 never said its quorum is lost: %w", ctx.Err())
		case <-time.After(time.Second): // poll interval, bounded by ctx
		}
	}
	f.detect = time.Since(start)
	return nil
}

// rejoin wipes the nodes, starts them on empty disks and times it until
// they vote again.
func (r drRig) rejoin(ctx context.Context, nodes ...string) (time.Duration, error) {
	for _, n := range nodes {
		if err := r.c.Wipe(ctx, n); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	if err := r.c.Start(ctx, nodes...); err != nil {
		return 0, err
	}
	if err := r.c.WaitReady(ctx, nodes...); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func (f drFigures) print() {
	r := func(d time.Duration) string { return fmt.Sprintf("%.2fx", d.Seconds()/f.reboot.Seconds()) }
	fmt.Printf("reboot of one node (reset), until whole again:  %s\n", f.reboot.Round(100*time.Millisecond))
	fmt.Printf("restore of 3 nodes to a backup, until 3 voters: %s (%s the reboot)\n", f.restore.Round(100*time.Millisecond), r(f.restore))
	fmt.Printf("quorum lost (2 of 3 killed), until n3 says so:  %s (the watch's bound is 45s)\n", f.detect.Round(100*time.Millisecond))
	fmt.Printf("recover --survivor n3, until it serves:         %s (%s the reboot)\n", f.recover.Round(100*time.Millisecond), r(f.recover))
	fmt.Printf("2 empty disks started, until 3 voters:          %s (%s the reboot)\n", f.rejoin.Round(100*time.Millisecond), r(f.rejoin))
	fmt.Printf("RPO from backups: interval %s + the newest backup's age at the failure %s = at most %s of writes\n",
		f.interval, f.age.Round(time.Second), (f.interval + f.age).Round(time.Second))
}

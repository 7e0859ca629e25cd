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
	api := func(name string) (*nodeapi.Client, error) {
		n, ok := c.Node(name)
		if !ok {
			return nil, fmt.Errorf("no node %s", name)
		}
		return nodeapi.NewClient("https://127.0.0.1:"+strconv.Itoa(n.APIPort), c.PKIDir())
	}
	run := func(args ...string) (time.Duration, error) {
		start := time.Now()
		out, err := exec.CommandContext(ctx, cli, append(args, "--dir", c.Dir())...).CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("etcdbox %s: %w\n%s", args[0], err, out)
		}
		return time.Since(start), nil
	}

	start := time.Now()
	if err := c.Reset(ctx, "n2"); err != nil {
		return f, err
	}
	if err := c.WaitReady(ctx, "n2"); err != nil {
		return f, err
	}
	f.reboot = time.Since(start)

	a1, err := api("n1")
	if err != nil {
		return f, err
	}
	defer a1.Close()
	snap, err := a1.Backup(ctx)
	if err != nil {
		return f, fmt.Errorf("backup: %w", err)
	}
	if f.restore, err = run("restore", "--snapshot", snap.Name, "--discard", "n1,n2,n3"); err != nil {
		return f, err
	}

	a3, err := api("n3")
	if err != nil {
		return f, err
	}
	defer a3.Close()
	st, err := a3.Status(ctx)
	if err != nil {
		return f, err
	}
	f.interval = st.Backups.Interval
	if !st.Backups.LastTaken.IsZero() {
		f.age = time.Since(st.Backups.LastTaken)
	}
	for _, n := range []string{"n1", "n2"} {
		if err := c.Kill(ctx, n); err != nil {
			return f, err
		}
	}
	start = time.Now()
	for {
		st, err := a3.Status(ctx)
		if err == nil && st.Quorum.Lost {
			break
		}
		select {
		case <-ctx.Done():
			return f, fmt.Errorf("n3 never said its quorum is lost: %w", ctx.Err())
		case <-time.After(time.Second): // poll interval, bounded by ctx
		}
	}
	f.detect = time.Since(start)
	if f.recover, err = run("recover", "--survivor", "n3"); err != nil {
		return f, err
	}
	for _, n := range []string{"n1", "n2"} {
		if err := c.Wipe(ctx, n); err != nil {
			return f, err
		}
	}
	start = time.Now()
	if err := c.Start(ctx, "n1", "n2"); err != nil {
		return f, err
	}
	if err := c.WaitReady(ctx, "n1", "n2"); err != nil {
		return f, err
	}
	f.rejoin = time.Since(start)
	return f, nil
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

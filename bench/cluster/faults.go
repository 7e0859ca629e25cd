package main

import (
	"context"
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/etcdbox/etcdbox/internal/kvwriter"
	"github.com/etcdbox/etcdbox/qemu/cluster"
)

// electionTimeout is etcd's default, which the nodes run with.
const electionTimeout = time.Second

// figures are issue 10's: failover, a wiped node's return, a cold start.
type figures struct {
	failover time.Duration // longest gap between acknowledged writes
	acked    int
	check    string // porcupine's verdict on the writer's history
	wiped    time.Duration
	cold     time.Duration
}

// faultFigures kills the leader of c under a writer and starts it again,
// then wipes a follower and starts it: the failover is the writer's
// longest gap, the wiped node's time runs from its start until the
// cluster is whole again with it as a voter.
func faultFigures(ctx context.Context, c *cluster.Cluster) (figures, error) {
	var f figures
	leader, err := leaderOf(ctx, c)
	if err != nil {
		return f, err
	}
	tc, err := c.TLS()
	if err != nil {
		return f, err
	}
	w, err := kvwriter.Start(c.Endpoints(), tc)
	if err != nil {
		return f, err
	}
	if err := c.Kill(ctx, leader); err != nil {
		return f, err
	}
	if err := c.Start(ctx, leader); err != nil {
		return f, err
	}
	if err := c.WaitReady(ctx, leader); err != nil {
		return f, err
	}
	res, err := w.Stop(30 * time.Second)
	if err != nil {
		return f, err
	}
	f.failover, f.acked = res.Gap, res.Acked
	f.check = map[porcupine.CheckResult]string{porcupine.Ok: "ok", porcupine.Illegal: "ILLEGAL", porcupine.Unknown: "timed out"}[res.Check(3*time.Minute)]

	if leader, err = leaderOf(ctx, c); err != nil {
		return f, err
	}
	var victim string
	for _, n := range c.Nodes() {
		if n.Name != leader {
			victim = n.Name
		}
	}
	if err := c.Kill(ctx, victim); err != nil {
		return f, err
	}
	if err := c.Wipe(ctx, victim); err != nil {
		return f, err
	}
	start := time.Now()
	if err := c.Start(ctx, victim); err != nil {
		return f, err
	}
	if err := c.WaitReady(ctx, victim); err != nil {
		return f, fmt.Errorf("wiped %s: %w", victim, err)
	}
	f.wiped = time.Since(start)
	return f, nil
}

// coldStart powers every node of c off and brings the cluster up again on
// its disks, timing the up until three voters.
func coldStart(ctx context.Context, c *cluster.Cluster, f *figures) (*cluster.Cluster, error) {
	dir := c.Dir()
	if err := c.Down(ctx, time.Minute); err != nil {
		return nil, fmt.Errorf("down before the cold start: %w", err)
	}
	start := time.Now()
	up, err := cluster.Up(ctx, cluster.Config{Dir: dir}, 0)
	if err != nil {
		return nil, fmt.Errorf("cold start: %w", err)
	}
	f.cold = time.Since(start)
	return up, nil
}

// leaderOf names the node that leads, per the cluster's status.
func leaderOf(ctx context.Context, c *cluster.Cluster) (string, error) {
	rows, err := c.Status(ctx)
	if err != nil {
		return "", err
	}
	for _, r := range rows {
		if r.Leader {
			return r.Node.Name, nil
		}
	}
	return "", fmt.Errorf("no leader in the status of %d nodes", len(rows))
}

package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/qemu"
	"github.com/etcdbox/etcdbox/rollout"
)

// step is one node's part of the roll, from its record in etcd.
type step struct {
	node string
	// total is the record's Started to Updated (state done); stage the
	// part before the reboot request (snapshot, pull, slot write), back
	// the part after it (reboot, health gate with its settle time, until
	// blessed).
	total, stage, back time.Duration
}

// roll is what the rolling upgrade measured.
type roll struct {
	total  time.Duration
	steps  []step
	writer writerFigures
	// timeline is the roll's picture: the writer's puts and each node's
	// phases.
	timeline timeline
}

// rebootClock is a node API that notes when the roll asks the node to
// reboot, which splits its step in two.
type rebootClock struct {
	rollout.NodeAPI
	mu *sync.Mutex
	at map[string]time.Time
	// node is the key of at.
	node string
}

func (c rebootClock) RebootWith(ctx context.Context, req nodeapi.RebootRequest) error {
	c.mu.Lock()
	c.at[c.node] = time.Now()
	c.mu.Unlock()
	return c.NodeAPI.RebootWith(ctx, req)
}

// roll pushes the v2 tarball and rolls it over the cluster under the
// writer.
func (r *rig) roll(ctx context.Context, v2 string, stdout io.Writer) (roll, error) {
	var out roll
	img, err := tarball.ImageFromPath(v2, nil)
	if err != nil {
		return out, fmt.Errorf("read %s: %w", v2, err)
	}
	ref, err := r.c.Push(ctx, img)
	if err != nil {
		return out, fmt.Errorf("push %s: %w", v2, err)
	}
	if _, err := r.waitReady(ctx); err != nil {
		return out, fmt.Errorf("before the roll: %w", err)
	}
	var mu sync.Mutex
	rebootAt := map[string]time.Time{}
	var nodes []rollout.Node
	for _, n := range r.nodes {
		n.API = rebootClock{NodeAPI: n.API, mu: &mu, at: rebootAt, node: n.Name}
		nodes = append(nodes, n)
	}
	clock := newPhaseClock(nodes, &mu, rebootAt)
	for i, n := range nodes {
		nodes[i].API = clockedAPI{NodeAPI: n.API, c: clock, node: n.Name}
	}
	roller := &rollout.Roll{
		Image: ref, Nodes: nodes, Etcd: clockedEtcd{Etcd: r.etcd, c: clock}, By: "bench", Poll: r.poll, ReadyWait: readyDeadline,
		Log: func(format string, args ...any) { r.log("roll: "+format, args...) },
	}
	w, err := r.startWriter(ctx)
	if err != nil {
		return out, err
	}
	rctx, cancel := context.WithTimeout(ctx, rollDeadline)
	defer cancel()
	start := time.Now()
	err = roller.Run(rctx)
	out.total = time.Since(start)
	out.writer = r.stopWriter(w)
	out.timeline = rollTimeline(fmt.Sprintf("rolling upgrade %s -> %s of %d nodes under the writer (qemu %s)", v1Version, v2Version, len(nodes), qemu.Accel()),
		clock, out.writer, start.Add(out.total))
	if err != nil {
		return out, fmt.Errorf("roll of %s: %w", v2Version, err)
	}

	st, err := rollout.ReadStatus(ctx, r.etcd)
	if err != nil {
		return out, fmt.Errorf("roll records: %w", err)
	}
	fmt.Fprintf(stdout, "rolling upgrade %s -> %s of %d nodes (followers first, the leader last), under the writer:\n", v1Version, v2Version, len(r.nodes))
	mu.Lock()
	defer mu.Unlock()
	for _, rec := range st.Records {
		if rec.Image != ref || rec.State != rollout.StateDone {
			fmt.Fprintf(stdout, "  %s: record in state %s for %s, not counted\n", rec.Name, rec.State, rec.Image)
			continue
		}
		s := step{node: rec.Name, total: rec.Updated.Sub(rec.Started)}
		if at, ok := rebootAt[rec.Name]; ok {
			s.stage, s.back = at.Sub(rec.Started), rec.Updated.Sub(at)
		}
		out.steps = append(out.steps, s)
		fmt.Fprintf(stdout, "  %s: %s (snapshot and arm of the slot staged ahead %s, reboot request -> blessed healthy voter %s)\n",
			s.node, secs(s.total), secs(s.stage), secs(s.back))
	}
	f := rollSummary(out.steps)
	fmt.Fprintf(stdout, "  roll, total:             %s\n", secs(out.total))
	fmt.Fprintf(stdout, "  roll, per node:          %s\n", f.total.Format("%.1fs"))
	fmt.Fprintf(stdout, "  roll, reboot -> blessed: %s (the settle time %s included)\n", f.back.Format("%.1fs"), upgradeSettings.Settle)
	fmt.Fprintf(stdout, "  writer during the roll: %s\n", out.writer)
	return out, nil
}

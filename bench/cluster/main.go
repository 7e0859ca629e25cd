// Command cluster measures local clusters: the time from `cluster up` of
// three nodes until all three are voting members, next to the time for one
// node in the same run (their ratio), the time for `cluster add` until
// the new member votes, the accelerator probe (uncached), and two fault
// figures: from `kill` of a node until a peer reports the loss, and from
// `start` of the stopped node until the cluster is whole again (as a
// ratio to the one-node up). Then issue 10's: the failover when the
// leader is killed under a writer (the longest gap between acknowledged
// writes, as a ratio to etcd's election timeout; the writer's history is
// checked with porcupine), a wiped node's way back to a voter (as a
// ratio to the plain restart just measured), and a cold start of all
// three (as a ratio to the one-node up). Then issue 13's (dr.go): a
// restore of the three nodes and a quorum-loss recovery, as ratios to one
// node's reboot, and the recovery point from backups. It prints figures,
// and records them for bench.json (record.go); nothing is asserted but
// the history.
//
//	go run ./bench/cluster -image out/etcdbox.img
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/etcdbox/etcdbox/qemu"
	"github.com/etcdbox/etcdbox/qemu/cluster"
	"github.com/etcdbox/etcdbox/seed"
)

func main() {
	img := flag.String("image", "out/etcdbox.img", "image to boot (no node name in its seed)")
	sysroot := flag.String("sysroot", ".cache/sysroot", "where hack/deps.sh unpacked OVMF")
	mem := flag.Int("mem", 768, "MiB per VM")
	cli := flag.String("etcdbox", "bin/etcdbox", "the etcdbox CLI, for restore and recover")
	flag.Parse()
	if err := run(*img, *sysroot, *cli, *mem); err != nil {
		fmt.Fprintln(os.Stderr, "bench cluster:", err)
		os.Exit(1)
	}
}

func run(img, sysroot, cli string, mem int) error {
	work, err := os.MkdirTemp("", "etcdbox-bench-cluster-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	ovmf := filepath.Join(sysroot, "usr/share/OVMF")
	cfg := func(name string) cluster.Config {
		return cluster.Config{
			Dir: filepath.Join(work, name), Image: img, MemoryMiB: mem,
			OVMFCode: filepath.Join(ovmf, "OVMF_CODE_4M.fd"), OVMFVars: filepath.Join(ovmf, "OVMF_VARS_4M.fd"),
			// A backup a minute, so that a failure finds a recent one.
			Backup: seed.Backup{Interval: "1m"},
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()

	var u upFigures
	one, t1, err := upTimed(ctx, cfg("one"), 1)
	if err != nil {
		return fmt.Errorf("up 1: %w", err)
	}
	u.one = t1
	if err := one.Down(ctx, time.Minute); err != nil {
		fmt.Fprintln(os.Stderr, "down 1:", err)
	}
	if u.solos, err = solos(ctx, cfg); err != nil {
		return fmt.Errorf("three 1-node ups at once: %w", err)
	}
	three, t3, err := upTimed(ctx, cfg("three"), 3)
	if err != nil {
		return fmt.Errorf("up 3: %w", err)
	}
	u.three = t3
	if err := killAndStart(ctx, three, &u); err != nil {
		return err
	}
	f, err := faultFigures(ctx, three)
	if err != nil {
		return err
	}
	if three, err = coldStart(ctx, three, &f); err != nil {
		return err
	}
	defer three.Down(context.Background(), time.Minute)
	dr, err := disasters(ctx, three, cli)
	if err != nil {
		return fmt.Errorf("restore and recover: %w", err)
	}
	start := time.Now()
	j, err := three.Add(ctx)
	if err != nil {
		return fmt.Errorf("add: %w", err)
	}
	u.add, u.asLearner = time.Since(start), j.AsLearner

	probe := qemu.Prober{CacheFile: "-"}.Probe(ctx)
	u.print(probe, f)
	dr.print()
	return record(u, f, dr)
}

// upFigures are the figures of cluster up, add, and a node's kill and
// start.
type upFigures struct {
	one, three time.Duration // cluster up of 1 and of 3 nodes, until ready
	// solos is three 1-node clusters brought up at once, until the last
	// serves: the CPU contention of three boots, with no cluster to form.
	solos     time.Duration
	victim    string        // the node killed and started again
	peer      string        // the node that reports it lost
	lost      time.Duration // kill until peer reports the loss
	start     time.Duration // start until the cluster is whole again
	add       time.Duration // cluster add until the new member votes
	asLearner bool          // the added member was seen as a learner
}

// solos brings three 1-node clusters up at once, each on its own closed
// network, and times them until the last serves; then takes them down.
func solos(ctx context.Context, cfg func(string) cluster.Config) (time.Duration, error) {
	start := time.Now()
	cs := make([]*cluster.Cluster, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range cs {
		wg.Go(func() { cs[i], errs[i] = cluster.Up(ctx, cfg(fmt.Sprintf("solo%d", i+1)), 1) })
	}
	wg.Wait()
	took := time.Since(start)
	for _, c := range cs {
		if c != nil {
			if err := c.Down(ctx, time.Minute); err != nil {
				fmt.Fprintln(os.Stderr, "down solo:", err)
			}
		}
	}
	return took, errors.Join(errs...)
}

// upTimed brings a cluster of n nodes up with cfg and times it until it is
// ready.
func upTimed(ctx context.Context, cfg cluster.Config, n int) (*cluster.Cluster, time.Duration, error) {
	start := time.Now()
	c, err := cluster.Up(ctx, cfg, n)
	return c, time.Since(start), err
}

// killAndStart kills the third node of c, times it until the first reports
// it lost, then starts it and times it until the cluster is whole again.
func killAndStart(ctx context.Context, c *cluster.Cluster, u *upFigures) error {
	rows, err := c.Status(ctx)
	if err != nil {
		return err
	}
	u.victim, u.peer = rows[2].Node.Name, rows[0].Node.Name
	if err := c.Kill(ctx, u.victim); err != nil {
		return err
	}
	if u.lost, err = c.WaitPeerLost(ctx, u.peer, rows[2].MemberID); err != nil {
		return err
	}
	start := time.Now()
	if err := c.Start(ctx, u.victim); err != nil {
		return err
	}
	if err := c.WaitReady(ctx, u.victim); err != nil {
		return err
	}
	u.start = time.Since(start)
	return nil
}

// print prints u with the accelerator probe and the fault figures f, whose
// ratios it needs.
func (u upFigures) print(probe qemu.Choice, f figures) {
	fmt.Printf("accelerator probe, uncached:                    %s (%s)\n", probe.Took.Round(10*time.Millisecond), probe)
	fmt.Printf("cluster up, 1 node, until it serves:            %s\n", u.one.Round(100*time.Millisecond))
	fmt.Printf("cluster up, 3 nodes, until 3 voting members:    %s\n", u.three.Round(100*time.Millisecond))
	fmt.Printf("ratio 3 nodes / 1 node:                         %.2fx\n", u.three.Seconds()/u.one.Seconds())
	fmt.Printf("three 1-node clusters up at once, until all serve: %s\n", u.solos.Round(100*time.Millisecond))
	fmt.Printf("ratio 3 nodes / three 1-node at once:           %.2fx (goal <= 1.1x)\n", u.three.Seconds()/u.solos.Seconds())
	fmt.Printf("cluster add, until the new member votes:        %s (seen as learner: %v)\n", u.add.Round(100*time.Millisecond), u.asLearner)
	fmt.Printf("kill %s, until %s reports the peer lost:        %s\n", u.victim, u.peer, u.lost.Round(100*time.Millisecond))
	fmt.Printf("start %s, until the cluster is whole again:     %s (%.2fx the 1-node up)\n", u.victim, u.start.Round(100*time.Millisecond), u.start.Seconds()/u.one.Seconds())
	fmt.Printf("kill of the leader under writes, failover:      %s (%.2fx etcd's election timeout; %d acknowledged puts, porcupine %s)\n",
		f.failover.Round(10*time.Millisecond), f.failover.Seconds()/electionTimeout.Seconds(), f.acked, f.check)
	fmt.Printf("wiped node, start until it votes again:         %s (%.2fx the plain start above)\n", f.wiped.Round(100*time.Millisecond), f.wiped.Seconds()/u.start.Seconds())
	fmt.Printf("cold start of 3 (down, up), until 3 voters:     %s (%.2fx the 1-node up)\n", f.cold.Round(100*time.Millisecond), f.cold.Seconds()/u.one.Seconds())
}

package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/etcdbox/etcdbox/rollout"
)

// kernelMarker is the kernel's first console line of a boot; it names the
// slot (etcdbox.slot=) whose entry systemd-boot started.
const kernelMarker = "Command line: "

// shutdownMarker is the init's last line before it resets the machine:
// etcd stopped, disks synced and unmounted (init/node.go).
const shutdownMarker = "etcdbox: shutdown complete"

// reboot is what one plain reboot measured.
type reboot struct {
	node   string
	leader bool // it led when it was asked to reboot
	// shutdown is the time from the reboot request until the init's last
	// line; kernel until the next kernel's first line (shutdown,
	// firmware, systemd-boot); total until the node API says healthy
	// voter on the same slot, blessed.
	shutdown, kernel, total time.Duration
}

// boot is the part of the reboot after the kernel started.
func (b reboot) boot() time.Duration { return b.total - b.kernel }

// reboots is what the plain reboots measured, and the writer during them.
type reboots struct {
	runs   []reboot
	writer writerFigures
	// watched are the reboots with a watch open on the node: each one's
	// request to shutdown complete (watched.go).
	watched []time.Duration
}

// reboots reboots n nodes one after the other (n1, n2, n3, n1, ...),
// waiting for the whole cluster to be ready before each, under the writer.
func (r *rig) reboots(ctx context.Context, n int, stdout io.Writer) (reboots, error) {
	var out reboots
	w, err := r.startWriter(ctx)
	if err != nil {
		return out, err
	}
	fmt.Fprintf(stdout, "plain reboots (node API reboot -> healthy voter on the same slot), one node after the other, under the writer:\n")
	for i := range n {
		name := r.nodes[i%len(r.nodes)].Name
		c, err := r.waitReady(ctx)
		if err != nil {
			w.Stop(0)
			return out, fmt.Errorf("before rebooting %s: %w", name, err)
		}
		b, err := r.reboot(ctx, name)
		if err != nil {
			w.Stop(0)
			return out, fmt.Errorf("reboot %s: %w", name, err)
		}
		b.leader = c.LeaderName() == name
		out.runs = append(out.runs, b)
		fmt.Fprintf(stdout, "  %s (%s): %s (request -> shutdown complete %s, -> kernel %s, kernel -> healthy voter %s)\n",
			name, role(b.leader), secs(b.total), secs(b.shutdown), secs(b.kernel), secs(b.boot()))
	}
	out.writer = r.stopWriter(w)
	s := rebootSummary(out.runs)
	fmt.Fprintf(stdout, "  reboot, request -> healthy voter: %s\n", s.total.Format("%.1fs"))
	fmt.Fprintf(stdout, "  reboot, kernel -> healthy voter:  %s\n", s.boot.Format("%.1fs"))
	fmt.Fprintf(stdout, "  reboot, request -> shutdown complete: %s\n", s.shutdown.Format("%.1fs"))
	fmt.Fprintf(stdout, "  writer during the reboots: %s\n", out.writer)
	return out, nil
}

// reboot asks node to reboot and waits until it is a healthy voter on the
// slot it left, blessed: what the roll waits for after a reboot
// (rollout.Judge), less the new slot.
func (r *rig) reboot(ctx context.Context, node string) (reboot, error) {
	b := reboot{node: node}
	api := r.apis[node]
	vm, err := r.c.VM(node)
	if err != nil {
		return b, err
	}
	st, err := api.Status(ctx)
	if err != nil {
		return b, err
	}
	slot := st.Slot
	ctx, cancel := context.WithTimeout(ctx, rebootDeadline)
	defer cancel()
	mark := vm.Mark()
	start := time.Now()
	if err := api.Reboot(ctx); err != nil {
		return b, err
	}
	down, err := vm.WaitConsole(ctx, mark, shutdownMarker)
	if err != nil {
		return b, fmt.Errorf("waiting for the shutdown: %w", err)
	}
	b.shutdown = time.Since(start)
	m, err := vm.WaitConsole(ctx, down.Next, kernelMarker)
	if err != nil {
		return b, fmt.Errorf("waiting for the kernel: %w", err)
	}
	b.kernel = time.Since(start)
	if !strings.Contains(m.Line, "etcdbox.slot="+slot) {
		return b, fmt.Errorf("booted another slot than %s: %s", slot, m.Line)
	}
	last := ""
	for {
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		st, err := api.Status(sctx)
		scancel()
		out, why := rollout.Judge(st, err, slot, slot, start, time.Now())
		if out == rollout.Upgraded {
			b.total = time.Since(start)
			return b, nil
		}
		last = why
		if err := sleep(ctx, r.poll); err != nil {
			return b, fmt.Errorf("%w (last seen: %s)", err, last)
		}
	}
}

func role(leader bool) string {
	if leader {
		return "leader"
	}
	return "follower"
}

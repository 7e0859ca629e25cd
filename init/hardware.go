package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/etcdbox/etcdbox/init/power"
	"github.com/etcdbox/etcdbox/init/storage"
	"github.com/etcdbox/etcdbox/init/supervise"
)

// armWatchdog opens /dev/watchdog when the machine has one and feeds it
// from here on, while every liveness source beats in time (node.heart):
// the boot step running, the etcd supervisor. A hung loop stops the
// feeding and the machine resets.
func (n *node) armWatchdog(context.Context) error {
	if _, err := os.Stat("/dev/watchdog"); err != nil {
		return fmt.Errorf("no hardware watchdog: %w", err)
	}
	w := &power.Watchdog{Timeout: 30 * time.Second, Log: n.log.Printf}
	if err := w.Start(); err != nil {
		return err
	}
	n.dog = w
	return nil
}

// heart registers a liveness source with the hardware watchdog
// (power.Watchdog.Source): a loop that must Beat at least every
// maxSilence, and Stop when it ends. Without a watchdog (none on the
// machine, not armed yet, container mode) it returns a nil Heart, which
// does nothing.
func (n *node) heart(name string, maxSilence time.Duration) *power.Heart {
	w, _ := n.dog.(*power.Watchdog)
	return w.Source(name, maxSilence)
}

type stepHeartKey struct{}

// beatStep tells the watchdog that the boot step running with ctx is
// alive: a step that waits legitimately for longer than its budget (a
// retry loop) calls it on each turn. Outside a step it does nothing.
func beatStep(ctx context.Context) {
	if h, ok := ctx.Value(stepHeartKey{}).(*power.Heart); ok {
		h.Beat()
	}
}

// watchPowerButton turns an ACPI power button press into a shutdown.
func (n *node) watchPowerButton(ctx context.Context) error {
	b := &power.PowerButton{Log: n.log.Printf}
	ch, err := b.Watch(ctx)
	if err != nil {
		return err
	}
	supervise.Go(ctx, "power button", n.log.Printf, func(context.Context) {
		for range ch {
			n.requestShutdown("power button pressed", false)
		}
	})
	return nil
}

// prepareData finds DATA, formats it on first boot, checks it, grows it to
// the disk's end, and mounts it. DATA that is not ext4 and not the blank
// placeholder, or that e2fsck cannot preen, is reported and the node
// waits: it never formats what it did not create.
func (n *node) prepareData(ctx context.Context) error {
	rep, err := storage.PrepareData(ctx, storage.Options{
		Target: n.root,
		Tools:  &storage.Tools{Run: runTool},
		Logf:   n.log.Printf,
	})
	if errors.Is(err, storage.ErrUnknownData) || errors.Is(err, storage.ErrNeedsRepair) {
		return fmt.Errorf("%w: %w", err, errWait)
	}
	if err != nil {
		return err
	}
	n.mounts = append(n.mounts, n.root)
	n.log.Printf("DATA: %s, %d MiB filesystem (formatted %v, partition grown %v, filesystem grown %v)",
		rep.Dev, rep.FSBytes>>20, rep.Formatted, rep.PartitionGrown, rep.FSGrown)
	return nil
}

// runTool runs a tool of the image (supervise.RunTool) with the minimal
// environment the init gives every tool.
func runTool(name string, args ...string) ([]byte, int, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin", "LANG=C"}
	return supervise.RunTool(context.Background(), cmd)
}

// unmountAll syncs and unmounts what init mounted, in reverse order.
func (n *node) unmountAll() {
	if err := power.Unmount(n.mounts, n.log.Printf); err != nil {
		n.log.Printf("unmount: %v", err)
	}
}

// halt powers off or reboots. It returns only if the kernel refused.
func halt(reboot bool) {
	a := power.PowerOff
	if reboot {
		a = power.Reboot
	}
	if err := power.Halt(a); err != nil {
		fmt.Fprintf(os.Stderr, "etcdbox: %s: %v\n", a, err)
	}
	select {}
}

package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/etcdbox/etcdbox/init/power"
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

// armLateWatchdog arms the hardware watchdog after the other drivers,
// when "arm watchdog" found none: on Intel chipsets the TCO watchdog's
// device is added by another driver's probe (lpc_ich's, or i2c_i801's),
// so iTCO_wdt loads only in the coldplug, after the early step looked.
// Without it, a hang in a slot on probation would never end in the old
// slot on such a machine. A watchdog armed early is left as it is.
func (n *node) armLateWatchdog(ctx context.Context) error {
	if n.dog != nil {
		return nil
	}
	return n.armWatchdog(ctx)
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

// haltWord names what the shutdown ends in, for its log lines.
func haltWord(reboot, kexec bool) string {
	switch {
	case kexec:
		return "kexec"
	case reboot:
		return "reboot"
	}
	return "power-off"
}

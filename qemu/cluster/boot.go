package cluster

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/etcdbox/etcdbox/qemu"
)

// GuestSilence bounds how long a started VM may write nothing to its
// console, per accelerator. Under KVM the firmware prints within a
// second; a guest that prints nothing at all never ran, which is what a
// host does whose KVM opens but runs no guest code. Under emulation the
// firmware's first line was seen after 10 s with three VMs booting on a
// loaded 2-core machine, so TCG gets a wide margin.
var GuestSilence = map[string]time.Duration{qemu.AccelKVM: 20 * time.Second, qemu.AccelTCG: 2 * time.Minute}

// resolveAccel chooses the accelerator once, from Config.Accel,
// $ETCDBOX_ACCEL or the probe, and says which and why.
func (c *Cluster) resolveAccel(ctx context.Context) error {
	if c.accel != nil {
		return nil
	}
	ch, err := qemu.ChooseAccel(ctx, c.cfg.Accel)
	if err != nil {
		return err
	}
	c.accel = &ch
	c.cfg.Log("%s", ch)
	return nil
}

// Accel returns the accelerator the cluster's VMs start with and why
// (the zero Choice before the first boot of this process).
func (c *Cluster) Accel() qemu.Choice {
	if c.accel == nil {
		return qemu.Choice{}
	}
	return *c.accel
}

// boot starts the nodes' VMs in parallel, records them in the state, and
// returns once each has written to its console, or names those that
// stayed silent for their GuestSilence.
func (c *Cluster) boot(ctx context.Context, seedImg string, nodes ...Node) error {
	if err := c.resolveAccel(ctx); err != nil {
		return err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs *multierror.Error
	)
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := c.vmConfig(n, seedImg)
			cfg.Accel = c.accel.Accel
			vm, err := qemu.Start(ctx, cfg)
			mu.Lock()
			if err != nil {
				errs = multierror.Append(errs, err)
				mu.Unlock()
				return
			}
			c.vms[n.Name] = vm
			c.cfg.Log("%s: started at %s (pid %d, accel %s); console %s", n.Name, n.IP, vm.PID(), vm.Accel(), vm.ConsolePath())
			mu.Unlock()
			if err := c.waitOutput(ctx, vm); err != nil {
				mu.Lock()
				errs = multierror.Append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for i, n := range c.st.Nodes {
		if vm, ok := c.vms[n.Name]; ok {
			c.st.Nodes[i].PID, c.st.Nodes[i].QMP, c.st.Nodes[i].Console = vm.PID(), vm.QMPPath(), vm.ConsolePath()
		}
	}
	if err := c.save(); err != nil {
		errs = multierror.Append(errs, err)
	}
	return errs.ErrorOrNil()
}

// waitOutput waits until vm's console has its first bytes.
func (c *Cluster) waitOutput(ctx context.Context, vm *qemu.VM) error {
	start := time.Now()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	silence := GuestSilence[vm.Accel()]
	deadline := time.NewTimer(silence)
	defer deadline.Stop()
	for {
		if fi, err := os.Stat(vm.ConsolePath()); err == nil && fi.Size() > 0 {
			c.cfg.Log("%s: first console output after %s", vm.Name(), time.Since(start).Round(10*time.Millisecond))
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: wait for console output: %w", vm.Name(), ctx.Err())
		case <-vm.Done():
			return fmt.Errorf("%s: %w before it wrote to its console; %s:\n%s", vm.Name(), qemu.ErrExited, vm.Dir(), tailFile(vm.Dir()+"/qemu.log", 10))
		case <-deadline.C:
			other := qemu.AccelTCG
			if vm.Accel() == qemu.AccelTCG {
				other = qemu.AccelKVM
			}
			return fmt.Errorf("%s: the VM wrote nothing to its console in %s, so the guest never ran (%s); try --accel %s or %s=%s",
				vm.Name(), silence, c.accel, other, qemu.AccelEnv, other)
		case <-t.C:
		}
	}
}

// reachedInit reports whether the VM's current run got as far as the
// init, which is what answers the ACPI power button.
func reachedInit(vm *qemu.VM) bool { return strings.Contains(vm.Console(), "etcdbox: ") }

// stopVM powers vm off: the power button and up to grace for the guest to
// power off, except for a guest that never reached the init: nothing in
// it would answer the button, so QEMU quits at once.
func (c *Cluster) stopVM(ctx context.Context, vm *qemu.VM, grace time.Duration) error {
	if !reachedInit(vm) {
		c.cfg.Log("%s: never reached the init; quitting qemu without waiting for an ACPI power-off", vm.Name())
		if err := vm.Quit(ctx); err != nil {
			vm.Kill()
		}
		return vm.Wait(ctx)
	}
	return vm.Stop(ctx, grace)
}

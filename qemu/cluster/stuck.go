package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/etcdbox/etcdbox/qemu"
)

// BootLimit bounds, per accelerator, how long a VM this process started
// may take from its start to the kernel's handing over to the init. Under
// emulation the init starts 5-15 s after QEMU does, 30 s with four VMs
// booting on a loaded 2-core machine; a guest past the limit is stuck in
// the firmware, the boot loader or the kernel, none of which is ours.
var BootLimit = map[string]time.Duration{qemu.AccelKVM: time.Minute, qemu.AccelTCG: 3 * time.Minute}

// bootLimit is BootLimit's bound for accel, the emulator's for any other.
func bootLimit(accel string) time.Duration {
	if d, ok := BootLimit[accel]; ok {
		return d
	}
	return BootLimit[qemu.AccelTCG]
}

// initStarted are the console lines that show the kernel ran the init:
// the kernel's own, and any of the init's (in case the kernel's log level
// hides the first).
var initStarted = []string{"Run /init as init process", "etcdbox: "}

// errStuckBoot marks a guest that twice never got to its init.
var errStuckBoot = errors.New("never got from power-on to the init")

// watchBoot presses the reset button of vm, which this process started,
// when it does not get to its init within limit, and reports an error
// when it does not after the reset either. That is what an operator does
// with a machine that hangs before its operating system runs. CI saw it
// once, under emulation: a node added to a running cluster never got to
// its init in five minutes, and nothing else failed. Only the part of the
// boot that is not etcdbox's is watched: a hang in the init is for the
// node's own watchdog, and the tests that show the watchdog are
// unaffected, since their hangs come after the init started.
func (c *Cluster) watchBoot(ctx context.Context, vm *qemu.VM, limit time.Duration) error {
	var from int64
	for try := 1; ; try++ {
		wctx, cancel := context.WithTimeout(ctx, limit)
		_, err := vm.WaitConsole(wctx, from, initStarted...)
		cancel()
		switch {
		case err == nil, ctx.Err() != nil, errors.Is(err, qemu.ErrExited):
			return nil // started, the wait is over, or watchConsole reports the exit
		case try == 2:
			return fmt.Errorf("%s: %w in %s, twice (reset once); its console ends %s",
				vm.Name(), errStuckBoot, limit, consoleEnd(vm.Console(), 3))
		}
		c.cfg.Log("%s: no sign of the init %s after it started (firmware, boot loader or kernel hung); last console lines (%s):\n%s",
			vm.Name(), limit, vm.ConsolePath(), vm.ConsoleTail(20))
		from = vm.Mark()
		if err := vm.Reset(ctx); err != nil {
			return fmt.Errorf("%s: %w in %s, and the reset failed: %v", vm.Name(), errStuckBoot, limit, err)
		}
		c.cfg.Log("%s: pressed its reset button; it gets %s more", vm.Name(), limit)
	}
}

package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/etcdbox/etcdbox/init/kmod"
)

// explicitModules have no modalias a device announces, or must be there
// before devices probe: the filesystems, the power button's input device
// and the module parameters' consumers.
var explicitModules = []string{"ext4", "vfat", "isofs", "nls_cp437", "nls_iso8859_1", "nls_ascii", "evdev", "button", "efivarfs"}

// loadModules coldplugs the drivers of the devices present, by modalias,
// with the modules nothing announces, modules that need nothing of each
// other going in at once (kmod.DefaultParallel). Failures are logged, not
// fatal: a missing driver shows up as a missing disk or NIC a step later,
// with a clearer error there. The log names the slowest inserts: a driver
// that waits long for its devices (ahci for SATA links, on a server with
// many ports) shows there.
func (n *node) loadModules(context.Context) error {
	l, err := n.moduleLoader()
	if err != nil {
		return err
	}
	loaded, err := l.Coldplug("/sys", explicitModules...)
	var slow []string
	for _, t := range l.Slowest(3) {
		slow = append(slow, fmt.Sprintf("%s %s", t.Module, t.Took.Round(time.Millisecond)))
	}
	n.log.Printf("modules: loaded %d: %s (slowest: %s)", len(loaded), strings.Join(loaded, " "), strings.Join(slow, ", "))
	if err != nil {
		return fmt.Errorf("modules: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return nil
}

// moduleLoader returns the boot's module loader, made on first use: the
// watchdog's step and the coldplug share it, so what the first loaded the
// second skips.
func (n *node) moduleLoader() (*kmod.Loader, error) {
	if n.kmod != nil {
		return n.kmod, nil
	}
	dir, err := kmod.DefaultDir()
	if err != nil {
		return nil, err
	}
	n.kmod = &kmod.Loader{Dir: dir, Logf: n.log.Printf, Params: withDefaultParams(moduleParams(n.cmdline)), Events: kmod.KernelEvents}
	return n.kmod, nil
}

// loadWatchdogDriver loads the drivers of the watchdog devices present
// (the modules under drivers/watchdog/ that a device's modalias matches,
// with the watchdog core and its defaultParams), before every other
// driver, so that "arm watchdog" runs before the others probe.
//
// Until the init arms it, a watchdog is unwatched: its driver's probe
// stops a timer left running (the one a kexec hands over, see
// defaultParams), and nothing feeds or starts it. When the watchdog came
// in with all the other drivers, a probe that hung after its driver's
// (virtio-net's, in a kernel just kexec'd into, is where one node of a
// chaos run hung in the old kernel) left the machine hung for good; now
// the init's watchdog, armed first, resets it once the module step
// outlives its budget. A machine with none loads nothing here.
func (n *node) loadWatchdogDriver(context.Context) error {
	l, err := n.moduleLoader()
	if err != nil {
		return err
	}
	loaded, err := l.LoadPresent("/sys", isWatchdogDriver)
	if len(loaded) > 0 {
		n.log.Printf("modules: loaded %s", strings.Join(loaded, " "))
	}
	return err
}

// isWatchdogDriver tells a watchdog driver by where the kernel keeps it.
func isWatchdogDriver(_, path string) bool {
	return strings.Contains(path, "/drivers/watchdog/")
}

// defaultParams are module parameters the init sets unless the kernel
// command line sets the same one (module.param=value).
//
// watchdog.stop_on_reboot=0: the watchdog core stops, on every restart
// (kexec included, in kernel_restart_prepare's reboot notifiers, before
// the devices shut down), each watchdog its driver marks stop-on-reboot,
// as i6300esb, iTCO_wdt and most do. The init leaves the watchdog armed
// for a kexec (power.Watchdog.Handover) so that a hang in the jump or in
// the next kernel's boot, before its init feeds the watchdog again, ends
// in a firmware reset and the old slot; the kernel stopped it first. (In
// the next kernel, i6300esb's probe stops it again, as the init loads its
// driver; the init arms it right after, before the other drivers.) A
// chaos run (session 34) saw the old kernel hang in virtio_net's receive
// poll during a kexec, a soft lockup that the watchdog never ended. The
// plain reboot and power-off paths disarm the watchdog themselves (magic
// close) before they halt, so this changes only what is left armed: the
// kexec, and a device without magic close, which is fed to the end and
// now keeps running through a firmware reboot too (i6300esb, the
// watchdog driver the image carries by default, has magic close).
var defaultParams = map[string]string{"watchdog": "stop_on_reboot=0"}

// withDefaultParams adds defaultParams to params, a parameter the kernel
// command line set winning.
func withDefaultParams(params map[string]string) map[string]string {
	for mod, kvs := range defaultParams {
		for _, kv := range strings.Fields(kvs) {
			name, _, _ := strings.Cut(kv, "=")
			set := slices.ContainsFunc(strings.Fields(params[mod]), func(w string) bool {
				k, _, _ := strings.Cut(w, "=")
				return k == name
			})
			if set {
				continue
			}
			if params[mod] != "" {
				params[mod] += " "
			}
			params[mod] += kv
		}
	}
	return params
}

// moduleParams collects module.param=value words of the kernel command
// line by module name.
func moduleParams(cmdline map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range cmdline {
		mod, param, ok := strings.Cut(k, ".")
		if !ok || mod == "etcdbox" || strings.ContainsAny(mod, "/=") {
			continue
		}
		kv := param
		if v != "" {
			kv += "=" + v
		}
		if out[mod] != "" {
			out[mod] += " "
		}
		out[mod] += kv
	}
	return out
}

package main

import (
	"context"
	"fmt"
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
	dir, err := kmod.DefaultDir()
	if err != nil {
		return err
	}
	l := &kmod.Loader{Dir: dir, Logf: n.log.Printf, Params: moduleParams(n.cmdline), Events: kmod.KernelEvents}
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

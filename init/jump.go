package main

import (
	"fmt"
	"time"

	"github.com/etcdbox/etcdbox/init/power"
	"github.com/etcdbox/etcdbox/init/slot"
)

// kexecKey on the kernel command line, "off", keeps every reboot of the
// node on the firmware path, for machines whose devices do not come back
// after a kexec.
const kexecKey = "etcdbox.kexec"

// jumpPlan is a kexec that the shutdown takes instead of a firmware
// reboot: the next slot's kernel is loaded and its try counted.
type jumpPlan struct {
	ready bool
	slot  string
}

// planJump decides, with etcd stopped and the ESP still mounted, whether
// the reboot jumps into the next slot with kexec, and prepares the jump:
// only into a freshly armed slot (slot.PlanJump), by the upgrade path's
// reboot. It loads the slot's kernel, initrd and command line, and then
// counts the try on the ESP as systemd-boot would have (slot.CountTry),
// so a panic, a hang or a failed gate in the new slot ends in the
// firmware with one try fewer, and at none left in the old slot. Any
// refusal or failure leaves the reboot to the firmware, which boots the
// same slot, counting the try itself; the reason is logged.
func (n *node) planJump(noKexec bool) jumpPlan {
	if n.container || n.esp == "" {
		return jumpPlan{}
	}
	firmware := func(why string, args ...any) jumpPlan {
		n.log.Printf("reboot: through the firmware: "+why, args...)
		return jumpPlan{}
	}
	switch {
	case noKexec:
		return firmware("as asked (no kexec)")
	case n.cmdline[kexecKey] == "off":
		return firmware("%s=off", kexecKey)
	}
	st, err := slot.Read(n.esp)
	if err != nil {
		return firmware("%v", err)
	}
	j, why := slot.PlanJump(st, n.bootedSlot())
	if why != "" {
		return firmware("%s", why)
	}
	// What the staging loaded ahead is used only for the same slot,
	// command line and recorded boot files (jumpload.go); an unreadable
	// record loads again.
	if n.jumps == nil { // an ESP set without mountESP
		n.jumps = newJumpLoad(n.esp, n.log.Printf)
	}
	rec, err := slot.ReadImage(n.esp, j.Slot)
	if err != nil {
		n.log.Printf("reboot: slot %s's record: %v; loading its kernel now", j.Slot, err)
		rec = slot.Image{}
	}
	loaded, took, err := n.jumps.ensure(keyOf(j.Slot, j.Cmdline, rec))
	if err != nil {
		return firmware("%v", err)
	}
	how := "its kernel and initrd loaded ahead, at staging"
	if loaded {
		how = fmt.Sprintf("its kernel and initrd loaded in %s", took.Round(time.Millisecond))
	}
	file, err := slot.CountTry(n.esp, j.Slot)
	if err != nil {
		// The loaded kernel stays unused: a firmware reboot does not
		// run it.
		return firmware("%v", err)
	}
	n.log.Printf("reboot: kexec into slot %s, its try counted as systemd-boot counts it (%s -> %s); %s", j.Slot, j.Entry.File, file, how)
	return jumpPlan{ready: true, slot: j.Slot}
}

// jump hands the watchdog over to the next kernel and jumps. It returns
// only when the kernel refused the jump; the caller then reboots through
// the firmware, which counts one more try of the slot.
func (n *node) jump(j jumpPlan) {
	if n.dog != nil {
		n.dog.Handover()
	}
	err := power.Halt(power.Kexec)
	n.log.Printf("reboot: kexec into slot %s: %v; through the firmware, which counts one more try of it", j.slot, err)
	if n.dog != nil {
		if err := n.dog.Close(); err != nil {
			n.log.Printf("watchdog: %v", err)
		}
	}
}

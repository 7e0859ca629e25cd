package slot

import (
	"fmt"
)

// A Jump is a boot of a freshly armed slot without the firmware: the init
// loads the slot's kernel and initrd with kexec and jumps into them,
// skipping the firmware and systemd-boot (about half of a reboot under
// emulation). What systemd-boot would have done before it booted the
// entry, the init does first (CountTry), so the slot's boot assessment
// keeps its meaning: the jump is one try of the slot, and a kernel panic,
// a watchdog reset or a failed gate in it reboots through the firmware,
// where systemd-boot sees one try fewer and, at none left, boots the old
// slot.
type Jump struct {
	// Slot is the slot jumped into.
	Slot string
	// Kernel and Initrd are the slot's boot files, as ESP paths.
	Kernel, Initrd string
	// Cmdline is the entry's kernel command line (its options), as
	// systemd-boot passes it.
	Cmdline string
	// Entry is the slot's entry before the try is counted.
	Entry Entry
}

// PlanJump returns the jump a reboot of a node booted from booted may
// take instead of the firmware: only into the slot systemd-boot boots
// next (State.Next), when that is the other slot, complete, and armed and
// never tried (Entry.Untried) — the slot an upgrade has just armed. Any
// other reboot (into the running slot, back to the old slot after a
// failed gate, a slot that was tried already) goes through the firmware,
// and the reason says why.
func PlanJump(st State, booted string) (Jump, string) {
	next := st.Next()
	switch {
	case Other(booted) == "":
		return Jump{}, "booted from no slot"
	case next == "":
		return Jump{}, "no slot boots next"
	case next == booted:
		return Jump{}, "the next boot is the running slot " + booted
	}
	s := st.Slots[next]
	switch {
	case !s.Complete():
		return Jump{}, "slot " + next + " is not complete"
	case len(s.Extra) > 0:
		return Jump{}, "slot " + next + " has leftover entries"
	case !s.Entry.Untried():
		return Jump{}, fmt.Sprintf("slot %s is %s (%s), not freshly armed", next, s.Status(), s.Entry.File)
	}
	return Jump{
		Slot:    next,
		Kernel:  kernelPath(next),
		Initrd:  initrdPath(next),
		Cmdline: s.Entry.Options,
		Entry:   *s.Entry,
	}, ""
}

// CountTry counts one try of slot's entry exactly as systemd-boot does
// right before it boots a counted entry: etcdbox-<slot>+LEFT-DONE.conf
// becomes +(LEFT-1)-(DONE+1), LEFT never below 0 (+3 becomes +2-1, +1-2
// becomes +0-3, and +0-3, booted when every entry is bad, +0-4). An entry
// without a counter is left alone, as systemd-boot leaves it. It returns
// the entry's new file name. One rename, so a power cut leaves either
// name, and either is a valid state: uncounted, the next boot tries the
// slot again.
func CountTry(fsys FS, slot string) (string, error) {
	var file string
	err := rename(fsys, slot, func(n Name) Name {
		if n.Counted {
			n.Left = max(n.Left-1, 0)
			n.Done = min(n.Done+1, maxTries)
		}
		file = n.String()
		return n
	})
	if err != nil {
		return "", fmt.Errorf("count a try of slot %s: %w", slot, err)
	}
	return file, nil
}

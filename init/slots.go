package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/etcdbox/etcdbox/init/slot"
	"github.com/etcdbox/etcdbox/init/storage"
	"github.com/etcdbox/etcdbox/init/supervise"
)

// espMount is where the init mounts the ESP, read-write: the slots live
// there, and blessing a slot is a rename of its boot entry.
const espMount = "/boot/efi"

// mountESP finds the ESP by its GPT name and mounts it with the kernel's
// vfat driver.
func (n *node) mountESP(ctx context.Context) error {
	n.disksBy = time.Now().Add(diskWait)
	wctx, cancel := context.WithDeadline(ctx, n.disksBy)
	defer cancel()
	dev, _, _, err := storage.WaitForLabel(wctx, "/sys/class/block", storage.ESPLabel)
	if err != nil {
		return fmt.Errorf("find ESP: %w", err)
	}
	n.checkESP(ctx, fsckFAT, dev)
	if err := os.MkdirAll(espMount, 0o700); err != nil {
		return err
	}
	if err := storage.Mount(dev, espMount, "vfat", "nodev,nosuid,noexec,umask=0077,flush"); err != nil {
		return err
	}
	n.mounts = append(n.mounts, espMount)
	n.esp = slot.Dir(espMount)
	n.jumps = newJumpLoad(n.esp, n.log.Printf)
	st, err := slot.Read(n.esp)
	if err != nil {
		return err
	}
	n.log.Printf("slots: booted %s; %s", n.bootedSlot(), describeSlots(st))
	n.probation = n.probationIn(st)
	return nil
}

// fsckFAT is dosfstools' checker in the initramfs.
const fsckFAT = "/usr/sbin/fsck.fat"

// fsckTimeout bounds the check of the ESP (well under a second for its
// dozen files, even in software emulation).
const fsckTimeout = 2 * time.Minute

// checkESP runs fsck.fat -a (repair what it can, ask nothing) on the ESP
// before it is mounted. The slots' protocol writes and renames files on
// FAT, and vfat's rename is not atomic: a power cut can leave two names
// for one file, a lost chain, or a wrong free count, and the kernel's vfat
// would then write over clusters a boot file still uses. Whatever the
// check says is logged and the ESP is mounted anyway: the firmware boots
// from it regardless, and the slot state read next decides what to do.
func (n *node) checkESP(ctx context.Context, bin, dev string) {
	ctx, cancel := context.WithTimeout(ctx, fsckTimeout)
	defer cancel()
	cmd := exec.Command(bin, "-a", "-w", dev)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin", "LANG=C"}
	out, code, err := supervise.RunTool(ctx, cmd)
	switch {
	case err == nil && code == 0:
		return
	case err == nil && code == 1:
		n.log.Printf("ESP %s: fsck.fat repaired it: %s", dev, oneLine(fsckNoise(out)))
	case err == nil:
		n.log.Printf("ESP %s: fsck.fat: exit status %d: %s (mounting it anyway)", dev, code, oneLine(fsckNoise(out)))
	default:
		n.log.Printf("ESP %s: fsck.fat: %v: %s (mounting it anyway)", dev, err, oneLine(fsckNoise(out)))
	}
}

// fsckNoise drops what fsck.fat prints about itself rather than the
// volume: the initramfs has no iconv modules, so it says it cannot
// convert codepage 850 and falls back to its own table, before every
// report.
func fsckNoise(out []byte) []byte {
	var keep []string
	for line := range strings.Lines(string(out)) {
		if strings.HasPrefix(line, "Cannot initialize conversion ") || strings.HasPrefix(line, "Using internal CP850 conversion table") {
			continue
		}
		keep = append(keep, line)
	}
	return []byte(strings.Join(keep, ""))
}

// oneLine joins a program's output lines for the log.
func oneLine(b []byte) string {
	return strings.Join(strings.FieldsFunc(string(b), func(r rune) bool { return r == '\n' }), " | ")
}

// noteReached records that the booted slot, on probation, starts step. It
// costs one small write on the ESP per step, only while on probation.
func (n *node) noteReached(step string) {
	if !n.probation {
		return
	}
	// The old slot, booted again after a failure that left no reason,
	// says how far this boot got (slot.LastRollback).
	if err := slot.WriteRecord(n.esp, slot.ReachedRecord(n.bootedSlot()), step); err != nil {
		n.log.Printf("slots: note step %q of slot %s: %v", step, n.bootedSlot(), err)
	}
}

// bootedSlot is the slot the kernel command line names (slot.Booted).
func (n *node) bootedSlot() string {
	s, _ := slot.Booted(n.cmdline, slot.State{})
	return s
}

// onProbation reports whether the booted slot's entry still carries a try
// counter: it has not passed the health gate yet. (systemd-boot renames
// the entry of the last try to +0-N, so a running slot may read "bad".)
func (n *node) onProbation() bool {
	if n.esp == "" || n.bootedSlot() == "" {
		return false
	}
	st, err := slot.Read(n.esp)
	if err != nil {
		return false
	}
	return n.probationIn(st)
}

// probationIn reports whether the booted slot's entry in st still carries
// a try counter.
func (n *node) probationIn(st slot.State) bool {
	_, trying := slot.Booted(n.cmdline, st)
	return trying
}

func describeSlots(st slot.State) string {
	out := ""
	for _, name := range []string{"a", "b"} {
		s := st.Slots[name]
		if out != "" {
			out += ", "
		}
		gen := 0
		if s.Entry != nil {
			gen = s.Entry.Generation
		}
		out += fmt.Sprintf("%s: %s (generation %d)", name, s.Status(), gen)
	}
	return out
}

// failSlot marks the booted slot bad when it is on probation, so that the
// reboot that follows lands in the other slot at once rather than after
// the remaining tries. It reports whether it did. The reason goes to the
// ESP first (slot.FailedRecord), so that the old slot, booted again, can
// report it and the roll stop with it: a missing record only costs the
// reason.
func (n *node) failSlot(reason string) bool {
	if !n.onProbation() {
		return false
	}
	if err := slot.WriteRecord(n.esp, slot.FailedRecord(n.bootedSlot()), reason); err != nil {
		n.log.Printf("slots: record why slot %s failed: %v", n.bootedSlot(), err)
	}
	if err := slot.MarkBad(n.esp, n.bootedSlot()); err != nil {
		n.log.Printf("slots: mark slot %s bad: %v", n.bootedSlot(), err)
		return false
	}
	n.log.Printf("slot %s rolled back: %s", n.bootedSlot(), reason)
	return true
}

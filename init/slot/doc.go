// Package slot is the A/B slot state machine on the ESP, as the init sees
// it (DESIGN §3, §7). The init mounts the ESP read-write at /boot/efi with
// the kernel's vfat driver and works on it through an FS, normally Dir.
//
// Each slot, "a" or "b", is two files, etcdbox/<slot>/vmlinuz and
// etcdbox/<slot>/initrd, and one systemd-boot entry,
// loader/entries/etcdbox-<slot>[+LEFT[-DONE]].conf. systemd-boot's
// automatic boot assessment does the rest: it boots the entry with the
// highest "version" (the slot's generation) that is not bad, decrementing
// a counted entry's LEFT and incrementing its DONE on every try, and sorts
// an entry whose LEFT reached 0 after the others, so the old slot boots
// again.
//
// An upgrade agent stages the slot the node did not boot from:
//
//	esp := slot.Dir("/boot/efi")
//	st, err := slot.Read(esp)
//	...
//	booted, _ := slot.Booted(cmdline, st)
//	target := slot.Other(booted)
//	entry, err := slot.Stage(esp, target, slot.Update{
//		Kernel:  vmlinuz,
//		Initrd:  initrd,
//		Options: st.Slots[booted].Entry.Options, // Stage sets etcdbox.slot
//	})
//
// and after the reboot the health gate decides:
//
//	if booted, trying := slot.Booted(cmdline, st); trying {
//		if healthy {
//			err = slot.Bless(esp, booted)
//		} else {
//			err = slot.MarkBad(esp, booted) // then reboot into the other slot
//		}
//	}
//
// A roll stages ahead of each node's turn with Update.Hold: the entry is
// written as etcdbox-<slot>+N.held, which systemd-boot does not read, and
// Arm renames it to .conf at the node's turn (Hold is the way back for an
// entry that never booted). So an unplanned reboot, or a roll aborted
// before the node's turn, still boots the running slot.
//
// Stage is idempotent and resumable, and a power cut at any point of it
// leaves the other slot bootable: it never touches the other slot, makes
// the target unbootable first, writes every file to a temporary name and
// renames it, and writes the entry last. Bless and MarkBad are single
// renames, idempotent too.
//
// This package must stay small enough for the init: it does not link
// go-diskfs (a test says so); its tests drive the same state machine on a
// FAT32 image through go-diskfs.
package slot

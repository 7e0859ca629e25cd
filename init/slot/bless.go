package slot

import (
	"errors"
	"fmt"
	"sort"
)

// ErrNoEntry is returned (wrapped) by Bless and MarkBad when the slot has
// no entry.
var ErrNoEntry = errors.New("slot has no entry")

// Bless makes slot's entry permanent: it renames the entry without its
// try counter (etcdbox-b+2-1.conf to etcdbox-b.conf), as
// systemd-bless-boot does, and removes any extra entry of the slot. It
// does nothing when the slot is blessed already.
func Bless(fsys FS, slot string) error {
	if err := rename(fsys, slot, func(n Name) Name { return Name{Slot: n.Slot} }); err != nil {
		return fmt.Errorf("bless slot %s: %w", slot, err)
	}
	return nil
}

// MarkBad makes systemd-boot boot slot's entry only when no other entry is
// left: it renames the entry to +0-DONE, keeping the tries made, as
// systemd-bless-boot does for a bad boot, and removes any extra entry of
// the slot. It does nothing when the slot is bad already. The caller
// reboots: the other slot then boots if it has an entry that is not bad.
func MarkBad(fsys FS, slot string) error {
	err := rename(fsys, slot, func(n Name) Name {
		if n.Status() == Bad {
			return n
		}
		return Name{Slot: n.Slot, Counted: true, Left: 0, Done: n.Done}
	})
	if err != nil {
		return fmt.Errorf("mark slot %s bad: %w", slot, err)
	}
	return nil
}

// rename renames the preferred entry of slot to to(its name), removing
// the slot's other entries first. It reads names only, so that a slot
// with a malformed entry can still be blessed or marked bad.
func rename(fsys FS, slot string, to func(Name) Name) error {
	if Other(slot) == "" {
		return errors.New("unknown slot (want a or b)")
	}
	des, err := fsys.ReadDir(entriesDir)
	if err != nil {
		return err
	}
	type named struct {
		file string
		name Name
	}
	var es []named
	for _, de := range des {
		if de.IsDir() {
			continue
		}
		if n, reason := parseName(de.Name()); reason == "" && n.Slot == slot {
			es = append(es, named{de.Name(), n})
		}
	}
	if len(es) == 0 {
		return ErrNoEntry
	}
	sort.Slice(es, func(i, j int) bool { return less(es[i].name, es[j].name, es[i].file, es[j].file) })
	// Extra entries go first: one of them may hold the target name, and
	// a blessed leftover must not outlive MarkBad.
	for _, e := range es[1:] {
		if err := remove(fsys, entriesDir+"/"+e.file); err != nil {
			return err
		}
	}
	keep := es[0]
	want := to(keep.name)
	if want == keep.name {
		return nil
	}
	target := want.String()
	if err := fsys.Rename(entriesDir+"/"+keep.file, entriesDir+"/"+target); err != nil {
		return fmt.Errorf("rename %s/%s to %s: %w", entriesDir, keep.file, target, err)
	}
	return nil
}

package slot

import (
	"errors"
	"fmt"
	"strings"
)

// A held entry is a staged slot's entry that systemd-boot does not read:
// the same name and content as the entry Stage writes, with heldSuffix
// for ".conf" (etcdbox-b+3.held). A roll stages every node's inactive slot
// ahead of its turn, held, so that an unplanned reboot, or a roll aborted
// before the node's turn, still boots the running slot; at the node's
// turn Arm renames the entry to .conf, a single rename, and the reboot
// tries it. Hold is the way back for an entry that was never tried.
//
// Read reports a held entry in Slot.Held; the slot's Status stays Absent
// (it cannot boot), and Stage removes a held entry with the slot's others.
const heldSuffix = ".held"

// ErrNotHeld is returned (wrapped) by Arm when the slot has no held entry
// and no armed entry that was never tried.
var ErrNotHeld = errors.New("slot has no held entry")

// parseHeldName parses the name of a held entry: etcdbox-<slot>+LEFT.held,
// a counter with tries left and none made.
func parseHeldName(file string) (Name, bool) {
	id, ok := strings.CutSuffix(strings.ToLower(file), heldSuffix)
	if !ok {
		return Name{}, false
	}
	n, reason := parseName(id + entrySuffix)
	if reason != "" || !n.Counted || n.Left == 0 || n.Done != 0 {
		return Name{}, false
	}
	return n, true
}

// heldFile is the file name of the held entry of n.
func heldFile(n Name) string {
	return strings.TrimSuffix(n.String(), entrySuffix) + heldSuffix
}

// Untried says whether the entry was staged and never booted: a counter
// with tries left and none made.
func (e Entry) Untried() bool {
	return e.Name.Counted && e.Name.Left > 0 && e.Name.Done == 0
}

// Arm makes slot's held entry bootable: it renames etcdbox-<slot>+N.held
// to etcdbox-<slot>+N.conf, so that the next boot tries the slot, and
// returns the armed entry. The slot's files must be complete and the
// other slot blessed and complete (ErrNoFallback), as for Stage. Arm
// does nothing to a slot that is armed already and was never tried, so
// that it can be repeated after a lost answer or a power cut.
func Arm(fsys FS, slot string) (Entry, error) {
	e, err := arm(fsys, slot)
	if err != nil {
		return Entry{}, fmt.Errorf("arm slot %s: %w", slot, err)
	}
	return e, nil
}

func arm(fsys FS, slot string) (Entry, error) {
	if Other(slot) == "" {
		return Entry{}, errors.New("unknown slot (want a or b)")
	}
	st, err := Read(fsys)
	if err != nil {
		return Entry{}, err
	}
	if err := checkFallback(st, Other(slot)); err != nil {
		return Entry{}, err
	}
	s := st.Slots[slot]
	if s.Held == nil {
		// Armed already: a repeat, or a power cut after the rename.
		if s.Entry != nil && s.Entry.Untried() && s.Complete() {
			return *s.Entry, nil
		}
		return Entry{}, fmt.Errorf("%w (slot %s is %s)", ErrNotHeld, slot, s.Status())
	}
	h := *s.Held
	if h.Err != nil {
		return Entry{}, fmt.Errorf("entry %s: %w", h.Path(), h.Err)
	}
	if !s.Kernel || !s.Initrd {
		return Entry{}, fmt.Errorf("slot %s has no complete boot files; stage it again", slot)
	}
	// A counted entry of the slot next to the held one was left by a
	// rename cut short; the held one is what was staged last.
	if s.Entry != nil {
		for _, e := range append([]Entry{*s.Entry}, s.Extra...) {
			if err := remove(fsys, e.Path()); err != nil {
				return Entry{}, err
			}
		}
	}
	armed := h
	armed.File = h.Name.String()
	if err := fsys.Rename(h.Path(), armed.Path()); err != nil {
		return Entry{}, fmt.Errorf("rename %s to %s: %w", h.Path(), armed.File, err)
	}
	return armed, nil
}

// Hold makes slot's armed entry unbootable again, the reverse of Arm: an
// entry that was never tried is renamed to its held name. It does nothing
// to a slot that is held already, and refuses an entry that was tried or
// blessed: that slot has booted, and Stage is the way to replace it.
func Hold(fsys FS, slot string) (Entry, error) {
	e, err := hold(fsys, slot)
	if err != nil {
		return Entry{}, fmt.Errorf("hold slot %s: %w", slot, err)
	}
	return e, nil
}

func hold(fsys FS, slot string) (Entry, error) {
	if Other(slot) == "" {
		return Entry{}, errors.New("unknown slot (want a or b)")
	}
	st, err := Read(fsys)
	if err != nil {
		return Entry{}, err
	}
	s := st.Slots[slot]
	if s.Entry == nil {
		if s.Held != nil {
			return *s.Held, nil
		}
		return Entry{}, fmt.Errorf("%w: slot %s has no entry", ErrNoEntry, slot)
	}
	if !s.Entry.Untried() {
		return Entry{}, fmt.Errorf("slot %s is %s (%s): only a staged entry that never booted can be held", slot, s.Status(), s.Entry.File)
	}
	for _, e := range s.Extra {
		if err := remove(fsys, e.Path()); err != nil {
			return Entry{}, err
		}
	}
	if s.Held != nil && s.Held.File != heldFile(s.Entry.Name) {
		if err := remove(fsys, s.Held.Path()); err != nil {
			return Entry{}, err
		}
	}
	h := *s.Entry
	h.File = heldFile(h.Name)
	if err := fsys.Rename(s.Entry.Path(), h.Path()); err != nil {
		return Entry{}, fmt.Errorf("rename %s to %s: %w", s.Entry.Path(), h.File, err)
	}
	return h, nil
}

// checkFallback returns ErrNoFallback (wrapped) unless slot other is
// blessed and complete: what Stage and Arm need before they make the
// other slot the next to boot.
func checkFallback(st State, other string) error {
	fb := st.Slots[other]
	if fb.Status() == Blessed && fb.Complete() {
		return nil
	}
	why := fmt.Sprintf("slot %s is %s", other, fb.Status())
	switch {
	case fb.Entry != nil && fb.Entry.Err != nil:
		why = fmt.Sprintf("entry %s: %v", fb.Entry.Path(), fb.Entry.Err)
	case fb.Status() == Blessed && !fb.Kernel:
		why = fmt.Sprintf("%s is missing", kernelPath(other))
	case fb.Status() == Blessed && !fb.Initrd:
		why = fmt.Sprintf("%s is missing", initrdPath(other))
	}
	return fmt.Errorf("%w: %s", ErrNoFallback, why)
}

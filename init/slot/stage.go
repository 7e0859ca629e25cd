package slot

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// DefaultTries is the try counter of a staged entry when Update.Tries is
// 0: systemd-boot boots the new slot up to three times before it falls
// back.
const DefaultTries = 3

// ErrNoFallback is returned (wrapped) by Stage when the other slot is not
// a blessed, complete slot: a power cut or a bad image would then leave
// nothing known-good to boot.
var ErrNoFallback = errors.New("no blessed slot to fall back to")

// An Update is what Stage writes into a slot.
type Update struct {
	// Kernel and Initrd are the new slot's vmlinuz and initrd. They are
	// streamed to the ESP; a reader that checks a digest should fail at
	// EOF on a mismatch, and Stage then fails before the entry exists.
	Kernel, Initrd io.Reader
	// Options is the kernel command line, usually the booted slot's
	// Entry.Options; Stage sets its etcdbox.slot to the staged slot. It
	// must carry a non-zero panic= so that a kernel panic reboots into
	// the old slot.
	Options string
	// Tries is the try counter of the new entry; 0 means DefaultTries.
	Tries int
	// Hold writes the entry held (etcdbox-<slot>+N.held): the slot is
	// complete but does not boot until Arm.
	Hold bool
}

// Stage writes u into slot and gives it an entry with a try counter and
// the next generation, so that systemd-boot boots it next (unless
// u.Hold), and returns that entry. The other slot must be blessed and complete (ErrNoFallback)
// and is never touched.
//
// Stage is idempotent and resumable, and a power cut at any point leaves
// the other slot bootable and every bootable entry pointing at complete
// files. In order, each step on the disk before the next:
//
//  1. remove the slot's entries, temporary and malformed ones included, so
//     that what follows cannot be booted half-written;
//  2. remove the slot's old files, so that the ESP holds at most the
//     other slot and the new one (the builder sizes the ESP for two);
//  3. write vmlinuz, then initrd, each to a temporary name and rename it;
//  4. write the entry, etcdbox-<slot>+<tries>.conf, the same way (or
//     etcdbox-<slot>+<tries>.held with Update.Hold; see Arm).
//
// Running Stage again after a failure at any step redoes it from step 1
// and writes the same entry.
func Stage(fsys FS, slot string, u Update) (Entry, error) {
	e, err := stage(fsys, slot, u)
	if err != nil {
		return Entry{}, fmt.Errorf("stage slot %s: %w", slot, err)
	}
	return e, nil
}

func stage(fsys FS, slot string, u Update) (Entry, error) {
	other := Other(slot)
	if other == "" {
		return Entry{}, errors.New("unknown slot (want a or b)")
	}
	options, err := checkUpdate(&u, slot)
	if err != nil {
		return Entry{}, err
	}

	st, err := Read(fsys)
	if err != nil {
		return Entry{}, err
	}
	if err := checkFallback(st, other); err != nil {
		return Entry{}, err
	}
	generation := nextGeneration(st.Slots[other])

	// 1. Make the slot unbootable.
	if err := removeEntries(fsys, slot); err != nil {
		return Entry{}, err
	}
	// 2. Free its space.
	if err := clearFiles(fsys, slot); err != nil {
		return Entry{}, err
	}
	// 3. Boot files.
	if err := writeAtomic(fsys, kernelPath(slot), u.Kernel); err != nil {
		return Entry{}, err
	}
	if err := writeAtomic(fsys, initrdPath(slot), u.Initrd); err != nil {
		return Entry{}, err
	}
	// 4. The entry, last.
	return writeEntry(fsys, slot, generation, options, u)
}

// checkUpdate checks u for slot, setting a zero Tries to DefaultTries, and
// returns the staged entry's options.
func checkUpdate(u *Update, slot string) (options string, err error) {
	if u.Kernel == nil || u.Initrd == nil {
		return "", errors.New("no kernel or initrd given")
	}
	if u.Tries == 0 {
		u.Tries = DefaultTries
	}
	if u.Tries < 1 || u.Tries > maxTries {
		return "", fmt.Errorf("tries %d: want 1 to %d", u.Tries, maxTries)
	}
	return stageOptions(u.Options, slot)
}

// nextGeneration returns the generation of the staged entry given the
// fallback slot fb: one more than the fallback, the highest generation once
// the staged slot's entries are gone. It is the same on every run, however
// far an earlier one got.
func nextGeneration(fb Slot) int {
	generation := fb.Entry.Generation
	for _, e := range fb.Extra {
		if e.Err == nil {
			generation = max(generation, e.Generation)
		}
	}
	return generation + 1
}

// removeEntries removes every entry of slot, temporary and malformed ones
// included, so that it cannot be booted half-written.
func removeEntries(fsys FS, slot string) error {
	des, err := fsys.ReadDir(entriesDir)
	if err != nil {
		return err
	}
	for _, de := range des {
		if !de.IsDir() && inSlot(de.Name(), slot) {
			if err := remove(fsys, entriesDir+"/"+de.Name()); err != nil {
				return err
			}
		}
	}
	return nil
}

// clearFiles removes the old files of slot, so that the ESP holds at most
// the other slot and the new one, and makes sure its directory exists.
func clearFiles(fsys FS, slot string) error {
	dir := path.Dir(kernelPath(slot))
	des, err := fsys.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, de := range des {
		if !de.IsDir() {
			if err := remove(fsys, dir+"/"+de.Name()); err != nil {
				return err
			}
		}
	}
	for _, d := range []string{slotsDir, dir} {
		if err := fsys.Mkdir(d); err != nil {
			return fmt.Errorf("mkdir %s: %w", d, err)
		}
	}
	return nil
}

// writeEntry writes the entry of slot with u.Tries tries left, held with
// u.Hold, and returns it.
func writeEntry(fsys FS, slot string, generation int, options string, u Update) (Entry, error) {
	e := Entry{
		Name:       Name{Slot: slot, Counted: true, Left: u.Tries},
		Generation: generation,
		Options:    options,
	}
	e.File = e.Name.String()
	if u.Hold {
		e.File = heldFile(e.Name)
	}
	text := entryText(slot, generation, options)
	if err := writeAtomic(fsys, e.Path(), strings.NewReader(text)); err != nil {
		return Entry{}, err
	}
	return e, nil
}

// remove removes name; it is already gone when a retry follows a power
// cut that came after the removal.
func remove(fsys FS, name string) error {
	if err := fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	return nil
}

// writeAtomic writes r to name through a temporary file, so that name
// only ever holds complete content.
func writeAtomic(fsys FS, name string, r io.Reader) error {
	tmp := name + tmpSuffix
	if err := fsys.WriteFile(tmp, r); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := fsys.Rename(tmp, name); err != nil {
		return fmt.Errorf("rename %s to %s: %w", tmp, path.Base(name), err)
	}
	return nil
}

// WithSlot returns the kernel command line options with etcdbox.slot set
// to slot: every etcdbox.slot= argument is replaced, or one is appended.
func WithSlot(options, slot string) string {
	arg := "etcdbox.slot=" + slot
	fields := strings.Fields(options)
	found := false
	for i, f := range fields {
		if strings.HasPrefix(f, "etcdbox.slot=") {
			fields[i], found = arg, true
		}
	}
	if !found {
		fields = append(fields, arg)
	}
	return strings.Join(fields, " ")
}

// stageOptions returns the options of a staged entry of slot, checked.
func stageOptions(options, slot string) (string, error) {
	if strings.ContainsFunc(options, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
		return "", fmt.Errorf("options %q: must be one line without control characters", options)
	}
	options = WithSlot(options, slot)
	panicSet := false
	for _, f := range strings.Fields(options) {
		if v, ok := strings.CutPrefix(f, "panic="); ok {
			n, err := strconv.Atoi(v)
			panicSet = err == nil && n != 0
		}
	}
	if !panicSet {
		return "", fmt.Errorf("options %q: want a non-zero panic= so that a kernel panic reboots into the old slot", options)
	}
	return options, nil
}

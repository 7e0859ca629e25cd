package slot

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// An Entry is a slot's systemd-boot entry.
type Entry struct {
	// File is the entry's file name in loader/entries, as on the ESP.
	File string
	// Name is File parsed: slot and try counter.
	Name Name
	// Generation is the entry's "version": systemd-boot boots the
	// highest generation that is not bad.
	Generation int
	// Options is the kernel command line, the "options" line.
	Options string
	// Err says why the entry's content is not what the builder and Stage
	// write (no version, another sort-key, files of another slot...);
	// Generation and Options are then not to be trusted.
	Err error
}

// Path returns the entry's path on the ESP.
func (e Entry) Path() string { return entriesDir + "/" + e.File }

// A Slot is one slot of the ESP.
type Slot struct {
	// Name is "a" or "b".
	Name string
	// Entry is the slot's entry, nil when it has none. When a cut-short
	// rename left several, it is the most preferred (see Extra).
	Entry *Entry
	// Extra holds further entries of the slot, left by a rename cut short
	// by a power loss. Stage, Bless and MarkBad remove them.
	Extra []Entry
	// Held is the slot's held entry (see Arm), nil when it has none: the
	// slot is staged but systemd-boot does not boot it.
	Held *Entry
	// Kernel and Initrd say whether etcdbox/<slot>/vmlinuz and
	// etcdbox/<slot>/initrd exist and are not empty. They are only ever
	// complete: Stage writes them under temporary names and renames.
	Kernel, Initrd bool
}

// Status returns the status of the slot's entry, Absent when it has none.
func (s Slot) Status() Status {
	if s.Entry == nil {
		return Absent
	}
	return s.Entry.Name.Status()
}

// Complete says whether the slot can boot: it has a well-formed entry and
// both boot files.
func (s Slot) Complete() bool {
	return s.Entry != nil && s.Entry.Err == nil && s.Kernel && s.Initrd
}

// An Ignored file is a file in loader/entries that is not a slot entry.
type Ignored struct {
	File   string
	Reason string
}

// State is the slots of an ESP, as Read found them.
type State struct {
	// Slots has the slots "a" and "b".
	Slots map[string]Slot
	// Ignored lists the files of loader/entries that are not slot entries,
	// with the reason.
	Ignored []Ignored
}

// Read reads the slots of the ESP fsys. It fails only when it cannot read
// the ESP; an entry whose content is malformed is reported in its
// Entry.Err.
func Read(fsys FS) (State, error) {
	st := State{Slots: map[string]Slot{}}
	des, err := fsys.ReadDir(entriesDir)
	if err != nil {
		return st, fmt.Errorf("read slots: %w", err)
	}
	bySlot := map[string][]Entry{}
	heldBySlot := map[string]*Entry{}
	for _, de := range des {
		if de.IsDir() {
			continue
		}
		n, reason := parseName(de.Name())
		hn, held := parseHeldName(de.Name())
		if reason != "" && !held {
			st.Ignored = append(st.Ignored, Ignored{File: de.Name(), Reason: reason})
			continue
		}
		if held {
			n = hn
		}
		e := Entry{File: de.Name(), Name: n}
		data, err := fsys.ReadFile(e.Path())
		if err != nil {
			return st, fmt.Errorf("read slots: %w", err)
		}
		e.Generation, e.Options, e.Err = parseEntry(n.Slot, data)
		if held {
			// More than one only after a crash between writes; the
			// last name in order is as good as any: Arm and Stage
			// remove the rest.
			heldBySlot[n.Slot] = &e
			continue
		}
		bySlot[n.Slot] = append(bySlot[n.Slot], e)
	}
	for _, name := range names {
		s := Slot{Name: name, Held: heldBySlot[name]}
		if es := bySlot[name]; len(es) > 0 {
			sort.Slice(es, func(i, j int) bool { return less(es[i].Name, es[j].Name, es[i].File, es[j].File) })
			s.Entry, s.Extra = &es[0], es[1:]
			if len(s.Extra) == 0 {
				s.Extra = nil
			}
		}
		if s.Kernel, s.Initrd, err = slotFiles(fsys, name); err != nil {
			return st, fmt.Errorf("read slots: %w", err)
		}
		st.Slots[name] = s
	}
	return st, nil
}

// slotFiles says whether the slot's vmlinuz and initrd exist, not empty.
func slotFiles(fsys FS, slot string) (kernel, initrd bool, err error) {
	des, err := fsys.ReadDir(path.Dir(kernelPath(slot)))
	if errors.Is(err, fs.ErrNotExist) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	for _, de := range des {
		if de.IsDir() {
			continue
		}
		fi, err := de.Info()
		if err != nil {
			return false, false, err
		}
		if fi.Size() == 0 {
			continue
		}
		// FAT names are case-insensitive; a short name may read back
		// upper case.
		switch {
		case strings.EqualFold(de.Name(), path.Base(kernelPath(slot))):
			kernel = true
		case strings.EqualFold(de.Name(), path.Base(initrdPath(slot))):
			initrd = true
		}
	}
	return kernel, initrd, nil
}

// entryText is the entry Stage writes, in the builder's form
// (image/esp.go).
func entryText(slot string, generation int, options string) string {
	return fmt.Sprintf("title etcdbox (slot %s)\nversion %d\nsort-key %s\nlinux /%s\ninitrd /%s\noptions %s\n",
		slot, generation, sortKey, kernelPath(slot), initrdPath(slot), options)
}

// parseEntry reads the content of an entry of slot and checks that it is
// one the builder or Stage writes: a positive version, the etcdbox
// sort-key, and the slot's own kernel and initrd.
func parseEntry(slot string, data []byte) (generation int, options string, err error) {
	var version, key, linux, initrd string
	var opts []string
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v := line, ""
		if i := strings.IndexAny(line, " \t"); i >= 0 {
			k, v = line[:i], strings.TrimSpace(line[i+1:])
		}
		switch k {
		case "version":
			version = v
		case "sort-key":
			key = v
		case "linux":
			linux = v
		case "initrd":
			if initrd != "" {
				return 0, "", fmt.Errorf("more than one initrd line")
			}
			initrd = v
		case "options":
			// systemd-boot joins several options lines.
			opts = append(opts, v)
		}
	}
	options = strings.Join(opts, " ")
	generation, err = strconv.Atoi(version)
	if err != nil || generation <= 0 {
		return 0, options, fmt.Errorf("version %q: want a generation number above 0", version)
	}
	if key != sortKey {
		return generation, options, fmt.Errorf("sort-key %q: want %q", key, sortKey)
	}
	if want := "/" + kernelPath(slot); !strings.EqualFold(linux, want) {
		return generation, options, fmt.Errorf("linux %q: want %q", linux, want)
	}
	if want := "/" + initrdPath(slot); !strings.EqualFold(initrd, want) {
		return generation, options, fmt.Errorf("initrd %q: want %q", initrd, want)
	}
	return generation, options, nil
}

// Next returns the slot systemd-boot boots next, as loader.conf's
// "default etcdbox-*" makes it choose: the entry with the highest
// generation among those that are not bad, or, when all are bad, the
// highest bad one. It returns "" when no slot has an entry.
func (st State) Next() string {
	var best *Entry
	better := func(e, than *Entry) bool {
		if (e.Name.Status() == Bad) != (than.Name.Status() == Bad) {
			return than.Name.Status() == Bad
		}
		if e.Generation != than.Generation {
			return e.Generation > than.Generation
		}
		// systemd-boot then orders by entry id, descending.
		return e.Name.Slot > than.Name.Slot
	}
	for _, name := range names {
		s := st.Slots[name]
		if s.Entry == nil {
			continue
		}
		for _, e := range append([]Entry{*s.Entry}, s.Extra...) {
			if best == nil || better(&e, best) {
				best = &e
			}
		}
	}
	if best == nil {
		return ""
	}
	return best.Name.Slot
}

// Booted returns the slot the node booted from, the kernel command line's
// etcdbox.slot ("" when it names no slot), and whether that slot is on
// probation: its entry still has a try counter, so the health gate must
// Bless it or MarkBad it. A slot whose counter shows no tries left is
// trying too: systemd-boot writes +0-N before it boots an entry the last
// time.
func Booted(cmdline map[string]string, st State) (slot string, trying bool) {
	slot = cmdline["etcdbox.slot"]
	if Other(slot) == "" {
		return "", false
	}
	e := st.Slots[slot].Entry
	return slot, e != nil && e.Name.Counted
}

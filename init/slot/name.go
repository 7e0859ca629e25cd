package slot

import (
	"fmt"
	"strconv"
	"strings"
)

// Layout of the ESP (CONTRACTS "Disk", DESIGN §3).
const (
	entriesDir  = "loader/entries"
	slotsDir    = "etcdbox"
	entryPrefix = "etcdbox-"
	entrySuffix = ".conf"
	// tmpSuffix marks a file being written. systemd-boot reads only
	// entries ending in .conf, so a temporary entry is never booted.
	tmpSuffix = ".tmp"
	// sortKey is the sort-key of every etcdbox entry: with equal sort
	// keys, systemd-boot orders entries by version, newest first.
	sortKey = "etcdbox"
)

// names are the slots.
var names = [...]string{"a", "b"}

// Other returns the slot that is not slot: "b" for "a", "a" for "b", and
// "" when slot is neither (for instance the empty slot of a node booted
// without etcdbox.slot, or a container).
func Other(slot string) string {
	switch slot {
	case "a":
		return "b"
	case "b":
		return "a"
	}
	return ""
}

// kernelPath and initrdPath are the ESP paths of a slot's boot files.
func kernelPath(slot string) string { return slotsDir + "/" + slot + "/vmlinuz" }
func initrdPath(slot string) string { return slotsDir + "/" + slot + "/initrd" }

// Status is where a slot's entry is in systemd-boot's boot assessment.
type Status int

// The statuses of a slot.
const (
	// Absent: the slot has no entry and cannot boot.
	Absent Status = iota
	// Blessed: the entry has no try counter; it boots for as long as it
	// has the highest generation.
	Blessed
	// Trying: the entry has a counter with tries left. systemd-boot boots
	// it when it has the highest generation, counting a try each time.
	Trying
	// Bad: the entry's counter has no tries left; systemd-boot sorts it
	// after every other entry. Note that systemd-boot renames +1-N to
	// +0-(N+1) before it boots an entry for the last time, so the slot
	// that is running may be Bad by name during its last try.
	Bad
)

func (s Status) String() string {
	switch s {
	case Absent:
		return "absent"
	case Blessed:
		return "blessed"
	case Trying:
		return "trying"
	case Bad:
		return "bad"
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// Name is the parsed file name of a slot's entry:
// etcdbox-<slot>[+LEFT[-DONE]].conf.
type Name struct {
	// Slot is "a" or "b".
	Slot string
	// Counted says the name has a try counter, LEFT and DONE.
	Counted bool
	// Left is the number of tries left, Done the number of tries made.
	Left, Done int
}

// String returns the file name of n. A counter that has made no try is
// written +LEFT, as a freshly staged entry; any other is +LEFT-DONE, as
// systemd-boot and systemd-bless-boot write it (a bad entry that was never
// tried is +0-0).
func (n Name) String() string {
	s := entryPrefix + n.Slot
	switch {
	case !n.Counted:
	case n.Done == 0 && n.Left > 0:
		s += fmt.Sprintf("+%d", n.Left)
	default:
		s += fmt.Sprintf("+%d-%d", n.Left, n.Done)
	}
	return s + entrySuffix
}

// Status returns Blessed, Trying or Bad according to the counter.
func (n Name) Status() Status {
	switch {
	case !n.Counted:
		return Blessed
	case n.Left > 0:
		return Trying
	}
	return Bad
}

// ParseName parses the name of a file in loader/entries. Names are
// matched without regard to case, as FAT does; a name that is not a slot
// entry is an error that says why.
func ParseName(file string) (Name, error) {
	n, reason := parseName(file)
	if reason != "" {
		return Name{}, fmt.Errorf("entry name %q: %s", file, reason)
	}
	return n, nil
}

// parseName is ParseName with the reason a name is rejected, for Read's
// list of ignored files.
func parseName(file string) (Name, string) {
	lower := strings.ToLower(file)
	if strings.HasSuffix(lower, tmpSuffix) {
		return Name{}, "temporary file of an interrupted write"
	}
	id, ok := strings.CutSuffix(lower, entrySuffix)
	if !ok {
		return Name{}, "not a .conf file; systemd-boot does not read it"
	}
	rest, ok := strings.CutPrefix(id, entryPrefix)
	if !ok {
		return Name{}, "not an etcdbox entry"
	}
	slot, counter, counted := strings.Cut(rest, "+")
	if Other(slot) == "" {
		return Name{}, fmt.Sprintf("unknown slot %q (want a or b)", slot)
	}
	n := Name{Slot: slot, Counted: counted}
	if !counted {
		return n, ""
	}
	left, done, hasDone := strings.Cut(counter, "-")
	var err error
	if n.Left, err = parseCount(left); err == nil && hasDone {
		n.Done, err = parseCount(done)
	}
	if err != nil {
		return Name{}, fmt.Sprintf("malformed boot counter %q (want +LEFT or +LEFT-DONE): %v", "+"+counter, err)
	}
	return n, ""
}

// parseCount parses one number of a boot counter: decimal digits only,
// as systemd-boot reads them.
func parseCount(s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("empty number")
	}
	if strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > maxTries {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return n, nil
}

// maxTries bounds the numbers of a counter.
const maxTries = 1 << 16

// inSlot says whether file, a name in loader/entries, belongs to slot:
// its entry under any counter, a temporary entry, or a malformed name in
// the slot's namespace (which systemd-boot would still read, as an
// uncounted entry). Stage removes all of them before it writes the slot.
func inSlot(file, slot string) bool {
	lower := strings.ToLower(file)
	p := entryPrefix + slot
	return strings.HasPrefix(lower, p+"+") || strings.HasPrefix(lower, p+".")
}

// less orders the entries of one slot by preference: blessed, then
// trying, then bad; more tries left, then fewer tries made. A slot has
// more than one entry only after a rename was cut short; the first is the
// one Read reports, and Bless and MarkBad keep.
func less(a, b Name, afile, bfile string) bool {
	rank := func(n Name) int {
		switch n.Status() {
		case Blessed:
			return 0
		case Trying:
			return 1
		}
		return 2
	}
	switch {
	case rank(a) != rank(b):
		return rank(a) < rank(b)
	case a.Left != b.Left:
		return a.Left > b.Left
	case a.Done != b.Done:
		return a.Done < b.Done
	}
	return afile < bfile
}

package backup

import (
	"fmt"
	"os"
)

// Room decides whether a new snapshot of size bytes fits on a filesystem
// with free bytes that must keep reserve bytes free after it, beside the
// kept snapshots (List's order, oldest first). When it does not fit as
// things are, Room names the oldest kept snapshots to drop first, as few
// as make the room. It never names the newest: the new snapshot may
// still fail, and a node keeps one good backup whatever happens. When
// even dropping all the others leaves too little, it drops nothing and
// says so.
func Room(kept []Snapshot, free, size, reserve int64) ([]Snapshot, error) {
	need := size + reserve
	if free >= need {
		return nil, nil
	}
	avail := free
	for i, s := range kept[:max(len(kept)-1, 0)] {
		avail += s.Size
		if avail >= need {
			return kept[:i+1], nil
		}
	}
	msg := fmt.Sprintf("%s free; a snapshot of %s and a reserve of %s need %s", mib(free), mib(size), mib(reserve), mib(need))
	if len(kept) > 1 {
		msg += fmt.Sprintf(", and dropping every kept backup but the newest would free only %s", mib(avail-free))
	}
	return nil, fmt.Errorf("%s", msg)
}

// Remove deletes a kept snapshot and its record.
func Remove(s Snapshot) error {
	if err := os.Remove(s.Path); err != nil {
		return fmt.Errorf("remove snapshot: %w", err)
	}
	os.Remove(s.Path + ".json")
	return nil
}

// mib prints n bytes in whole MiB, rounded up.
func mib(n int64) string { return fmt.Sprintf("%d MiB", (n+1<<20-1)>>20) }

package main

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/etcdbox/etcdbox/init/slowdisk"
)

// blockWatch reads the request counters of the block device under DATA
// at each poll of the slow-disk watch (slowdisk.BlockStat): the cheap
// signal that decides whether etcd's histogram is worth reading.
type blockWatch struct {
	path string // its /sys stat file; "" for none
	last slowdisk.BlockStat
	have bool
}

// dataBlockStat returns the /sys stat file of the block device that holds
// root, "" when there is none (a container's data directory on an overlay
// or tmpfs has no block device).
func dataBlockStat(root string) string {
	var st unix.Stat_t
	if unix.Stat(root, &st) != nil {
		return ""
	}
	dev := uint64(st.Dev) // an int32 on some systems
	p := fmt.Sprintf("/sys/dev/block/%d:%d/stat", unix.Major(dev), unix.Minor(dev))
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// suspect reads the counters and reports whether the requests since the
// last poll say the disk may be slow. Without counters (no device, a read
// that failed) it says yes, so that the histogram decides, as it did
// before the counters were read; the first poll only takes a reading.
func (b *blockWatch) suspect() bool {
	if b.path == "" {
		return true
	}
	raw, err := os.ReadFile(b.path)
	if err != nil {
		b.have = false
		return true
	}
	cur, err := slowdisk.ParseBlockStat(string(raw))
	if err != nil {
		b.have = false
		return true
	}
	win, first := cur.Since(b.last), !b.have
	b.last, b.have = cur, true
	return !first && win.Suspect()
}

// Package slowdisk decides when an etcd leader hands its leadership to a
// follower because its own disk has become slow (DESIGN §5, "A leader on
// a slow disk").
//
// Disk latency is part of a leader's liveness: etcd's leader persists
// every batch of entries to its WAL before it takes the next one, so a
// leader whose syncs take a good part of a second commits a few batches a
// second, and the whole cluster writes that slowly. Yet it still sends
// heartbeats between its syncs, so the followers never elect another:
// etcd stays that way for as long as the disk is slow (a cloud volume out
// of burst credits, a failing drive). Only a sync that stalls for longer
// than the election timeout stops the heartbeats and makes the followers
// elect another leader by themselves. Moving the leadership (etcd's
// MoveLeader, a raft leadership transfer) loses nothing and splits
// nothing: the transferee becomes leader only with the whole log, in a
// new term.
//
// The node's init reads its own member's WAL sync histogram
// (etcd_disk_wal_fsync_duration_seconds: its count and sum) while the
// member leads and its disk's request counters say the disk may be slow
// (BlockStat.Suspect, blockstat.go: the histogram is costly to read).
// When, in a window, the leader made at least MinSyncs syncs
// and they took SlowMean or more on average, its disk is slow (etcd's
// guidance is a 99th percentile under 10 ms; 50 ms per sync holds the
// leader to twenty batches a second at best). It then reads each voting
// follower's histogram twice, a short window apart, and hands the
// leadership to the follower whose syncs were fastest on average, if that
// is under SlowMean and at most a Ratio-th of the leader's. When none
// qualifies (the whole cluster's storage is slow, or every disk is
// saturated alike by the load) it keeps the leadership, since a move
// would only add an election. One node hands off at most once per
// cooldown.
package slowdisk

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Histogram is etcd's WAL sync latency histogram.
const Histogram = "etcd_disk_wal_fsync_duration_seconds"

// The rule's bounds. Measured under software emulation in a 3-node
// cluster under a writer (`etcdbox cluster limit-disk`): a leader whose
// disk was limited to 20 requests a second kept its leadership for five
// minutes, its clients' writes slowed; at 5 requests a second and below,
// syncs took 1-19 s, the heartbeats stalled with them, and the followers
// elected another leader by themselves within seconds. At 10 requests a
// second the leader's syncs averaged 124-295 ms over 10 s in four runs,
// its followers' 4-9 ms; at 20, 104 ms.
const (
	// MinSyncs is the fewest syncs in a window that say anything.
	MinSyncs = 3
	// SlowMean is the mean sync time at and above which a disk is slow.
	SlowMean = 50 * time.Millisecond
	// Ratio is how many times faster than the leader's a follower's mean
	// sync must be to take the leadership.
	Ratio = 4
)

// Syncs counts WAL syncs of one member, since its etcd started or over a
// window: how many, and the seconds they took together.
type Syncs struct {
	All     uint64
	Seconds float64
}

// Parse reads the cumulative Syncs from an etcd /metrics page. A page
// without the histogram, or with values that are not a count and a
// duration, is an error that says so.
func Parse(page string) (Syncs, error) {
	var s Syncs
	var haveAll, haveSum bool
	for line := range strings.Lines(page) {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, Histogram+"_count "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || f < 0 || f != float64(uint64(f)) {
				return Syncs{}, fmt.Errorf("%s_count: %q is not a count", Histogram, v)
			}
			s.All, haveAll = uint64(f), true
		} else if v, ok := strings.CutPrefix(line, Histogram+"_sum "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || f < 0 || f != f {
				return Syncs{}, fmt.Errorf("%s_sum: %q is not a duration in seconds", Histogram, v)
			}
			s.Seconds, haveSum = f, true
		}
	}
	if !haveAll || !haveSum {
		return Syncs{}, fmt.Errorf("no %s_count and _sum on the metrics page", Histogram)
	}
	return s, nil
}

// Since is the syncs between an earlier reading and s. A reading below the
// earlier one means the member's etcd started again (its counters begin
// at zero): then s itself, all of it since that start.
func (s Syncs) Since(earlier Syncs) Syncs {
	if s.All < earlier.All || s.Seconds < earlier.Seconds {
		return s
	}
	return Syncs{All: s.All - earlier.All, Seconds: s.Seconds - earlier.Seconds}
}

// Mean is the mean time of one sync, zero for none.
func (s Syncs) Mean() time.Duration {
	if s.All == 0 {
		return 0
	}
	return time.Duration(s.Seconds*float64(time.Second)) / time.Duration(s.All)
}

// SlowDisk reports whether a window's syncs say the disk is slow.
func (s Syncs) SlowDisk() bool { return s.All >= MinSyncs && s.Mean() >= SlowMean }

// Outpaces reports whether a follower's window (s) shows a disk that can
// take the leadership from a leader whose window is leader: enough syncs,
// under SlowMean on average, and at most a Ratio-th of the leader's mean.
func (s Syncs) Outpaces(leader Syncs) bool {
	return s.All >= MinSyncs && s.Mean() < SlowMean && Ratio*s.Mean() <= leader.Mean()
}

func (s Syncs) String() string {
	return fmt.Sprintf("%d WAL syncs of %s on average", s.All, s.Mean().Round(time.Millisecond))
}

// Follower is a voting follower of the leader, with its syncs over the
// window the leader watched it, or why they could not be read.
type Follower struct {
	ID   uint64
	Name string
	// Window is its syncs in the window; Err why they are unknown.
	Window Syncs
	Err    error
}

// Pick returns the follower to hand the leadership to, given the leader's
// window: of those that outpace it, the one with the fastest syncs (the
// lowest ID on a tie). It reports false when none does.
func Pick(leader Syncs, followers []Follower) (Follower, bool) {
	var ok []Follower
	for _, f := range followers {
		if f.Err == nil && f.Window.Outpaces(leader) {
			ok = append(ok, f)
		}
	}
	if len(ok) == 0 {
		return Follower{}, false
	}
	slices.SortFunc(ok, func(a, b Follower) int {
		return cmp.Or(cmp.Compare(a.Window.Mean(), b.Window.Mean()), cmp.Compare(a.ID, b.ID))
	})
	return ok[0], true
}

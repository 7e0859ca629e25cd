package slowdisk

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The trigger: etcd's histogram is the rule's evidence, but reading it
// costs the member the most of anything the init asks it for. Its
// /metrics page is 190 KB that etcd builds from every metric it keeps:
// about 60 ms of a virtual CPU under software emulation, during which a
// put waits (a 1-client writer saw a put of 70-130 ms every 10 s, one per
// reading, against 13 ms at the median). The kernel counts each block
// device's requests and the milliseconds they took, in a 150-byte
// /sys/dev/block/MAJ:MIN/stat that costs nothing to read. The watch reads
// those every poll, and the histogram only while they say the disk under
// etcd's data may be slow (Suspect): a WAL sync is a write and a flush,
// so a slow sync shows as slow requests first.

// BlockStat is a block device's cumulative write and flush counters, from
// its /sys stat file: requests completed and the milliseconds they took
// together.
type BlockStat struct {
	Writes, WriteMillis  uint64
	Flushes, FlushMillis uint64
	haveFlush            bool // the kernel counts flushes (4.18 and later)
}

// ParseBlockStat reads a /sys/block/.../stat line (Documentation/block/
// stat.rst): fields 5 and 8 are writes and their milliseconds, 16 and 17
// flushes and theirs. A line with fewer than 11 fields, or a field that is
// not a count, is an error that names it.
func ParseBlockStat(line string) (BlockStat, error) {
	f := strings.Fields(line)
	if len(f) < 11 {
		return BlockStat{}, fmt.Errorf("block stat: %d fields, want at least 11: %q", len(f), strings.TrimSpace(line))
	}
	num := func(i int) (uint64, error) {
		v, err := strconv.ParseUint(f[i-1], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("block stat: field %d: %q is not a count", i, f[i-1])
		}
		return v, nil
	}
	var b BlockStat
	var err error
	if b.Writes, err = num(5); err != nil {
		return BlockStat{}, err
	}
	if b.WriteMillis, err = num(8); err != nil {
		return BlockStat{}, err
	}
	if len(f) >= 17 {
		if b.Flushes, err = num(16); err != nil {
			return BlockStat{}, err
		}
		if b.FlushMillis, err = num(17); err != nil {
			return BlockStat{}, err
		}
		b.haveFlush = true
	}
	return b, nil
}

// Since is the requests between an earlier reading and b; a counter below
// the earlier one (a wrap, another device) gives b itself.
func (b BlockStat) Since(earlier BlockStat) BlockStat {
	if b.Writes < earlier.Writes || b.WriteMillis < earlier.WriteMillis || b.Flushes < earlier.Flushes || b.FlushMillis < earlier.FlushMillis {
		return b
	}
	return BlockStat{
		Writes: b.Writes - earlier.Writes, WriteMillis: b.WriteMillis - earlier.WriteMillis,
		Flushes: b.Flushes - earlier.Flushes, FlushMillis: b.FlushMillis - earlier.FlushMillis,
		haveFlush: b.haveFlush,
	}
}

// Mean is the mean time of one write or flush request, zero for none.
func (b BlockStat) Mean() time.Duration {
	n := b.Writes + b.Flushes
	if n == 0 {
		return 0
	}
	return time.Duration(b.WriteMillis+b.FlushMillis) * time.Millisecond / time.Duration(n)
}

// SuspectMean is the mean request time at and above which a window's
// requests say the disk may be slow: a quarter of SlowMean, since a WAL
// sync is at least a write and a flush, and the device's counters mix
// etcd's requests with smaller and faster ones.
const SuspectMean = SlowMean / 4

// Suspect reports whether a window's requests say the disk may be slow,
// so that the histogram is worth reading: at least MinSyncs requests,
// SuspectMean or more on average.
func (b BlockStat) Suspect() bool {
	return b.Writes+b.Flushes >= MinSyncs && b.Mean() >= SuspectMean
}

func (b BlockStat) String() string {
	if !b.haveFlush {
		return fmt.Sprintf("%d writes of %s on average", b.Writes, b.Mean().Round(time.Millisecond))
	}
	return fmt.Sprintf("%d writes and %d flushes of %s on average", b.Writes, b.Flushes, b.Mean().Round(time.Millisecond))
}

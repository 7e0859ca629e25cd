package slowdisk

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseBlockStat: writes and their milliseconds from fields 5 and 8,
// flushes and theirs from 16 and 17 when the kernel counts them; short or
// malformed lines name what is wrong.
func TestParseBlockStat(t *testing.T) {
	b, err := ParseBlockStat("    5397        0 10688240    13359    10469  1291069 10484088   221548        0    15872   238264       28        0   688156        1      176     3355\n")
	require.NoError(t, err)
	assert.Equal(t, BlockStat{Writes: 10469, WriteMillis: 221548, Flushes: 176, FlushMillis: 3355, haveFlush: true}, b)
	assert.Equal(t, "10469 writes and 176 flushes of 21ms on average", b.String())

	// A kernel before 4.18: eleven fields, no flushes.
	b, err = ParseBlockStat("1 2 3 4 50 6 7 1000 9 10 11")
	require.NoError(t, err)
	assert.Equal(t, BlockStat{Writes: 50, WriteMillis: 1000}, b)
	assert.Equal(t, "50 writes of 20ms on average", b.String())

	for _, tt := range []struct{ line, err string }{
		{"", "block stat: 0 fields, want at least 11"},
		{"1 2 3 4 5 6 7 8 9 10", "block stat: 10 fields, want at least 11"},
		{"1 2 3 4 x 6 7 8 9 10 11", `block stat: field 5: "x" is not a count`},
		{"1 2 3 4 5 6 7 -8 9 10 11", `block stat: field 8: "-8" is not a count`},
		{"1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 1.5", `block stat: field 17: "1.5" is not a count`},
	} {
		_, err := ParseBlockStat(tt.line)
		assert.ErrorContains(t, err, tt.err, "%q", tt.line)
	}
}

// TestBlockStatSuspect: a window's requests are suspect at MinSyncs or
// more and SuspectMean or more on average, writes and flushes together;
// counters that went back give the later reading whole.
func TestBlockStatSuspect(t *testing.T) {
	before := BlockStat{Writes: 1000, WriteMillis: 5000, Flushes: 100, FlushMillis: 500, haveFlush: true}
	for _, tt := range []struct {
		name    string
		after   BlockStat
		mean    time.Duration
		suspect bool
	}{
		{"idle", before, 0, false},
		{"fast", BlockStat{Writes: 1100, WriteMillis: 5200, Flushes: 150, FlushMillis: 600, haveFlush: true}, 2 * time.Millisecond, false},
		{"slow writes", BlockStat{Writes: 1020, WriteMillis: 7000, Flushes: 100, FlushMillis: 500, haveFlush: true}, 100 * time.Millisecond, true},
		{"slow flushes", BlockStat{Writes: 1010, WriteMillis: 5010, Flushes: 110, FlushMillis: 1990, haveFlush: true}, 75 * time.Millisecond, true},
		{"just under", BlockStat{Writes: 1010, WriteMillis: 5000 + 124, Flushes: 100, FlushMillis: 500, haveFlush: true}, 12400 * time.Microsecond, false},
		{"at the mean", BlockStat{Writes: 1010, WriteMillis: 5000 + 125, Flushes: 100, FlushMillis: 500, haveFlush: true}, SuspectMean, true},
		{"too few", BlockStat{Writes: 1002, WriteMillis: 9000, Flushes: 100, FlushMillis: 500, haveFlush: true}, 2 * time.Second, false},
	} {
		w := tt.after.Since(before)
		assert.Equal(t, tt.mean, w.Mean(), tt.name)
		assert.Equal(t, tt.suspect, w.Suspect(), tt.name)
	}
	assert.Equal(t, 12500*time.Microsecond, SuspectMean)

	restarted := BlockStat{Writes: 10, WriteMillis: 1000, haveFlush: true}
	assert.Equal(t, restarted, restarted.Since(before), "counters below the earlier reading")
	assert.True(t, restarted.Since(before).Suspect())
}

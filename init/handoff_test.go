package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/init/slowdisk"
)

// TestHandoffWindow: the window is measured from the newest reading at
// least handoffWindow old; none until the member has led that long; the
// readings before that one are dropped.
func TestHandoffWindow(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 6, 0, 0, 0, time.UTC)
	at := func(s int, all uint64, secs float64) syncReading {
		return syncReading{t0.Add(time.Duration(s) * time.Second), slowdisk.Syncs{All: all, Seconds: secs}}
	}
	rs := []syncReading{at(0, 100, 1)}
	_, _, ok := windowOf(rs, t0.Add(4*time.Second))
	assert.False(t, ok, "led for 4 s of a 5 s window")

	rs = append(rs, at(5, 120, 1.5), at(10, 126, 3), at(15, 130, 4.5))
	w, span, ok := windowOf(rs, t0.Add(15*time.Second))
	assert.True(t, ok)
	assert.Equal(t, slowdisk.Syncs{All: 4, Seconds: 1.5}, w, "from the reading at 10 s")
	assert.Equal(t, 5*time.Second, span)
	assert.True(t, w.SlowDisk())
	assert.Equal(t, rs[2:], trimReadings(rs, t0.Add(15*time.Second)))
	assert.Equal(t, rs[:1], trimReadings(rs[:1], t0.Add(4*time.Second)), "nothing old enough: all kept")
}

// TestBlockWatch: the first reading only sets the baseline; then each
// poll's requests since the last decide; a stat file that goes away or
// holds no counters leaves the decision to the histogram (suspect).
func TestBlockWatch(t *testing.T) {
	p := filepath.Join(t.TempDir(), "stat")
	write := func(writes, millis int) {
		line := fmt.Sprintf("0 0 0 0 %d 0 0 %d 0 0 0 0 0 0 0 0 0\n", writes, millis)
		require.NoError(t, os.WriteFile(p, []byte(line), 0o644))
	}
	b := blockWatch{path: p}
	write(100, 100)
	assert.False(t, b.suspect(), "a baseline, no window yet")
	write(200, 300)
	assert.False(t, b.suspect(), "100 writes of 2 ms")
	write(220, 2300)
	assert.True(t, b.suspect(), "20 writes of 100 ms")
	write(320, 2400)
	assert.False(t, b.suspect(), "fast again")
	require.NoError(t, os.WriteFile(p, []byte("garbage\n"), 0o644))
	assert.True(t, b.suspect(), "unreadable counters: the histogram decides")
	write(400, 2500)
	assert.False(t, b.suspect(), "a new baseline after the bad reading")
	require.NoError(t, os.Remove(p))
	assert.True(t, b.suspect(), "no stat file")
	assert.True(t, (&blockWatch{}).suspect(), "no device: the histogram decides at every poll")
}

// TestDataBlockStat: a directory on a block device gives that device's
// stat file, which parses; a path that does not exist gives none.
func TestDataBlockStat(t *testing.T) {
	assert.Empty(t, dataBlockStat(filepath.Join(t.TempDir(), "missing")))
	var found int
	for _, dir := range []string{t.TempDir(), "/", "/sys"} {
		p := dataBlockStat(dir)
		if p == "" {
			continue // tmpfs, overlay, sysfs: no block device
		}
		found++
		raw, err := os.ReadFile(p)
		require.NoError(t, err)
		_, err = slowdisk.ParseBlockStat(string(raw))
		require.NoError(t, err, "%s: %s", p, raw)
	}
	assert.Empty(t, dataBlockStat("/sys"), "sysfs is on no block device")
	t.Logf("%d of the directories are on a block device", found)
}

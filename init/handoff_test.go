package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

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

package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestDataWait: DATA shares the ESP's deadline for the boot disk, with a
// floor, and gets the whole wait when no ESP wait ran.
func TestDataWait(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, c := range []struct {
		name    string
		disksBy time.Time
		want    time.Duration
	}{
		{"no ESP wait ran", time.Time{}, diskWait},
		{"the ESP came at once", now.Add(diskWait - 200*time.Millisecond), diskWait - 200*time.Millisecond},
		{"the ESP never came: the disk's deadline passed", now.Add(-time.Second), minDataWait},
		{"the ESP came just before the deadline", now.Add(500 * time.Millisecond), minDataWait},
	} {
		assert.Equal(t, c.want, dataWait(c.disksBy, now), c.name)
	}
}

package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestLaps(t *testing.T) {
	start := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	at := start
	l := newLaps(start)
	l.now = func() time.Time { return at }
	assert.Equal(t, "every step under 1ms", l.String())

	at = at.Add(217 * time.Millisecond)
	l.lap("parts")
	at = at.Add(400 * time.Microsecond)
	l.lap("log") // under a millisecond: left out
	at = at.Add(1500 * time.Millisecond)
	l.lap("jump plan")
	assert.Equal(t, "parts 217ms, jump plan 1.5s", l.String(), "each step's own time, from the end of the one before")
}

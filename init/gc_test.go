package main

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTuneGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	assert.Equal(t, initGCPercent, tuneGC(""))
	assert.Equal(t, initGCPercent, debug.SetGCPercent(initGCPercent), "the runtime runs with it")

	// $GOGC=60: the runtime read it at start (here set by hand); tuneGC
	// leaves it alone.
	debug.SetGCPercent(60)
	assert.Equal(t, 60, tuneGC("60"))
	assert.Equal(t, 60, debug.SetGCPercent(60))
}

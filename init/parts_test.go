package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestPartsStop: stop ends every part through its context and waits for
// it; a part that ignores its context is named once the wait is over,
// and the others are not.
func TestPartsStop(t *testing.T) {
	var p parts
	assert.Nil(t, p.stop(time.Second), "no part started")

	var mu sync.Mutex
	var logged []string
	logf := func(f string, a ...any) { mu.Lock(); logged = append(logged, fmt.Sprintf(f, a...)); mu.Unlock() }
	ended := make(chan string, 3)
	stuck := make(chan struct{})
	defer close(stuck)
	polite := func(name string) func(context.Context) {
		return func(ctx context.Context) { <-ctx.Done(); ended <- name }
	}
	p.start(t.Context(), logf, []part{
		{"a", polite("a")},
		{"deaf", func(context.Context) { <-stuck }},
		{"b", polite("b")},
	})
	start := time.Now()
	still := p.stop(200 * time.Millisecond)
	assert.Equal(t, []string{"deaf"}, still)
	assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond, "stop waited out its bound for the deaf part")
	got := map[string]bool{<-ended: true, <-ended: true}
	assert.Equal(t, map[string]bool{"a": true, "b": true}, got)
	assert.Empty(t, logged, "no part panicked")
}

// TestPartsStopWaits: stop returns once the parts have returned, not
// before, and well before its bound when they are quick.
func TestPartsStopWaits(t *testing.T) {
	var p parts
	var done sync.WaitGroup
	done.Add(1)
	returned := false
	p.start(t.Context(), t.Logf, []part{{"slow", func(ctx context.Context) {
		defer done.Done()
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond) // a part that cleans up after its context ends
		returned = true
	}}})
	assert.Nil(t, p.stop(10*time.Second))
	assert.True(t, returned, "stop returned before the part did")
	done.Wait()
}

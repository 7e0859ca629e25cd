package supervise

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// logBuf collects log lines from several goroutines.
type logBuf struct {
	mu    sync.Mutex
	lines []string
}

func (l *logBuf) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logBuf) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func TestGoRunsAgainAfterAPanic(t *testing.T) {
	defer func(b time.Duration) { PanicBackoff = b }(PanicBackoff)
	PanicBackoff = time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var log logBuf
	runs := make(chan int, 10)
	n := 0
	Go(ctx, "the flaky loop", log.logf, func(context.Context) {
		n++
		runs <- n
		if n < 3 {
			panic(fmt.Sprintf("bug %d", n))
		}
	})
	for want := 1; want <= 3; want++ {
		select {
		case got := <-runs:
			assert.Equal(t, want, got)
		case <-time.After(10 * time.Second):
			t.Fatalf("run %d never came; log:\n%s", want, log.all())
		}
	}
	select {
	case got := <-runs:
		t.Fatalf("run %d after a normal return", got)
	case <-time.After(50 * time.Millisecond): // a bound on a run that must not happen
	}
	out := log.all()
	assert.Contains(t, out, "panic in the flaky loop: bug 1 (recovered)")
	assert.Contains(t, out, "panic in the flaky loop: bug 2 (recovered)")
	assert.Contains(t, out, "goroutine_test.go", "the stack is logged")
	assert.Equal(t, 2, strings.Count(out, "the flaky loop: running it again in"))
}

func TestGoStopsWithItsContext(t *testing.T) {
	defer func(b time.Duration) { PanicBackoff = b }(PanicBackoff)
	PanicBackoff = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	var log logBuf
	ran := make(chan struct{}, 2)
	Go(ctx, "always panics", log.logf, func(context.Context) {
		ran <- struct{}{}
		panic("again")
	})
	<-ran
	cancel() // during the hour's backoff: no second run
	select {
	case <-ran:
		t.Fatal("ran again after its context ended")
	case <-time.After(50 * time.Millisecond):
	}
}

func TestCatch(t *testing.T) {
	var log logBuf
	err := Catch("staging", log.logf, func() error { panic("nil map") })
	require.Error(t, err)
	assert.Equal(t, "staging panicked: nil map", err.Error())
	assert.Contains(t, log.all(), "panic in staging: nil map (recovered)")

	want := errors.New("plain failure")
	assert.Same(t, want, Catch("staging", log.logf, func() error { return want }))
	assert.NoError(t, Catch("staging", log.logf, func() error { return nil }))
}

func TestBeforeRunSeesEachRun(t *testing.T) {
	defer func(b time.Duration, h func(string)) { PanicBackoff, BeforeRun = b, h }(PanicBackoff, BeforeRun)
	PanicBackoff = time.Millisecond
	var mu sync.Mutex
	seen := map[string]int{}
	BeforeRun = func(name string) {
		mu.Lock()
		seen[name]++
		first := seen[name] == 1
		mu.Unlock()
		if first {
			panic("injected")
		}
	}
	var log logBuf
	done := make(chan struct{})
	Go(context.Background(), "loop", log.logf, func(context.Context) { close(done) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("the loop never ran after the injected panic:\n%s", log.all())
	}
	assert.Error(t, Catch("job", log.logf, func() error { return nil }), "the first run of a job panics")
	assert.NoError(t, Catch("job", log.logf, func() error { return nil }))
}

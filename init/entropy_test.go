package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestWaitRandom(t *testing.T) {
	var (
		mu    sync.Mutex
		lines []string
	)
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, fmt.Sprintf(format, args...))
	}
	count := func(s string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, l := range lines {
			if strings.Contains(l, s) {
				n++
			}
		}
		return n
	}

	t.Run("ready at once says nothing", func(t *testing.T) {
		lines = nil
		require.NoError(t, waitRandom(context.Background(), func(bool) error { return nil }, logf, time.Millisecond))
		assert.Empty(t, lines)
	})

	t.Run("not ready says so and repeats it", func(t *testing.T) {
		lines = nil
		release := make(chan struct{})
		read := func(block bool) error {
			if !block {
				return unix.EAGAIN
			}
			<-release
			return nil
		}
		errc := make(chan error, 1)
		go func() { errc <- waitRandom(context.Background(), read, logf, 5*time.Millisecond) }()
		require.Eventually(t, func() bool { return count(entropyNote) >= 3 }, 10*time.Second, time.Millisecond,
			"the note was not repeated while the pool was not ready")
		close(release)
		require.NoError(t, <-errc)
		assert.Equal(t, 1, count("random number generator ready after"))
	})

	t.Run("the wait ends with the boot", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		block := make(chan struct{})
		defer close(block)
		read := func(b bool) error {
			if !b {
				return unix.EAGAIN
			}
			<-block
			return nil
		}
		cancel()
		assert.ErrorIs(t, waitRandom(ctx, read, logf, time.Hour), context.Canceled)
	})

	t.Run("another error is returned", func(t *testing.T) {
		assert.ErrorIs(t, waitRandom(context.Background(), func(bool) error { return unix.ENOSYS }, logf, time.Hour), unix.ENOSYS)
	})

	t.Run("this machine's pool is ready", func(t *testing.T) {
		assert.NoError(t, getrandom(false))
	})
}

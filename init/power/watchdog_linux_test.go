package power

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWatchdogRegularFile drives the real device code on a plain file: the
// ioctls fail with ENOTTY, so the timeout is reported unsupported and
// feeding falls back to writes, which the file collects.
func TestWatchdogRegularFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "watchdog")
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	l := &logs{}
	w := &Watchdog{Path: path, Interval: 5 * time.Millisecond, Log: l.logf}
	require.NoError(t, w.Start())
	assert.Equal(t, 1, l.count("set timeout 30s: WDIOC_SETTIMEOUT: inappropriate ioctl for device; the driver's is unknown"), "logs: %v", l.lines)

	deadline := time.Now().Add(10 * time.Second)
	for {
		fi, err := os.Stat(path)
		require.NoError(t, err)
		if fi.Size() >= 3 {
			break
		}
		require.True(t, time.Now().Before(deadline), "watchdog not fed: %d bytes", fi.Size())
		time.Sleep(5 * time.Millisecond)
	}
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "V", "fed with the magic character")

	// Without WDIOC_GETSUPPORT there is no known magic close: keep feeding.
	require.NoError(t, w.Close())
	assert.Equal(t, 1, l.count("no magic close"))
	close(w.stopc)
	<-w.loopDone
}

// TestWatchdogRegularFileSilentSource drives the real device code on a
// plain file with a fake clock: each feed writes a byte, so the file's size
// counts them. Feeding stops, and the log names the source, once a source
// is silent for longer than it promised.
func TestWatchdogRegularFileSilentSource(t *testing.T) {
	path := filepath.Join(t.TempDir(), "watchdog")
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	size := func() int64 {
		fi, err := os.Stat(path)
		require.NoError(t, err)
		return fi.Size()
	}
	l := &logs{}
	clock := &fakeClock{t: time.Unix(1000, 0)}
	w := &Watchdog{
		Path:   path,
		Log:    l.logf,
		now:    clock.now,
		ticker: func(time.Duration) (<-chan time.Time, func()) { return nil, func() {} }, // the test ticks
	}
	require.NoError(t, w.Start())
	t.Cleanup(func() { close(w.stopc); <-w.loopDone })
	require.Equal(t, int64(1), size(), "fed once on start")

	step := w.Source(`boot step "mount DATA"`, time.Minute)
	clock.add(30 * time.Second)
	w.tick()
	assert.Equal(t, int64(2), size(), "fed while the step is within its minute")

	clock.add(90 * time.Second) // the step hangs: silent for 2m
	w.tick()
	w.tick()
	assert.Equal(t, int64(2), size(), "fed while the step is silent")
	assert.Equal(t, 1, l.count(`watchdog: not feeding: boot step "mount DATA" silent for 2m0s; the machine resets within the driver's timeout`), "logs: %v", l.lines)

	step.Stop() // the step returned after all
	w.tick()
	assert.Equal(t, int64(3), size())
	assert.Equal(t, 1, l.count("watchdog: feeding again"))
}

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

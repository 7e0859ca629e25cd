package kmod

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKernelEventsDrains opens the real uevent socket (no privilege
// needed to listen) and reads what is waiting: it must return at once,
// not wait for the next announcement. What the host announces meanwhile,
// if anything, must come back as devices under the given sysfs.
func TestKernelEventsDrains(t *testing.T) {
	ev, err := KernelEvents("/sys")
	require.NoError(t, err)
	defer ev.Close()
	type result struct {
		devs []Device
		lost bool
		err  error
	}
	got := make(chan result, 1)
	go func() {
		devs, lost, err := ev.Added()
		got <- result{devs, lost, err}
	}()
	select {
	case r := <-got:
		require.NoError(t, r.err)
		for _, d := range r.devs {
			assert.Regexp(t, `^/sys/devices/`, d.Dir)
			assert.NotEmpty(t, d.Modalias)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Added waited for an announcement instead of returning what was there")
	}
}

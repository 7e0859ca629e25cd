package power

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeDevice records what the Watchdog does to the device.
type fakeDevice struct {
	mu         sync.Mutex
	magic      bool
	setErr     error
	timeout    time.Duration // what SetTimeout reports back; 0 = as asked
	asked      time.Duration
	feeds      int
	disarmed   bool
	afterClose int // feeds after Disarm
}

func (d *fakeDevice) SetTimeout(want time.Duration) (time.Duration, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked = want
	if d.timeout != 0 {
		return d.timeout, d.setErr
	}
	return want, d.setErr
}

func (d *fakeDevice) Keepalive() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.feeds++
	if d.disarmed {
		d.afterClose++
	}
	return nil
}

func (d *fakeDevice) MagicClose() bool { return d.magic }

func (d *fakeDevice) Disarm() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.disarmed = true
	return nil
}

func (d *fakeDevice) fed() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.feeds
}

type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logs) count(sub string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			n++
		}
	}
	return n
}

// newTestWatchdog returns a started Watchdog on dev whose clock never
// ticks: tests call tick themselves.
func newTestWatchdog(t *testing.T, dev *fakeDevice, configure func(*Watchdog)) (*Watchdog, *logs) {
	t.Helper()
	l := &logs{}
	w := &Watchdog{
		Log:    l.logf,
		open:   func(string) (device, error) { return dev, nil },
		ticker: func(time.Duration) (<-chan time.Time, func()) { return nil, func() {} },
	}
	if configure != nil {
		configure(w)
	}
	require.NoError(t, w.Start())
	t.Cleanup(func() {
		if w.dev != nil { // not disarmed: end the feeding goroutine
			close(w.stopc)
			<-w.loopDone
		}
	})
	return w, l
}

func TestWatchdogStart(t *testing.T) {
	dev := &fakeDevice{}
	var interval time.Duration
	w, l := newTestWatchdog(t, dev, func(w *Watchdog) {
		w.ticker = func(d time.Duration) (<-chan time.Time, func()) { interval = d; return nil, func() {} }
	})
	assert.Equal(t, "/dev/watchdog", w.Path)
	assert.Equal(t, 30*time.Second, dev.asked)
	assert.Equal(t, 10*time.Second, interval, "feed every timeout/3")
	assert.Equal(t, 1, dev.fed(), "fed once on start")
	assert.Equal(t, 1, l.count("armed: timeout 30s, fed every 10s"))
}

func TestWatchdogTimeoutUnsupported(t *testing.T) {
	tests := []struct {
		name         string
		dev          *fakeDevice
		wantLog      string
		wantInterval time.Duration
	}{
		{"driver keeps its own", &fakeDevice{setErr: errors.New("EINVAL"), timeout: 60 * time.Second}, "the driver's is 1m0s", 20 * time.Second},
		{"unknown", &fakeDevice{setErr: errors.New("ENOTTY"), timeout: -1}, "the driver's is unknown", time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var interval time.Duration
			_, l := newTestWatchdog(t, tt.dev, func(w *Watchdog) {
				w.ticker = func(d time.Duration) (<-chan time.Time, func()) { interval = d; return nil, func() {} }
			})
			assert.Equal(t, 1, l.count(tt.wantLog), "logs: %v", l.lines)
			assert.Equal(t, tt.wantInterval, interval)
		})
	}
}

func TestWatchdogFeedsOnlyWhileHealthy(t *testing.T) {
	dev := &fakeDevice{}
	healthy := true
	w, l := newTestWatchdog(t, dev, func(w *Watchdog) { w.Healthy = func() bool { return healthy } })
	w.tick()
	w.tick()
	assert.Equal(t, 3, dev.fed())

	healthy = false
	w.tick()
	w.tick()
	assert.Equal(t, 3, dev.fed(), "fed while unhealthy")
	assert.Equal(t, 1, l.count("not feeding: unhealthy; the machine resets within 30s"), "logged once: %v", l.lines)

	healthy = true
	w.tick()
	assert.Equal(t, 4, dev.fed())
	assert.Equal(t, 1, l.count("feeding again"))
}

func TestWatchdogHeartbeat(t *testing.T) {
	dev := &fakeDevice{}
	w, l := newTestWatchdog(t, dev, func(w *Watchdog) { w.Heartbeat = time.Minute })
	w.tick()
	assert.Equal(t, 2, dev.fed())

	w.beat.Store(time.Now().Add(-2 * time.Minute).UnixNano()) // the main loop went quiet
	w.tick()
	assert.Equal(t, 2, dev.fed(), "fed without a heartbeat")
	assert.Equal(t, 1, l.count("no heartbeat from init for 2m"), "logs: %v", l.lines)

	w.Beat()
	w.tick()
	assert.Equal(t, 3, dev.fed())
}

func TestWatchdogCloseWithMagicClose(t *testing.T) {
	dev := &fakeDevice{magic: true}
	w, l := newTestWatchdog(t, dev, nil)
	require.NoError(t, w.Close())
	assert.True(t, dev.disarmed)
	assert.Equal(t, 1, l.count("disarmed"))
	require.NoError(t, w.Close(), "second Close")
}

func TestWatchdogCloseWithoutMagicCloseKeepsFeeding(t *testing.T) {
	dev := &fakeDevice{}
	w, l := newTestWatchdog(t, dev, func(w *Watchdog) {
		w.Healthy = func() bool { return false } // etcd is stopped by now
		w.Heartbeat = time.Nanosecond            // and the main loop is busy shutting down
	})
	require.NoError(t, w.Close())
	assert.False(t, dev.disarmed)
	assert.Equal(t, 1, l.count("no magic close; feeding it until the end"))
	w.tick()
	w.tick()
	assert.Equal(t, 3, dev.fed())
}

func TestWatchdogLoopTicks(t *testing.T) {
	dev := &fakeDevice{magic: true}
	ticks := make(chan time.Time)
	stopped := make(chan struct{})
	w := &Watchdog{
		open:   func(string) (device, error) { return dev, nil },
		ticker: func(time.Duration) (<-chan time.Time, func()) { return ticks, func() { close(stopped) } },
	}
	require.NoError(t, w.Start())
	ticks <- time.Now()
	ticks <- time.Now() // received only after the first tick was handled
	require.NoError(t, w.Close())
	assert.GreaterOrEqual(t, dev.fed(), 2)
	<-stopped // Close stopped the ticker
	assert.Equal(t, 0, dev.afterClose)
}

func TestWatchdogMissing(t *testing.T) {
	w := &Watchdog{Path: filepath.Join(t.TempDir(), "watchdog")}
	err := w.Start()
	require.Error(t, err)
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

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
	identity   string
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

func (d *fakeDevice) Identity() string { return d.identity }

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
			select {
			case <-w.stopc: // by Handover
			default:
				close(w.stopc)
			}
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
	assert.Equal(t, "/dev/watchdog, timeout 30s", w.Describe())
}

// TestWatchdogDescribe names the device the driver names, and nothing
// before the watchdog is armed.
func TestWatchdogDescribe(t *testing.T) {
	var none *Watchdog
	assert.Empty(t, none.Describe(), "no watchdog")
	assert.Empty(t, (&Watchdog{}).Describe(), "not armed")
	w, l := newTestWatchdog(t, &fakeDevice{identity: "iTCO_wdt", timeout: 29 * time.Second}, func(w *Watchdog) {
		w.ticker = func(time.Duration) (<-chan time.Time, func()) { return nil, func() {} }
	})
	assert.Equal(t, "/dev/watchdog (iTCO_wdt), timeout 29s", w.Describe())
	assert.Equal(t, 1, l.count("armed: timeout 29s, fed every 9.666666666s (iTCO_wdt)"))
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

func TestWatchdogSources(t *testing.T) {
	dev := &fakeDevice{}
	clock := &fakeClock{t: time.Unix(1000, 0)}
	w, l := newTestWatchdog(t, dev, func(w *Watchdog) { w.now = clock.now })
	boot := w.Source(`boot step "prepare DATA"`, 5*time.Minute)
	sup := w.Source("etcd supervisor", time.Minute)
	w.tick()
	assert.Equal(t, 2, dev.fed())

	clock.add(2 * time.Minute) // both loops went quiet; only sup is overdue
	w.tick()
	assert.Equal(t, 2, dev.fed(), "fed with a silent source")
	assert.Equal(t, 1, l.count("watchdog: not feeding: etcd supervisor silent for 2m0s; the machine resets within 30s"), "logs: %v", l.lines)

	sup.Beat()
	w.tick()
	assert.Equal(t, 3, dev.fed())
	assert.Equal(t, 1, l.count("feeding again"))

	clock.add(4 * time.Minute) // boot's 6 minutes, sup's 4
	w.tick()
	assert.Equal(t, 3, dev.fed())
	assert.Equal(t, 1, l.count(`watchdog: not feeding: boot step "prepare DATA" silent for 6m0s, etcd supervisor silent for 4m0s;`), "logs: %v", l.lines)

	boot.Stop()
	sup.Stop()
	sup.Stop() // twice is fine
	sup.Beat() // and a beat after Stop does not register it again
	w.tick()
	assert.Equal(t, 4, dev.fed(), "fed once the silent sources stopped")
	assert.Empty(t, w.beats())
}

func TestWatchdogNilSource(t *testing.T) {
	var w *Watchdog // no hardware watchdog
	h := w.Source("boot", time.Second)
	assert.Nil(t, h)
	h.Beat()
	h.Stop()
}

func TestOverdue(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name    string
		now     time.Time
		sources []beatState
		want    []silentSource
	}{
		{name: "no sources", now: t0},
		{name: "just beaten", now: t0, sources: []beatState{{"a", time.Minute, t0}}},
		{name: "at the deadline", now: t0.Add(time.Minute), sources: []beatState{{"a", time.Minute, t0}}},
		{
			name: "past the deadline", now: t0.Add(time.Minute + time.Millisecond),
			sources: []beatState{{"a", time.Minute, t0}},
			want:    []silentSource{{"a", time.Minute + time.Millisecond}},
		},
		{
			name: "each its own deadline", now: t0.Add(2 * time.Minute),
			sources: []beatState{{"slow", time.Hour, t0}, {"fast", 10 * time.Second, t0}, {"beaten", 10 * time.Second, t0.Add(115 * time.Second)}},
			want:    []silentSource{{"fast", 2 * time.Minute}},
		},
		{
			name: "all late, in order", now: t0.Add(time.Hour),
			sources: []beatState{{"b", time.Minute, t0}, {"a", time.Second, t0.Add(time.Minute)}},
			want:    []silentSource{{"b", time.Hour}, {"a", 59 * time.Minute}},
		},
		{name: "no deadline", now: t0.Add(time.Hour), sources: []beatState{{"a", 0, t0}, {"b", -time.Second, t0}}},
		{name: "clock behind the beat", now: t0, sources: []beatState{{"a", time.Second, t0.Add(time.Hour)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, overdue(tt.now, tt.sources), "overdue(%v, %v)", tt.now, tt.sources)
		})
	}
	assert.Equal(t, `boot step "mount DATA" silent for 2m0s`, silentSource{`boot step "mount DATA"`, 2*time.Minute + 300*time.Millisecond}.String())
}

// fakeClock is a liveness clock that moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
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
	clock := &fakeClock{t: time.Unix(1000, 0)}
	w, l := newTestWatchdog(t, dev, func(w *Watchdog) {
		w.Healthy = func() bool { return false } // etcd is stopped by now
		w.now = clock.now
	})
	w.Source("boot", time.Second) // and a loop is busy shutting down
	clock.add(time.Hour)
	require.NoError(t, w.Close())
	assert.False(t, dev.disarmed)
	assert.Equal(t, 1, l.count("no magic close; feeding it until the end"))
	w.tick()
	w.tick()
	assert.Equal(t, 3, dev.fed())
}

// TestWatchdogHandover leaves the watchdog armed and fed for a kexec: the
// feeding stops, one last feed, no disarm; and when the jump then fails,
// Close still disarms it before the firmware reboot.
func TestWatchdogHandover(t *testing.T) {
	dev := &fakeDevice{magic: true}
	ticks := make(chan time.Time)
	stopped := make(chan struct{})
	l := &logs{}
	w := &Watchdog{
		Log:    l.logf,
		open:   func(string) (device, error) { return dev, nil },
		ticker: func(time.Duration) (<-chan time.Time, func()) { return ticks, func() { close(stopped) } },
	}
	require.NoError(t, w.Start())
	assert.Equal(t, 1, dev.fed(), "Start feeds it")
	// The loop feeds on this tick after taking it; Handover waits for the
	// loop to end, so the feed is counted below, never racing the count.
	ticks <- time.Now()
	w.Handover()
	<-stopped // the feeding loop ended
	assert.Equal(t, 3, dev.fed(), "fed on the tick, then once more for the next kernel")
	assert.False(t, dev.disarmed, "left armed")
	assert.Equal(t, 1, l.count("left armed for the next kernel"))
	w.Handover() // again: one more feed
	assert.Equal(t, 4, dev.fed())
	require.NoError(t, w.Close())
	assert.True(t, dev.disarmed, "a failed jump still disarms before the firmware reboot")
	w.Handover()
	assert.Equal(t, 4, dev.fed(), "nothing after Close")
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

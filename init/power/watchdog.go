package power

import (
	"fmt"
	"sync"
	"time"
)

// Watchdog feeds a hardware watchdog (/dev/watchdog) while init is healthy.
// Once the device is opened, the machine resets unless it is fed at least
// every Timeout: that covers a kernel or init that hangs.
//
// Feeding happens on a goroutine of its own, so a hung loop of init would
// not stop it by itself. Liveness sources close that gap: each loop that
// must not hang registers with Source and beats its Heart, and the feeder
// feeds only while every registered source has beaten within its own
// maxSilence (and Healthy, when set, says yes). A source that goes silent
// is named in the log ("watchdog: not feeding: boot step \"start etcd\"
// silent for 16s; the machine resets within 30s"). With no source
// registered, init is idle (PID 1 waiting for the power button) and the
// device is fed.
//
//	w := &power.Watchdog{Log: log.Printf}
//	err := w.Start()
//	h := w.Source("etcd supervisor", time.Minute)
//	defer h.Stop()
//	for { h.Beat(); ... }
type Watchdog struct {
	// Path is the device, default /dev/watchdog.
	Path string
	// Timeout is asked of the driver with WDIOC_SETTIMEOUT, default 30s.
	// A driver that cannot set it keeps its own, which is logged.
	Timeout time.Duration
	// Interval between feeds; default a third of the driver's timeout.
	Interval time.Duration
	// Healthy, when set, is asked before each feed, after the sources.
	Healthy func() bool
	// Log prints init's messages.
	Log func(format string, args ...any)

	// open opens the device; tests replace it.
	open func(path string) (device, error)
	// ticker makes the feeding clock; tests replace it to drive ticks.
	ticker func(d time.Duration) (<-chan time.Time, func())
	// now is the liveness clock; tests replace it.
	now func() time.Time

	srcMu   sync.Mutex
	sources []*Heart // registered by Source, in order

	mu       sync.Mutex
	dev      device
	identity string        // the device's, once armed
	timeout  time.Duration // the driver's, once known; 0 if unknown
	forced   bool          // Close could not disarm: feed regardless
	stopc    chan struct{}
	loopDone chan struct{}
	starving bool // the last tick did not feed
}

// device is an open watchdog.
type device interface {
	// SetTimeout asks for a timeout and returns the one in force (0 if
	// unknown), with an error when the driver refused.
	SetTimeout(d time.Duration) (time.Duration, error)
	Keepalive() error
	// MagicClose reports whether writing 'V' before closing stops the
	// watchdog.
	MagicClose() bool
	// Disarm writes 'V' and closes the device.
	Disarm() error
	// Identity is the driver's name for the device (WDIOC_GETSUPPORT's
	// identity: "iTCO_wdt", "i6300ESB timer"), "" when it gives none.
	Identity() string
}

func (w *Watchdog) logf(format string, args ...any) {
	if w.Log != nil {
		w.Log(format, args...)
	}
}

// Start opens and arms the watchdog and starts feeding it. When there is no
// watchdog the error wraps fs.ErrNotExist.
func (w *Watchdog) Start() error {
	if w.Path == "" {
		w.Path = "/dev/watchdog"
	}
	if w.Timeout <= 0 {
		w.Timeout = 30 * time.Second
	}
	open := w.open
	if open == nil {
		open = openDevice
	}
	dev, err := open(w.Path)
	if err != nil {
		return fmt.Errorf("open watchdog %s: %w", w.Path, err)
	}
	timeout, err := dev.SetTimeout(w.Timeout)
	switch {
	case err != nil && timeout > 0:
		w.logf("watchdog %s: set timeout %s: %v; the driver's is %s", w.Path, w.Timeout, err, timeout)
	case err != nil:
		w.logf("watchdog %s: set timeout %s: %v; the driver's is unknown", w.Path, w.Timeout, err)
	}
	interval := w.Interval
	if interval <= 0 {
		interval = time.Second // unknown timeout: feed often, it is cheap
		if timeout > 0 {
			interval = timeout / 3
		}
	}
	if err := dev.Keepalive(); err != nil {
		w.logf("watchdog %s: feed: %v", w.Path, err)
	}
	w.mu.Lock()
	w.dev, w.timeout, w.identity = dev, timeout, dev.Identity()
	w.stopc, w.loopDone = make(chan struct{}), make(chan struct{})
	w.mu.Unlock()
	ticker := w.ticker
	if ticker == nil {
		ticker = func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		}
	}
	ticks, stop := ticker(interval)
	go w.loop(ticks, stop)
	w.logf("watchdog %s armed: timeout %s, fed every %s%s", w.Path, timeout, interval, identityNote(w.identity))
	return nil
}

func identityNote(id string) string {
	if id == "" {
		return ""
	}
	return " (" + id + ")"
}

// Describe says which watchdog is armed and its timeout, as the node API
// reports it: "/dev/watchdog (iTCO_wdt), timeout 30s". It is "" on a nil
// Watchdog or one not started.
func (w *Watchdog) Describe() string {
	if w == nil {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopc == nil {
		return ""
	}
	t := "the driver's timeout"
	if w.timeout > 0 {
		t = "timeout " + w.timeout.String()
	}
	return w.Path + identityNote(w.identity) + ", " + t
}

func (w *Watchdog) loop(ticks <-chan time.Time, stop func()) {
	defer close(w.loopDone)
	defer stop()
	for {
		select {
		case <-w.stopc:
			return
		case <-ticks:
		}
		w.tick()
	}
}

// tick feeds the watchdog unless a liveness source is overdue or Healthy
// says no. It logs when feeding stops and when it resumes, not on every
// tick.
func (w *Watchdog) tick() {
	w.mu.Lock()
	forced, dev := w.forced, w.dev
	w.mu.Unlock()
	if dev == nil {
		return // Close is disarming it
	}
	why := ""
	if !forced {
		why = w.unhealthy()
	}
	if why != "" {
		if !w.starving {
			w.logf("watchdog: not feeding: %s; the machine resets within %s", why, w.timeoutString())
		}
		w.starving = true
		return
	}
	if w.starving {
		w.logf("watchdog: feeding again")
		w.starving = false
	}
	if err := dev.Keepalive(); err != nil {
		w.logf("watchdog %s: feed: %v", w.Path, err)
	}
}

func (w *Watchdog) unhealthy() string {
	if why := w.silence(); why != "" {
		return why
	}
	if w.Healthy != nil && !w.Healthy() {
		return "unhealthy"
	}
	return ""
}

func (w *Watchdog) timeoutString() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timeout == 0 {
		return "the driver's timeout"
	}
	return w.timeout.String()
}

// Handover leaves the watchdog armed for the kernel a kexec jumps into:
// feeding stops, the device is fed once more and left open, never
// disarmed, so the timer runs on through the jump and the new kernel's
// boot until that kernel's init opens the device again and feeds it. A
// kernel that hangs on the way (in the jump, in a driver, before its
// init) is then reset by the watchdog through the firmware, as a
// firmware reboot could not be watched. Call it last, just before
// Halt(Kexec); when the jump fails, Close still disarms it.
func (w *Watchdog) Handover() {
	w.mu.Lock()
	dev := w.dev
	w.mu.Unlock()
	if dev == nil {
		return
	}
	if w.stopc != nil {
		select {
		case <-w.stopc:
		default:
			close(w.stopc)
			<-w.loopDone
		}
	}
	if err := dev.Keepalive(); err != nil {
		w.logf("watchdog %s: feed: %v", w.Path, err)
	}
	w.logf("watchdog %s left armed for the next kernel (%s)", w.Path, w.timeoutString())
}

// Close prepares the watchdog for a clean power-off or reboot. A driver
// with magic close is disarmed: feeding stops and 'V' is written before the
// device is closed. Otherwise closing would leave it running unfed, so
// Close keeps feeding it, regardless of Healthy and the sources, until the
// reboot(2) in Halt ends everything. Call it last, just before Halt.
func (w *Watchdog) Close() error {
	w.mu.Lock()
	dev := w.dev
	if dev == nil || w.forced {
		w.mu.Unlock()
		return nil
	}
	if !dev.MagicClose() {
		w.forced = true
		w.mu.Unlock()
		w.logf("watchdog %s: no magic close; feeding it until the end", w.Path)
		return nil
	}
	w.dev = nil // a second Close returns at once
	w.mu.Unlock()
	select {
	case <-w.stopc: // stopped by Handover
	default:
		close(w.stopc)
	}
	<-w.loopDone
	if err := dev.Disarm(); err != nil {
		return fmt.Errorf("disarm watchdog %s: %w", w.Path, err)
	}
	w.logf("watchdog %s disarmed", w.Path)
	return nil
}

package power

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Heart is one liveness source of a Watchdog: a loop of init (the boot
// step runner, the etcd supervisor, the member lifecycle) that promises to
// call Beat at least every maxSilence. While any registered Heart is
// overdue the Watchdog stops feeding the device, and the machine resets
// within the driver's timeout. A loop that waits legitimately for longer
// (for quorum, for DHCP) keeps beating from its waiting loop; one that can
// block in a single call for long takes a maxSilence that covers it.
//
// A nil *Heart does nothing, so callers on a machine without a watchdog
// (or in container mode) need no checks.
type Heart struct {
	w          *Watchdog
	name       string
	maxSilence time.Duration

	mu      sync.Mutex
	last    time.Time
	stopped bool
}

// Source registers a liveness source named name ("boot step \"prepare
// DATA\"", "etcd supervisor"; the name is logged as is) that must beat at
// least every maxSilence, and returns its Heart, which has just beaten. A
// maxSilence of zero or less never makes it overdue. Sources may be
// registered before Start; their deadlines count from then on, but nothing
// is fed before Start. Stop the Heart when its loop ends for good.
//
// On a nil *Watchdog (no hardware watchdog) it returns a nil *Heart.
func (w *Watchdog) Source(name string, maxSilence time.Duration) *Heart {
	if w == nil {
		return nil
	}
	h := &Heart{w: w, name: name, maxSilence: maxSilence, last: w.clock()}
	w.srcMu.Lock()
	w.sources = append(w.sources, h)
	w.srcMu.Unlock()
	return h
}

// Beat says the source's loop is alive now.
func (h *Heart) Beat() {
	if h == nil {
		return
	}
	now := h.w.clock()
	h.mu.Lock()
	h.last = now
	h.mu.Unlock()
}

// Stop unregisters the source: its loop ended, and its silence no longer
// stops the feeding. Stop is idempotent; Beat after Stop does nothing.
func (h *Heart) Stop() {
	if h == nil {
		return
	}
	h.mu.Lock()
	already := h.stopped
	h.stopped = true
	h.mu.Unlock()
	if already {
		return
	}
	w := h.w
	w.srcMu.Lock()
	defer w.srcMu.Unlock()
	w.sources = slices.DeleteFunc(w.sources, func(s *Heart) bool { return s == h })
}

// beatState is a source as the feeder sees it at one tick.
type beatState struct {
	name       string
	maxSilence time.Duration
	last       time.Time // the last Beat
}

// silentSource is a source overdue at a tick.
type silentSource struct {
	name   string
	silent time.Duration // since its last Beat
}

func (s silentSource) String() string {
	return fmt.Sprintf("%s silent for %s", s.name, s.silent.Round(time.Second))
}

// overdue returns the sources that have been silent for longer than their
// maxSilence at now, in the order given. It is the watchdog's whole
// liveness rule: the device is fed only when it returns none. A source
// with no maxSilence is never overdue, nor is one whose last beat is after
// now.
func overdue(now time.Time, sources []beatState) []silentSource {
	var late []silentSource
	for _, s := range sources {
		if silent := now.Sub(s.last); s.maxSilence > 0 && silent > s.maxSilence {
			late = append(late, silentSource{name: s.name, silent: silent})
		}
	}
	return late
}

// beats snapshots the registered sources, in the order they registered.
func (w *Watchdog) beats() []beatState {
	w.srcMu.Lock()
	defer w.srcMu.Unlock()
	states := make([]beatState, 0, len(w.sources))
	for _, h := range w.sources {
		h.mu.Lock()
		states = append(states, beatState{name: h.name, maxSilence: h.maxSilence, last: h.last})
		h.mu.Unlock()
	}
	return states
}

// silence describes the overdue sources for the log, or returns "" when
// none is.
func (w *Watchdog) silence() string {
	late := overdue(w.clock(), w.beats())
	parts := make([]string, len(late))
	for i, s := range late {
		parts[i] = s.String()
	}
	return strings.Join(parts, ", ")
}

func (w *Watchdog) clock() time.Time {
	if w.now != nil {
		return w.now()
	}
	return time.Now()
}

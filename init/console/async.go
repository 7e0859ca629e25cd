package console

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Async decouples a slow writer, such as a 115200-baud serial console, from
// the goroutines that log. Writes are queued and never block; when the queue
// is full they are dropped and counted, and a line saying how many were
// dropped is written when the writer catches up. Without it, etcd's own log
// output would block on the console: the supervisor's pipe fills, and etcd
// stalls in write(2) while it should be sending heartbeats.
//
// Each Write should be whole lines, as Logger and the supervisor produce.
type Async struct {
	w     io.Writer
	queue chan []byte
	done  chan struct{} // closed when loop returns

	mu       sync.Mutex
	closed   bool
	dropped  int
	queued   uint64        // writes accepted so far
	written  uint64        // writes done so far
	progress chan struct{} // closed and replaced after every write
}

// NewAsync starts a goroutine that writes to w, with a queue of n writes.
func NewAsync(w io.Writer, n int) *Async {
	if n < 1 {
		n = 1
	}
	a := &Async{w: w, queue: make(chan []byte, n), done: make(chan struct{}), progress: make(chan struct{})}
	go a.loop()
	return a
}

// Write queues a copy of p. It always reports success.
func (a *Async) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return len(p), nil
	}
	select {
	case a.queue <- append([]byte(nil), p...):
		a.queued++
	default:
		a.dropped++
	}
	return len(p), nil
}

func (a *Async) loop() {
	defer close(a.done)
	for p := range a.queue {
		_, _ = a.w.Write(p)
		// Lines are dropped while the queue is full, so they are newer
		// than p: say so right after it.
		a.reportDropped()
		a.mu.Lock()
		a.written++
		close(a.progress)
		a.progress = make(chan struct{})
		a.mu.Unlock()
	}
}

func (a *Async) reportDropped() {
	a.mu.Lock()
	n := a.dropped
	a.dropped = 0
	a.mu.Unlock()
	if n > 0 {
		_, _ = fmt.Fprintf(a.w, "%sconsole: %d lines dropped\n", Prefix, n)
	}
}

// Flush waits up to timeout until everything queued so far is written, and
// reports whether it was. Call it before a line that must be seen, such as
// "etcdbox: shutdown complete", is followed by a reboot.
func (a *Async) Flush(timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	a.mu.Lock()
	target := a.queued
	a.mu.Unlock()
	for {
		a.mu.Lock()
		ok, ch := a.written >= target, a.progress
		a.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-t.C:
			return false
		}
	}
}

// Close stops accepting writes and waits for the queue to drain. The
// underlying writer stays open.
func (a *Async) Close() error {
	a.mu.Lock()
	if !a.closed {
		a.closed = true
		close(a.queue)
	}
	a.mu.Unlock()
	<-a.done
	return nil
}

package supervise

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"
)

// Goroutines of PID 1. An unrecovered panic in any goroutine ends the
// process, and when that process is PID 1 the kernel panics ("Attempted to
// kill init") and the machine reboots: on a blessed slot a deterministic
// bug becomes a reboot loop. So every long-lived goroutine of the init
// runs under Go, and every one-shot job whose failure has a place to go
// under Catch.

// BeforeRun, when set, is called with a goroutine's name before each run
// of it under Go, and with a job's name before a job under Catch. The
// test-hook init sets it to make each part panic once; release images
// leave it nil.
var BeforeRun func(name string)

// PanicBackoff is the first pause before Go runs a goroutine again after
// a panic; it doubles up to a minute.
var PanicBackoff = time.Second

// Go runs fn in a new goroutine named name. A panic in fn is recovered
// and logged with the goroutine's name and stack, and fn runs again after
// a backoff, until ctx ends. When fn returns, the goroutine ends. fn must
// be safe to run again after a panic: it starts from its beginning. The
// channel it returns is closed when the goroutine ends.
func Go(ctx context.Context, name string, logf func(string, ...any), fn func(context.Context)) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		pause := PanicBackoff
		for {
			if !runOnce(ctx, name, logf, fn) {
				return
			}
			logf("%s: running it again in %s", name, pause)
			select {
			case <-ctx.Done():
				return
			case <-time.After(pause):
			}
			pause = min(2*pause, time.Minute)
		}
	}()
	return done
}

// runOnce runs fn and reports whether it panicked.
func runOnce(ctx context.Context, name string, logf func(string, ...any), fn func(context.Context)) (panicked bool) {
	defer func() {
		if p := recover(); p != nil {
			logf("panic in %s: %v (recovered)\n%s", name, p, debug.Stack())
			panicked = true
		}
	}()
	if BeforeRun != nil {
		BeforeRun(name)
	}
	fn(ctx)
	return false
}

// Catch runs fn once and returns its error; a panic in fn is recovered,
// logged with the job's name and stack, and returned as an error that
// names the job.
func Catch(name string, logf func(string, ...any), fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			logf("panic in %s: %v (recovered)\n%s", name, p, debug.Stack())
			err = fmt.Errorf("%s panicked: %v", name, p)
		}
	}()
	if BeforeRun != nil {
		BeforeRun(name)
	}
	return fn()
}

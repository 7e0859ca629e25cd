package main

import (
	"context"
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// entropyNote is printed while the kernel's random number generator is
// not ready, so that a node stuck there says why instead of going quiet
// (the DHCP client, TLS and etcd all need random numbers).
const entropyNote = "waiting for the kernel's random number generator (no RDRAND, no RNG device)"

// entropyRepeat is how often the note is repeated while the wait lasts.
const entropyRepeat = 10 * time.Second

// waitEntropy returns once the kernel's random pool is ready. A
// non-blocking getrandom tells at once; when it is not ready, the init
// says so and repeats it while a blocking getrandom waits (which also
// makes the kernel gather jitter entropy). The virtio-rng driver, loaded
// by the step before, fills the pool within moments when the VM has an
// RNG device.
func (n *node) waitEntropy(ctx context.Context) error {
	return waitRandom(ctx, getrandom, n.log.Printf, entropyRepeat)
}

// waitRandom is waitEntropy with its seams: read is getrandom.
func waitRandom(ctx context.Context, read func(block bool) error, logf func(string, ...any), repeat time.Duration) error {
	err := read(false)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EAGAIN) {
		return err
	}
	start := time.Now()
	logf("%s", entropyNote)
	done := make(chan error, 1)
	go func() { done <- read(true) }()
	t := time.NewTicker(repeat)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			if err == nil {
				logf("random number generator ready after %s", time.Since(start).Round(time.Millisecond))
			}
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			logf("%s; %s so far", entropyNote, time.Since(start).Round(time.Second))
		}
	}
}

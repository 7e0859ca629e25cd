package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Read attempts overlap: each has its own client and deadline, a new one
// starts every poll interval while fewer than maxAttempts run. One client
// retrying on its own would wait out gRPC's reconnect backoff (a second
// and growing), and a TLS handshake begun before the guest listens can
// hang in QEMU's user network; either would blur the figure by seconds.
const (
	maxAttempts    = 4
	attemptTimeout = 3 * time.Second
)

// waitRead returns the time the first linearizable Get on endpoint
// succeeded, trying until ctx ends.
func waitRead(ctx context.Context, endpoint string, tlsConfig *tls.Config, poll time.Duration) (time.Time, error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel: the losing attempts end at once
	defer cancel()

	won := make(chan time.Time, 1)
	slots := make(chan struct{}, maxAttempts)
	var mu sync.Mutex
	var last error
	attempt := func() {
		defer wg.Done()
		defer func() { <-slots }()
		at, err := readOnce(ctx, endpoint, tlsConfig)
		if err != nil {
			mu.Lock()
			last = err
			mu.Unlock()
			return
		}
		select {
		case won <- at:
		default:
		}
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		select {
		case slots <- struct{}{}:
			wg.Add(1)
			go attempt()
		default: // all slots busy: wait for the next tick
		}
		select {
		case at := <-won:
			return at, nil
		case <-ctx.Done():
			mu.Lock()
			defer mu.Unlock()
			return time.Time{}, fmt.Errorf("%w (last attempt: %v)", ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// readOnce makes one client and one linearizable Get (the clientv3
// default), and returns when the Get succeeded.
func readOnce(ctx context.Context, endpoint string, tlsConfig *tls.Config) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	c, err := clientv3.New(clientv3.Config{
		Endpoints: []string{endpoint},
		TLS:       tlsConfig,
		Context:   ctx,
		Logger:    zap.NewNop(),
	})
	if err != nil {
		return time.Time{}, err
	}
	defer c.Close()
	if _, err := c.Get(ctx, "bench/boot"); err != nil {
		return time.Time{}, err
	}
	return time.Now(), nil
}

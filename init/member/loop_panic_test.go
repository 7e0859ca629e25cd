package member

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// fakeEtcd is a started etcd that is ready at once and never removed.
type fakeEtcd struct {
	ready, removed chan struct{}
	stops          *int
	mu             *sync.Mutex
}

func (e fakeEtcd) Ready() <-chan struct{}   { return e.ready }
func (e fakeEtcd) Removed() <-chan struct{} { return e.removed }
func (e fakeEtcd) Stop(time.Duration) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	*e.stops++
	return nil
}

// TestRoundPanicStopsItsEtcd: a panic in a round after etcd started
// (here in afterReady's Local) is recovered; the round's etcd is stopped
// before the loop starts the next one, so that one etcd runs at a time.
func TestRoundPanicStopsItsEtcd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu             sync.Mutex
		lines          []string
		launches, stop int
		running        int // etcds launched and not stopped
		maxRunning     int
		locals         int
	)
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, fmt.Sprintf(format, args...))
	}
	second := make(chan struct{})
	l := &Loop{
		Cluster: "demo", Name: "n1", PeerURL: "https://127.0.0.1:1", Logf: logf, Backoff: time.Millisecond,
		Gather: func(context.Context, bool) (Round, error) {
			return Round{Facts: Facts{Self: "n1", Cluster: "demo", HasData: true},
				InitialCluster: func([]string) (string, error) { return "n1=https://127.0.0.1:1", nil }}, nil
		},
		Launch: func(context.Context, Start) (Etcd, error) {
			mu.Lock()
			defer mu.Unlock()
			launches++
			running = launches - stop
			maxRunning = max(maxRunning, running)
			e := fakeEtcd{ready: make(chan struct{}), removed: make(chan struct{}), stops: &stop, mu: &mu}
			close(e.ready)
			if launches == 2 {
				close(second)
			}
			return e, nil
		},
		Local: func() (*clientv3.Client, error) {
			mu.Lock()
			locals++
			first := locals == 1
			mu.Unlock()
			if first {
				panic("a bug after etcd started")
			}
			return nil, errors.New("no client in this test")
		},
	}
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	select {
	case <-second:
	case <-time.After(10 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("no second round after the panic:\n%s", strings.Join(lines, "\n"))
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	out := strings.Join(lines, "\n")
	assert.Contains(t, out, "membership: panic in a round: a bug after etcd started (recovered)")
	assert.Contains(t, out, "a round panicked: a bug after etcd started; retrying in")
	assert.Equal(t, 1, stop, "the first round's etcd was stopped")
	assert.Equal(t, 1, maxRunning, "two etcds ran at once")
}

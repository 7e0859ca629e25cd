package rollout

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/etcdbox/etcdbox/nodeapi"
)

// hangingAPI answers its Status calls with their number in Name; the
// calls named in hang block until release is closed (or their context
// ends), as a request to a node that is down can.
type hangingAPI struct {
	NodeAPI
	mu      sync.Mutex
	calls   int
	hang    map[int]bool
	release chan struct{}
}

func (h *hangingAPI) Status(ctx context.Context) (nodeapi.Status, error) {
	h.mu.Lock()
	h.calls++
	n := h.calls
	h.mu.Unlock()
	if h.hang[n] {
		select {
		case <-h.release:
		case <-ctx.Done():
			return nodeapi.Status{}, ctx.Err()
		}
	}
	return nodeapi.Status{Name: fmt.Sprint(n)}, nil
}

// A request that hangs does not hold back the next ones, and its answer,
// once it comes, is dropped: later requests answered first. The API
// numbers calls as they reach it, which need not be the order pollStatus
// sent them in (two request goroutines may start in either order), so
// the hanging call is released only after ten answers, by when later
// requests than it have surely been answered.
func TestPollStatusDoesNotWaitForAHangingRequest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	api := &hangingAPI{hang: map[int]bool{1: true}, release: make(chan struct{})}
	r := &Roll{Poll: time.Millisecond}
	answers := r.pollStatus(ctx, api)
	var got []int
	for len(got) < 15 {
		select {
		case a := <-answers:
			if a.err != nil {
				t.Fatalf("answer %d: %v", len(got)+1, a.err)
			}
			n, err := strconv.Atoi(a.st.Name)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, n)
			if len(got) == 10 {
				// Call 1 answers now, after later calls did.
				close(api.release)
			}
		case <-ctx.Done():
			t.Fatalf("answers so far %v: call 1 hanging held the others back", got)
		}
	}
	if slices.Contains(got, 1) {
		t.Fatalf("answers %v: call 1's late answer came after later calls'", got)
	}
}

// No more than statusInFlight requests are under way at once.
func TestPollStatusBoundsRequestsInFlight(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	hang := map[int]bool{}
	for i := 1; i <= 3*statusInFlight; i++ {
		hang[i] = true
	}
	api := &hangingAPI{hang: hang, release: make(chan struct{})}
	r := &Roll{Poll: time.Millisecond}
	answers := r.pollStatus(ctx, api)
	deadline := time.Now().Add(time.Minute)
	for {
		api.mu.Lock()
		calls := api.calls
		api.mu.Unlock()
		if calls > statusInFlight {
			t.Fatalf("%d requests under way, want at most %d", calls, statusInFlight)
		}
		if calls == statusInFlight {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d requests made", calls)
		}
		time.Sleep(time.Millisecond)
	}
	// While all hang, ticks pass and no request more is made.
	for range 20 {
		select {
		case a := <-answers:
			t.Fatalf("an answer %+v while every request hangs", a)
		case <-time.After(time.Millisecond):
		}
	}
	api.mu.Lock()
	calls := api.calls
	api.mu.Unlock()
	if calls != statusInFlight {
		t.Fatalf("%d requests under way, want %d", calls, statusInFlight)
	}
	cancel()
}

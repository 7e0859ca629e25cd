package leakcheck

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMatch(t *testing.T) {
	const (
		mainG = "goroutine 1 [running]:\nmain.main()\n\t/src/main.go:10 +0x1d"
		grpc  = "goroutine 7 [select]:\ngoogle.golang.org/grpc.(*ccBalancerWrapper).watcher(0xc0001)\n\t/mod/google.golang.org/grpc@v1.71.0/balancer_wrapper.go:110 +0x6e"
		etcd  = "goroutine 9 [chan receive]:\ngo.etcd.io/etcd/client/v3.(*watchGRPCStream).run(0xc0002)\n\t/mod/go.etcd.io/etcd/client/v3@v3.7.3/watch.go:500 +0x1a"
	)
	for _, tc := range []struct {
		name string
		dump string
		want []string
	}{
		{name: "none", dump: mainG},
		{name: "grpc", dump: strings.Join([]string{mainG, grpc}, "\n\n"), want: []string{grpc}},
		{name: "both", dump: strings.Join([]string{etcd, mainG, grpc}, "\n\n"), want: []string{etcd, grpc}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, match(tc.dump, watched), "match(%s)", tc.name)
		})
	}
}

// parked blocks until done is closed: a goroutine to find by its name.
func parked(done <-chan struct{}) { <-done }

func TestGoroutines(t *testing.T) {
	const name = "internal/leakcheck.parked"
	done, ended := make(chan struct{}), make(chan struct{})
	go func() { parked(done); close(ended) }()

	// The goroutine is parked once a dump shows it; wait for that.
	var found []string
	for deadline := time.Now().Add(5 * time.Second); len(found) == 0 && time.Now().Before(deadline); {
		found = goroutines(0, []string{name})
		if len(found) == 0 {
			time.Sleep(time.Millisecond) // polling interval, bounded by the deadline
		}
	}
	require.Len(t, found, 1, "goroutines() = %q, want the parked one", found)
	assert.Contains(t, found[0], name)

	// One that ends within the grace period is no leak.
	time.AfterFunc(100*time.Millisecond, func() { close(done) })
	assert.Empty(t, goroutines(5*time.Second, []string{name}))
	<-ended
}

func TestReport(t *testing.T) {
	var b bytes.Buffer
	assert.Equal(t, 0, report(&b, nil))
	assert.Empty(t, b.String())
	assert.Equal(t, 1, report(&b, []string{"goroutine 7 [select]:"}))
	assert.Equal(t, "leaked 1 etcd client goroutines:\n\ngoroutine 7 [select]:\n", b.String())
}

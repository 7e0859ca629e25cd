package console

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLimiter(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(1000, 0)
	var timers []func()
	l := &Limiter{W: &out, Burst: 3, Window: time.Minute,
		now:       func() time.Time { return now },
		afterFunc: func(_ time.Duration, f func()) { timers = append(timers, f) }}
	line := func(s string) { _, _ = l.Write([]byte(s + "\n")) }

	// A flood of handshake errors that differ only in the port.
	for i := range 1000 {
		line(fmt.Sprintf("etcdbox: node API: http: TLS handshake error from 10.0.0.9:%d: bad certificate", 40000+i))
	}
	line("etcdbox: etcd ready")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 4, "three of the flood, then the init's own line:\n%s", out.String())
	assert.Contains(t, lines[2], ":40002: bad certificate")
	assert.Equal(t, "etcdbox: etcd ready", lines[3])

	// The window ends with no more of them: its timer says how many.
	require.Len(t, timers, 1)
	now = now.Add(time.Minute)
	timers[0]()
	assert.Contains(t, out.String(), "etcdbox: … and 997 more like this in the last 1m0s: etcdbox: node API: http: TLS handshake error from 10.0.0.9:40003: bad certificate\n")

	// A new window passes the burst again, and a late line of the old
	// one is not counted twice.
	out.Reset()
	line("etcdbox: node API: http: TLS handshake error from 10.0.0.9:1: bad certificate")
	assert.Equal(t, "etcdbox: node API: http: TLS handshake error from 10.0.0.9:1: bad certificate\n", out.String())
	timers[0]()
	assert.NotContains(t, out.String(), "more like this")
}

func TestLimiterSummaryOnTheNextLine(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(1000, 0)
	l := &Limiter{W: &out, Burst: 1, Window: time.Second,
		now:       func() time.Time { return now },
		afterFunc: func(time.Duration, func()) {}} // the timer never fires
	for range 5 {
		_, _ = l.Write([]byte("same\n"))
	}
	now = now.Add(2 * time.Second)
	_, _ = l.Write([]byte("same\n"))
	assert.Equal(t, "same\netcdbox: … and 4 more like this in the last 1s: same\nsame\n", out.String())
}

// TestLimiterFlush: a flush says what each window held back so far,
// oldest window first, once; the window's timer then has nothing more to
// say, and lines held after the flush are counted afresh.
func TestLimiterFlush(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(1000, 0)
	var timers []func()
	l := &Limiter{W: &out, Burst: 1, Window: time.Minute,
		now:       func() time.Time { return now },
		afterFunc: func(_ time.Duration, f func()) { timers = append(timers, f) }}
	for range 3 {
		_, _ = l.Write([]byte("first 1\n"))
	}
	now = now.Add(5 * time.Second)
	for range 4 {
		_, _ = l.Write([]byte("second 1\n"))
	}
	_, _ = l.Write([]byte("alone\n"))
	now = now.Add(10 * time.Second)
	out.Reset()
	l.Flush()
	assert.Equal(t, "etcdbox: … and 2 more like this in the last 15s: first 1\n"+
		"etcdbox: … and 3 more like this in the last 10s: second 1\n", out.String())

	out.Reset()
	l.Flush()
	for _, f := range timers {
		f()
	}
	assert.Empty(t, out.String(), "nothing is said twice")

	_, _ = l.Write([]byte("first 2\n"))
	l.Flush()
	assert.Equal(t, "etcdbox: … and 1 more like this in the last 15s: first 2\n", out.String(), "held after the flush: counted afresh, in the same window")
}

func TestShape(t *testing.T) {
	assert.Equal(t, shape([]byte(`{"ts":"2026-12-02T03:22:09.876Z","msg":"x"}`+"\n")), shape([]byte(`{"ts":"2026-12-02T04:01:59.1Z","msg":"x"}`)))
	assert.NotEqual(t, shape([]byte("etcd ready")), shape([]byte("etcd exited")))
}

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

func TestShape(t *testing.T) {
	assert.Equal(t, shape([]byte(`{"ts":"2026-12-02T03:22:09.876Z","msg":"x"}`+"\n")), shape([]byte(`{"ts":"2026-12-02T04:01:59.1Z","msg":"x"}`)))
	assert.NotEqual(t, shape([]byte("etcd ready")), shape([]byte("etcd exited")))
}

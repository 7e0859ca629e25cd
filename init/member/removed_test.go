package member

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// removedLine is the entry etcd 3.7 logs when its member was removed.
const removedLine = `{"level":"warn","ts":"2025-01-01T00:00:00.000Z","caller":"etcdserver/server.go:849","msg":"server error","error":"` +
	RemovedMessage + `"}`

// startLine is the entry etcd logs as it restarts its member.
const startLine = `{"level":"info","ts":"2025-01-01T00:00:00.000Z","caller":"etcdserver/bootstrap.go:616","msg":"restarting local member","cluster-id":"cdf818194e3a8c32","local-member-id":"8e9e05c52164694d","commit-index":4}`

func TestIsRemovedEntry(t *testing.T) {
	tests := []struct {
		name string
		line string
		want bool
	}{
		{"etcd's entry", removedLine, true},
		{"etcd's entry with CR", removedLine + "\r", true},
		{"etcd's entry through the supervisor", SupervisedPrefix + removedLine, true},
		{"etcd's entry after another prefix", "etcd: etcd: " + removedLine, false},
		{"etcd's entry after text", "etcd: x " + removedLine, false},
		{"etcd's entry, unix ts", strings.Replace(removedLine, `"2025-01-01T00:00:00.000Z"`, `1735689600.123`, 1), true},
		{
			"the sentence as a TLS client's server name",
			`{"level":"warn","ts":"2025-01-01T00:00:00.000Z","caller":"embed/config_logging.go:195","msg":"rejected connection on client endpoint","remote-addr":"127.0.0.1:4242","server-name":"` +
				RemovedMessage + `","error":"tls: client didn't provide a certificate"}`,
			false,
		},
		{
			"the sentence as the error of another message",
			`{"level":"warn","ts":"2025-01-01T00:00:00.000Z","caller":"rafthttp/stream.go:1","msg":"lost TCP streaming connection","error":"` + RemovedMessage + `"}`,
			false,
		},
		{"an injected entry in a value", `{"level":"warn","ts":"t","caller":"embed/x.go:1","msg":"rejected connection","server-name":"x\"}\n` + removedLine + `"}`, false},
		{"free text", "2025-01-01 etcdserver: " + RemovedMessage, false},
		{"free text then etcd's entry", "garbage " + removedLine, false},
		{"etcd's entry then trailing text", removedLine + " trailing", false},
		{"no ts", strings.Replace(removedLine, `"ts":"2025-01-01T00:00:00.000Z",`, "", 1), false},
		{"no caller", strings.Replace(removedLine, `"caller":"etcdserver/server.go:849",`, "", 1), false},
		{"caller outside etcdserver", strings.Replace(removedLine, `etcdserver/server.go:849`, `embed/etcd.go:1`, 1), false},
		{"level info", strings.Replace(removedLine, `"level":"warn"`, `"level":"info"`, 1), false},
		{"msg differs", strings.Replace(removedLine, `"msg":"server error"`, `"msg":"server error!"`, 1), false},
		{"error with more text", strings.Replace(removedLine, RemovedMessage, RemovedMessage+" (really)", 1), false},
		{"error not a string", strings.Replace(removedLine, `"`+RemovedMessage+`"`, `["`+RemovedMessage+`"]`, 1), false},
		{"truncated", removedLine[:len(removedLine)-3], false},
		{"empty", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := IsRemovedEntry([]byte(tt.line))
			assert.Equal(t, tt.want, got, "IsRemovedEntry(%s) = %t, want %t", tt.line, got, tt.want)
		})
	}
}

func TestStartEntryIDs(t *testing.T) {
	c, m, ok := startEntryIDs([]byte(startLine))
	require.True(t, ok)
	assert.Equal(t, uint64(0xcdf818194e3a8c32), c)
	assert.Equal(t, uint64(0x8e9e05c52164694d), m)
	_, _, ok = startEntryIDs([]byte(strings.Replace(startLine, "restarting local member", "some other entry", 1)))
	assert.False(t, ok)
}

func TestRemovedWatch(t *testing.T) {
	line := removedLine + "\n"
	for split := 0; split <= len(line); split += 7 {
		w := NewRemovedWatch()
		_, _ = w.Write([]byte(`{"level":"info","ts":1,"caller":"embed/etcd.go:1","msg":"ready"}` + "\n"))
		assert.False(t, w.Seen())
		_, _ = w.Write([]byte(line[:split]))
		_, _ = w.Write([]byte(line[split:]))
		assert.True(t, w.Seen(), "split at %d", split)
		<-w.Removed()
		<-w.Said()
	}
	w := NewRemovedWatch()
	for _, b := range []byte(strings.Repeat("x", 100) + RemovedMessage[:20]) {
		_, _ = w.Write([]byte{b})
	}
	assert.False(t, w.Seen())

	// Lines without their newline are not entries yet.
	w = NewRemovedWatch()
	_, _ = w.Write([]byte(removedLine))
	assert.False(t, w.Seen(), "no newline yet")
	_, _ = w.Write([]byte("\n"))
	assert.True(t, w.Seen())
}

func TestRemovedWatchLongLines(t *testing.T) {
	w := NewRemovedWatch()
	// A line past MaxLogLine that ends with etcd's entry is skipped as a
	// whole, in pieces, without growing the buffer.
	long := strings.Repeat("x", MaxLogLine)
	for range 4 {
		_, _ = w.Write([]byte(long))
	}
	_, _ = w.Write([]byte(removedLine + "\n"))
	assert.False(t, w.Seen(), "the tail of a long line is no entry")
	w.mu.Lock()
	assert.LessOrEqual(t, cap(w.line), 2*MaxLogLine, "buffer bounded")
	w.mu.Unlock()
	// The next line is read again.
	_, _ = w.Write([]byte(removedLine + "\n"))
	assert.True(t, w.Seen())
}

func TestRemovedWatchForgedLine(t *testing.T) {
	w := NewRemovedWatch()
	for _, l := range []string{
		"etcd: " + RemovedMessage,
		`{"msg":"server error","error":"` + RemovedMessage + `"}`,
		`{"level":"warn","ts":"t","caller":"embed/config_logging.go:195","msg":"rejected connection on peer endpoint","server-name":"` + RemovedMessage + `"}`,
	} {
		_, _ = w.Write([]byte(l + "\n"))
	}
	assert.False(t, w.Seen())
	select {
	case <-w.Said():
		t.Fatal("a forged line counted as etcd's")
	default:
	}
}

// TestRemovedWatchConfirms: with a confirmation, Removed waits for it;
// a member list that still has the member fires nothing.
func TestRemovedWatchConfirms(t *testing.T) {
	tests := []struct {
		name    string
		answers []error // one per attempt; the last repeats
		fires   bool
	}{
		{name: "confirmed", answers: []error{fmt.Errorf("gone: %w", ErrRemoved)}, fires: true},
		{name: "confirmed after no quorum", answers: []error{errors.New("no quorum"), fmt.Errorf("gone: %w", ErrRemoved)}, fires: true},
		{name: "still a member", answers: []error{fmt.Errorf("listed: %w", ErrStillMember)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			var calls atomic.Int32
			var gotMember atomic.Uint64
			done := make(chan struct{}, 10)
			w := NewRemovedWatch(func(w *RemovedWatch) {
				w.confirmCtx, w.logf = ctx, t.Logf
				w.confirm = func(_ context.Context, _, member uint64) error {
					gotMember.Store(member)
					i := int(calls.Add(1)) - 1
					defer func() { done <- struct{}{} }()
					return tt.answers[min(i, len(tt.answers)-1)]
				}
			})
			_, _ = w.Write([]byte(startLine + "\n" + removedLine + "\n"))
			<-w.Said()
			if tt.fires {
				select {
				case <-w.Removed():
				case <-ctx.Done():
					t.Fatal("the confirmed removal never fired")
				}
				assert.Equal(t, uint64(0x8e9e05c52164694d), gotMember.Load(), "confirmed with the member ID etcd logged")
				return
			}
			select {
			case <-done:
			case <-ctx.Done():
				t.Fatal("no confirmation ran")
			}
			// The loop ends after its answer; wait for it to say so.
			require.Eventually(t, func() bool { w.mu.Lock(); defer w.mu.Unlock(); return !w.confirming }, 5*time.Second, 10*time.Millisecond)
			assert.False(t, w.Seen(), "a listed member is not removed")
		})
	}
}

package console

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLogger(t *testing.T) {
	tests := []struct {
		name  string
		print func(l *Logger)
		want  string
	}{
		{"printf", func(l *Logger) { l.Printf("etcd %s", "ready") }, "etcdbox: etcd ready\n"},
		{"printf with newline", func(l *Logger) { l.Printf("etcd ready\n") }, "etcdbox: etcd ready\n"},
		{"println", func(l *Logger) { l.Println("shutdown", "complete") }, "etcdbox: shutdown complete\n"},
		{"multi-line", func(l *Logger) { l.Printf("seed error:\na\nb") }, "etcdbox: seed error:\netcdbox: a\netcdbox: b\n"},
		{"raw write", func(l *Logger) { _, _ = l.Write([]byte("etcd: hello\n")) }, "etcd: hello\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a, b bytes.Buffer
			l := New(&a, nil, &b)
			tt.print(l)
			assert.Equal(t, tt.want, a.String())
			assert.Equal(t, tt.want, b.String())
		})
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("gone") }

func TestLoggerIgnoresFailingWriter(t *testing.T) {
	var b bytes.Buffer
	l := New(failWriter{}, &b)
	l.Printf("still here")
	assert.Equal(t, "etcdbox: still here\n", b.String())
}

func TestKmsg(t *testing.T) {
	var recs recorder
	k := &Kmsg{W: &recs}
	long := strings.Repeat("x", kmsgMax+10)
	n, err := k.Write([]byte("etcdbox: a\netcdbox: b\n" + long + "\n"))
	require.NoError(t, err)
	assert.Equal(t, len("etcdbox: a\netcdbox: b\n")+len(long)+1, n)
	assert.Equal(t, []string{
		"<6>etcdbox: a\n",
		"<6>etcdbox: b\n",
		"<6>" + long[:kmsgMax] + "\n",
		"<6>" + long[kmsgMax:] + "\n",
	}, recs.get())
}

// recorder records each Write as one record, as /dev/kmsg does.
type recorder struct {
	mu   sync.Mutex
	recs []string
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, string(p))
	return len(p), nil
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.recs...)
}

func TestRing(t *testing.T) {
	tests := []struct {
		name   string
		size   int
		writes []string
		want   []string
	}{
		{"empty", 3, nil, []string{}},
		{"fewer than size", 3, []string{"a\nb\n"}, []string{"a", "b"}},
		{"exactly size", 3, []string{"a\nb\nc\n"}, []string{"a", "b", "c"}},
		{"wraparound", 3, []string{"1\n2\n3\n4\n5\n"}, []string{"3", "4", "5"}},
		{"wraparound twice", 2, []string{"1\n2\n", "3\n4\n", "5\n"}, []string{"4", "5"}},
		{"line over several writes", 3, []string{"ab", "c", "d\ne"}, []string{"abcd", "e"}},
		{"partial line shown last", 2, []string{"1\n2\n3\npart"}, []string{"2", "3", "part"}},
		{"empty lines kept", 3, []string{"\n\nx\n"}, []string{"", "", "x"}},
		{"size below one", 0, []string{"a\nb\n"}, []string{"b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRing(tt.size)
			for _, w := range tt.writes {
				n, err := r.Write([]byte(w))
				require.NoError(t, err)
				require.Equal(t, len(w), n)
			}
			assert.Equal(t, tt.want, r.Lines())
		})
	}
}

func TestRingLongLine(t *testing.T) {
	r := NewRing(10)
	long := strings.Repeat("y", 2*MaxLine+5)
	_, _ = r.Write([]byte(long[:MaxLine-1]))
	_, _ = r.Write([]byte(long[MaxLine-1:] + "\nz\n"))
	assert.Equal(t, []string{long[:MaxLine], long[MaxLine : 2*MaxLine], long[2*MaxLine:], "z"}, r.Lines())

	r = NewRing(10)
	_, _ = r.Write([]byte(strings.Repeat("w", MaxLine+1))) // no newline ever
	assert.Equal(t, []string{strings.Repeat("w", MaxLine), "w"}, r.Lines())
}

func TestRingLinesIsACopy(t *testing.T) {
	r := NewRing(2)
	_, _ = r.Write([]byte("a\nb\n"))
	got := r.Lines()
	got[0] = "changed"
	assert.Equal(t, []string{"a", "b"}, r.Lines())
}

// TestRingConcurrent writes whole lines from several goroutines while
// reading; run with -race. Every stored line must be one that was written,
// unbroken.
func TestRingConcurrent(t *testing.T) {
	const writers, perWriter, size = 8, 500, 64
	r := NewRing(size)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				for _, l := range r.Lines() {
					if !strings.HasPrefix(l, "w") {
						t.Errorf("torn line %q", l)
					}
				}
			}
		}
	}()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				_, _ = fmt.Fprintf(r, "w%d-%d\n", w, i)
			}
		}()
	}
	wg.Wait()
	close(stop)
	lines := r.Lines()
	require.Len(t, lines, size)
	last := map[string]bool{}
	for w := range writers {
		last[fmt.Sprintf("w%d-%d", w, perWriter-1)] = true
	}
	for _, l := range lines {
		var w, i int
		_, err := fmt.Sscanf(l, "w%d-%d", &w, &i)
		require.NoError(t, err, "line %q", l)
	}
	// The very last line written overall is one writer's last line.
	assert.True(t, last[lines[size-1]], "last line %q", lines[size-1])
}

// slowWriter blocks every write until released.
type slowWriter struct {
	release chan struct{}
	recorder
}

func (s *slowWriter) Write(p []byte) (int, error) {
	<-s.release
	return s.recorder.Write(p)
}

func TestAsyncDropsInsteadOfBlocking(t *testing.T) {
	s := &slowWriter{release: make(chan struct{})}
	a := NewAsync(s, 2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 10 {
			_, _ = fmt.Fprintf(a, "line %d\n", i)
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Write blocked on a slow writer")
	}
	assert.False(t, a.Flush(10*time.Millisecond), "Flush reported success while the writer is stuck")
	close(s.release)
	require.True(t, a.Flush(5*time.Second))
	require.NoError(t, a.Close())
	recs := s.get()
	require.NotEmpty(t, recs)
	assert.Equal(t, "line 0\n", recs[0])
	assert.Contains(t, strings.Join(recs, ""), "lines dropped\n")
	kept := 0
	for _, r := range recs {
		if strings.HasPrefix(r, "line ") {
			kept++
		}
	}
	assert.Less(t, kept, 10)
}

func TestLoggerFlushesAsync(t *testing.T) {
	var rec recorder
	a := NewAsync(&rec, 100)
	defer a.Close()
	l := New(a)
	for i := range 50 {
		l.Printf("n=%d", i)
	}
	require.True(t, l.Flush(5*time.Second))
	recs := rec.get()
	require.Len(t, recs, 50)
	assert.Equal(t, "etcdbox: n=49\n", recs[49])
}

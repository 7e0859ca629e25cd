// Package console is PID 1's logger. Every line init prints starts with
// "etcdbox: " and goes to each of a set of writers, typically the kernel log
// and the serial console:
//
//	kmsg, _ := console.OpenKmsg("/dev/kmsg")
//	tty, _ := os.OpenFile("/dev/console", os.O_WRONLY|os.O_NOCTTY, 0)
//	log := console.New(kmsg, console.NewAsync(tty, 1024))
//	log.Printf("etcd ready") // "etcdbox: etcd ready"
//
// Ring keeps the last lines of etcd's output for the node API, and Async
// keeps a slow serial console from stalling whoever logs.
package console

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"time"
)

// Prefix starts every line a Logger prints. Tests and operators wait for
// fixed lines such as "etcdbox: etcd ready".
const Prefix = "etcdbox: "

// Logger writes prefixed lines to a set of writers. Errors from a writer are
// ignored: PID 1 must keep going when a console goes away. It is safe for
// concurrent use; lines from different goroutines never interleave.
type Logger struct {
	mu sync.Mutex
	ws []io.Writer
}

// New returns a Logger that writes to ws. Nil writers are skipped.
func New(ws ...io.Writer) *Logger {
	l := &Logger{}
	for _, w := range ws {
		l.Add(w)
	}
	return l
}

// Add adds a writer, e.g. the serial console once /dev is mounted.
func (l *Logger) Add(w io.Writer) {
	if w == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ws = append(l.ws, w)
}

// Printf prints one message. Each of its lines gets the prefix, so a
// multi-line message still reads as init's output.
func (l *Logger) Printf(format string, args ...any) {
	l.print(fmt.Sprintf(format, args...))
}

// Println prints its operands like fmt.Println, prefixed.
func (l *Logger) Println(args ...any) {
	l.print(fmt.Sprintln(args...))
}

func (l *Logger) print(msg string) {
	msg = trimNewline(msg)
	var b bytes.Buffer
	for {
		line, rest, more := cut(msg)
		b.WriteString(Prefix)
		b.WriteString(line)
		b.WriteByte('\n')
		if !more {
			break
		}
		msg = rest
	}
	_, _ = l.Write(b.Bytes())
}

// Write writes p as is, without a prefix, to every writer. It is meant for
// whole lines that already say where they come from, such as the
// supervisor's "etcd: ..." lines. It always reports success.
func (l *Logger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.ws {
		_, _ = w.Write(p)
	}
	return len(p), nil
}

// Flush waits up to timeout for writers that queue (Async) to write what
// they hold, and reports whether all did. PID 1 calls it before it reboots.
func (l *Logger) Flush(timeout time.Duration) bool {
	l.mu.Lock()
	ws := append([]io.Writer(nil), l.ws...)
	l.mu.Unlock()
	deadline := time.Now().Add(timeout)
	ok := true
	for _, w := range ws {
		if f, isFlusher := w.(interface{ Flush(time.Duration) bool }); isFlusher {
			ok = f.Flush(time.Until(deadline)) && ok
		}
	}
	return ok
}

func trimNewline(s string) string {
	if n := len(s); n > 0 && s[n-1] == '\n' {
		return s[:n-1]
	}
	return s
}

// cut splits s at its first newline.
func cut(s string) (line, rest string, found bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

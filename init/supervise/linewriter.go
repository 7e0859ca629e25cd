package supervise

import (
	"bytes"
	"io"
	"sync"
)

// maxLine bounds a buffered partial line; a longer one is written in pieces.
const maxLine = 16 << 10

// lineWriter prefixes each line of a child's output ("etcd: ") and writes it
// to w with one Write per line, so a ring buffer or console logger never
// sees half a line.
type lineWriter struct {
	mu      sync.Mutex
	prefix  string
	w       io.Writer
	partial []byte
}

func newLineWriter(prefix string, w io.Writer) *lineWriter {
	return &lineWriter{prefix: prefix, w: w}
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.partial = append(l.partial, p...)
			if len(l.partial) >= maxLine {
				l.emit(l.partial)
				l.partial = l.partial[:0]
			}
			break
		}
		l.emit(append(l.partial, p[:i]...))
		l.partial = l.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}

// Flush writes a pending partial line, e.g. a panic message cut short.
func (l *lineWriter) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.partial) > 0 {
		l.emit(l.partial)
		l.partial = l.partial[:0]
	}
}

func (l *lineWriter) emit(line []byte) {
	b := make([]byte, 0, len(l.prefix)+len(line)+1)
	b = append(append(append(b, l.prefix...), line...), '\n')
	_, _ = l.w.Write(b) // a failing sink must not kill the child with EPIPE
}

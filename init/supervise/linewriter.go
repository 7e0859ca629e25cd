package supervise

import (
	"io"
	"sync"

	"github.com/etcdbox/etcdbox/init/console"
)

// maxLine bounds a buffered partial line; a longer one is written in pieces.
const maxLine = 16 << 10

// lineWriter prefixes each line of a child's output ("etcd: ") and writes it
// to w with one Write per line, so a ring buffer or console logger never
// sees half a line.
type lineWriter struct {
	mu    sync.Mutex
	split console.Splitter
}

func newLineWriter(prefix string, w io.Writer) *lineWriter {
	return &lineWriter{split: console.Splitter{Max: maxLine, Emit: func(line []byte) {
		b := make([]byte, 0, len(prefix)+len(line)+1)
		b = append(append(append(b, prefix...), line...), '\n')
		_, _ = w.Write(b) // a failing sink must not kill the child with EPIPE
	}}}
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.split.Write(p)
}

// Flush writes a pending partial line, e.g. a panic message cut short.
func (l *lineWriter) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.split.Flush()
}

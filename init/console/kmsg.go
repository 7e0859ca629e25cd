package console

import (
	"bytes"
	"fmt"
	"io"
	"os"
)

// kmsgMax bounds one record written to /dev/kmsg. The kernel refuses
// records longer than its line limit (976 bytes on 6.1) with EINVAL;
// longer lines are split.
const kmsgMax = 900

// Kmsg writes each line as one record to the kernel log, with priority
// "<6>" (info). /dev/kmsg treats every write(2) as one record, so Kmsg
// splits p into lines and long lines into pieces.
//
// The kernel rate-limits writes to /dev/kmsg (printk.devkmsg=ratelimit, the
// default: a burst of 10 records per 5 seconds), and it echoes records of
// level 6 to the console when the console loglevel is above 6. Send chatty
// output (etcd's log) to the console directly, not through kmsg, or boot
// with printk.devkmsg=on.
type Kmsg struct {
	W io.Writer
}

// OpenKmsg opens the kernel log device (normally /dev/kmsg) for writing.
func OpenKmsg(path string) (*Kmsg, error) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return &Kmsg{W: f}, nil
}

// Write writes one record per line of p and reports the first error.
func (k *Kmsg) Write(p []byte) (int, error) {
	n := len(p)
	var first error
	for len(p) > 0 {
		line := p
		if i := bytes.IndexByte(p, '\n'); i >= 0 {
			line, p = p[:i], p[i+1:]
		} else {
			p = nil
		}
		for {
			piece := line
			if len(piece) > kmsgMax {
				piece = piece[:kmsgMax]
			}
			rec := make([]byte, 0, len(piece)+4)
			rec = append(append(append(rec, "<6>"...), piece...), '\n')
			if _, err := k.W.Write(rec); err != nil && first == nil {
				first = err
			}
			line = line[len(piece):]
			if len(line) == 0 {
				break
			}
		}
	}
	if first != nil {
		return 0, fmt.Errorf("write kmsg: %w", first)
	}
	return n, nil
}

// Close closes the underlying writer when it is an io.Closer.
func (k *Kmsg) Close() error {
	if c, ok := k.W.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

package qemu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"time"
)

// ConsoleMatch is a console line that WaitConsole found.
type ConsoleMatch struct {
	// Text is the searched text the line contains.
	Text string
	// Line is the whole line, without its line ending.
	Line string
	// Offset is where the line starts in the console log; Next is where
	// the line after it starts, to wait for a later marker from.
	Offset, Next int64
}

// consolePoll is how often WaitConsole looks at the log for new lines.
const consolePoll = 100 * time.Millisecond

// ConsolePath returns the path of the serial console log of this run.
func (v *VM) ConsolePath() string { return v.path(consoleFile) }

// Console returns the serial console log of this run so far, or "" when
// there is none yet.
func (v *VM) Console() string {
	b, _ := os.ReadFile(v.ConsolePath())
	return string(b)
}

// ConsoleTail returns the last n lines of the console log, made safe for
// a terminal (see Printable).
func (v *VM) ConsoleTail(n int) string { return Tail(v.Console(), n) }

// Mark returns the console log's current length: WaitConsole from a mark
// taken before an action sees only what the guest printed after it.
func (v *VM) Mark() int64 {
	fi, err := os.Stat(v.ConsolePath())
	if err != nil {
		return 0
	}
	return fi.Size()
}

// WaitConsole waits until a console line after offset from contains one
// of texts, and returns it. It polls the log until ctx ends, and fails
// with ErrExited when QEMU exits before such a line appears.
func (v *VM) WaitConsole(ctx context.Context, from int64, texts ...string) (ConsoleMatch, error) {
	m, err := waitConsole(ctx, v.ConsolePath(), from, texts, v.Done())
	if err != nil {
		return m, fmt.Errorf("wait for %q on the console of %s: %w", texts, v.name, err)
	}
	return m, nil
}

// waitConsole scans the file at path from offset from for a line holding
// one of texts. done closes when the writer is gone: the file then gets
// one last look, and an unterminated last line counts too.
func waitConsole(ctx context.Context, path string, from int64, texts []string, done <-chan struct{}) (ConsoleMatch, error) {
	tick := time.NewTicker(consolePoll)
	defer tick.Stop()
	var (
		f     *os.File
		buf   []byte // unconsumed bytes, starting at lineStart
		start = from
		next  = from // where the next read starts
	)
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for {
		exited := false
		select {
		case <-done:
			exited = true
		default:
		}
		if f == nil {
			var err error
			if f, err = os.Open(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return ConsoleMatch{}, err
			}
		}
		if f != nil {
			n, err := readFrom(f, next, &buf)
			if err != nil {
				return ConsoleMatch{}, err
			}
			next += n
			for {
				i := bytes.IndexByte(buf, '\n')
				if i < 0 {
					break
				}
				line := strings.TrimRight(string(buf[:i]), "\r")
				if t, ok := contains(line, texts); ok {
					return ConsoleMatch{Text: t, Line: line, Offset: start, Next: start + int64(i) + 1}, nil
				}
				buf = buf[i+1:]
				start += int64(i) + 1
			}
			if exited {
				line := strings.TrimRight(string(buf), "\r")
				if t, ok := contains(line, texts); ok {
					return ConsoleMatch{Text: t, Line: line, Offset: start, Next: start + int64(len(buf))}, nil
				}
			}
		}
		if exited {
			return ConsoleMatch{}, ErrExited
		}
		select {
		case <-ctx.Done():
			return ConsoleMatch{}, ctx.Err()
		case <-done:
		case <-tick.C:
		}
	}
}

// readFrom appends what f holds from off on to buf and returns how many
// bytes it read.
func readFrom(f *os.File, off int64, buf *[]byte) (int64, error) {
	var total int64
	chunk := make([]byte, 64<<10)
	for {
		n, err := f.ReadAt(chunk, off+total)
		*buf = append(*buf, chunk[:n]...)
		total += int64(n)
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

func contains(line string, texts []string) (string, bool) {
	for _, t := range texts {
		if strings.Contains(line, t) {
			return t, true
		}
	}
	return "", false
}

// Tail returns the last n lines of a console log, made Printable.
func Tail(log string, n int) string {
	lines := strings.Split(strings.TrimRight(Printable(log), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// escapes matches the terminal control sequences firmware prints (CSI
// sequences such as clear-screen, and two-byte escapes).
var escapes = regexp.MustCompile(`\x1b(\[[0-?]*[ -/]*[@-~]|[@-Z\\-_])`)

// Printable strips terminal control sequences and carriage returns from
// console output, so that showing it cannot clear or recolour the
// user's terminal.
func Printable(s string) string {
	s = escapes.ReplaceAllString(s, "")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || r >= ' ' && r != 0x7f {
			return r
		}
		return -1
	}, s)
}

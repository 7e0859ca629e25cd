package console

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// Limits of a Limiter: the lines of one shape it passes in a window, and
// the shapes it tracks at once.
const (
	DefaultBurst  = 10
	DefaultWindow = time.Minute
	maxShapes     = 256
)

// Limiter passes lines to W, at most Burst lines of one shape in each
// Window; the rest it holds back, and when the window ends it writes one
// line saying how many ("… and 4312 more like this in the last 1m0s:
// <the first of them>"). A line's shape is the line with every run of
// digits made one '#', so that lines differing only in a port, a count or
// a time stamp (etcd's "ts") are one shape. A stranger who fails TLS
// handshakes by the thousand thus cannot flood the console or push the
// init's and etcd's own lines out of the log ring.
//
// It is an io.Writer of whole lines (a console.Logger, or the line writer
// of a supervised child, writes one line per Write) and safe for
// concurrent use.
type Limiter struct {
	W         io.Writer
	Burst     int           // 0: DefaultBurst
	Window    time.Duration // 0: DefaultWindow
	now       func() time.Time
	afterFunc func(time.Duration, func()) // time.AfterFunc; tests replace it
	mu        sync.Mutex
	shapes    map[string]*shapeCount
}

// shapeCount is one shape's window.
type shapeCount struct {
	start   time.Time
	passed  int
	held    int
	example string // the first line held back
}

// NewLimiter returns a Limiter writing to w with the default limits.
func NewLimiter(w io.Writer) *Limiter { return &Limiter{W: w} }

// Write passes or holds back the line p.
func (l *Limiter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shapes == nil {
		l.shapes = map[string]*shapeCount{}
	}
	now := l.clock()
	key := shape(p)
	c := l.shapes[key]
	if c == nil || now.Sub(c.start) >= l.window() {
		if c != nil && c.held > 0 {
			l.summary(c)
		}
		if c == nil && len(l.shapes) >= maxShapes {
			// Too many shapes to track: forget the old windows (their
			// held lines are summed up first).
			for k, old := range l.shapes {
				if old.held > 0 {
					l.summary(old)
				}
				delete(l.shapes, k)
			}
		}
		c = &shapeCount{start: now}
		l.shapes[key] = c
	}
	if c.passed < l.burst() {
		c.passed++
		_, _ = l.W.Write(p)
		return len(p), nil
	}
	if c.held == 0 {
		c.example = string(bytes.TrimRight(p, "\n"))
		// Say how many were held once the window ends, even when no line
		// of this shape comes after it.
		start := c.start
		l.after(c.start.Add(l.window()).Sub(now), func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if cur := l.shapes[key]; cur != nil && cur.start.Equal(start) && cur.held > 0 {
				l.summary(cur)
				cur.held = 0
			}
		})
	}
	c.held++
	return len(p), nil
}

// summary writes how many lines of c's shape were held back in its
// whole window; l.mu held.
func (l *Limiter) summary(c *shapeCount) { l.summaryOver(c, l.window()) }

func (l *Limiter) summaryOver(c *shapeCount, d time.Duration) {
	fmt.Fprintf(l.W, "%s… and %d more like this in the last %s: %s\n", Prefix, c.held, d, c.example)
}

// Flush writes, for every shape with lines held back in its window, how
// many, counted from the window's start, oldest window first; the window
// goes on, its held lines counted afresh. A shutdown calls it last, so
// that what the windows' ends would have said is not lost with the
// machine.
func (l *Limiter) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock()
	var held []*shapeCount
	for _, c := range l.shapes {
		if c.held > 0 {
			held = append(held, c)
		}
	}
	slices.SortFunc(held, func(a, b *shapeCount) int { return a.start.Compare(b.start) })
	for _, c := range held {
		l.summaryOver(c, now.Sub(c.start).Round(time.Second))
		c.held = 0
	}
}

func (l *Limiter) burst() int {
	if l.Burst > 0 {
		return l.Burst
	}
	return DefaultBurst
}

func (l *Limiter) window() time.Duration {
	if l.Window > 0 {
		return l.Window
	}
	return DefaultWindow
}

func (l *Limiter) clock() time.Time {
	if l.now != nil {
		return l.now()
	}
	return time.Now()
}

func (l *Limiter) after(d time.Duration, f func()) {
	if l.afterFunc != nil {
		l.afterFunc(d, f)
		return
	}
	time.AfterFunc(d, f)
}

// shape is p with each run of digits made one '#', and without its
// newline.
func shape(p []byte) string {
	p = bytes.TrimRight(p, "\n")
	out := make([]byte, 0, len(p))
	digits := false
	for _, b := range p {
		if b >= '0' && b <= '9' {
			if !digits {
				out = append(out, '#')
			}
			digits = true
			continue
		}
		digits = false
		out = append(out, b)
	}
	return string(out)
}

// Printf prints one message through the limiter, each of its lines
// prefixed as a Logger prints it.
func (l *Limiter) Printf(format string, args ...any) {
	msg := trimNewline(fmt.Sprintf(format, args...))
	for {
		line, rest, more := cut(msg)
		_, _ = l.Write([]byte(Prefix + line + "\n"))
		if !more {
			return
		}
		msg = rest
	}
}

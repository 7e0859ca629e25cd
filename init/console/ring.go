package console

import "sync"

// MaxLine bounds one line in a Ring. A longer line is stored in pieces, so a
// child that never writes a newline cannot grow memory without bound.
const MaxLine = 4096

// Ring keeps the last N lines written to it, oldest first. It is an
// io.Writer that splits its input into lines; a line may arrive over several
// writes. It is safe for concurrent use. Lines are stored without their
// newline.
type Ring struct {
	mu    sync.Mutex
	lines []string // circular; len(lines) == capacity
	next  int      // index of the slot to write next
	full  bool     // every slot holds a line
	total uint64   // lines pushed since the start: the last one's sequence number
	split Splitter // the current line, not yet ended by '\n'
}

// NewRing returns a Ring that keeps the last n lines (at least one).
func NewRing(n int) *Ring {
	if n < 1 {
		n = 1
	}
	r := &Ring{lines: make([]string, n)}
	r.split = Splitter{Max: MaxLine, Emit: func(line []byte) { r.push(string(line)) }}
	return r
}

// Write stores the lines of p. It never fails.
func (r *Ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.split.Write(p)
}

func (r *Ring) push(line string) {
	r.total++
	r.lines[r.next] = line
	r.next++
	if r.next == len(r.lines) {
		r.next = 0
		r.full = true
	}
}

// Lines returns a copy of the stored lines, oldest first. A line still
// waiting for its newline comes last, so nothing written is hidden.
func (r *Ring) Lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	if r.full {
		out = make([]string, 0, len(r.lines)+1)
		out = append(out, r.lines[r.next:]...)
	} else {
		out = make([]string, 0, r.next+1)
	}
	out = append(out, r.lines[:r.next]...)
	if p := r.split.Partial(); len(p) > 0 {
		out = append(out, string(p))
	}
	return out
}

// Seq is the sequence number of the last complete line: lines are
// numbered from 1 as they end. A follower reads Since(Seq()) next.
func (r *Ring) Seq() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

// Since returns the complete lines after sequence number seq, oldest
// first, at most max of them (the oldest), the sequence number of the
// last one returned (seq when there is none), and how many lines after
// seq the ring no longer holds. A seq past the last line means the ring
// started again (the node rebooted): everything it holds follows.
func (r *Ring) Since(seq uint64, max int) (lines []string, last, dropped uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	held := uint64(r.next)
	if r.full {
		held = uint64(len(r.lines))
	}
	first := r.total - held + 1 // the oldest held line's number
	if seq > r.total {
		seq = first - 1
	}
	if seq+1 < first {
		dropped = first - (seq + 1)
		seq = first - 1
	}
	n := r.total - seq
	if max > 0 && n > uint64(max) {
		n = uint64(max)
	}
	lines = make([]string, 0, n)
	for i := seq + 1; i <= seq+n; i++ {
		// Line i sits held-(total-i) slots back from next.
		idx := (r.next - int(r.total-i) - 1 + 2*len(r.lines)) % len(r.lines)
		lines = append(lines, r.lines[idx])
	}
	return lines, seq + n, dropped
}

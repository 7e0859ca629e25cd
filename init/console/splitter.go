package console

import "bytes"

// Splitter cuts what is written to it into lines, which may arrive over
// several writes, and hands each to Emit without its newline. A line
// longer than Max goes in pieces of Max bytes, so a writer that never
// ends a line cannot grow memory without bound. It is the one line
// splitter of the init: the log ring (Ring) and the supervisor's child
// output both use it.
//
// A Splitter is not safe for concurrent use: its owner holds a lock
// around Write, Flush and Partial.
type Splitter struct {
	// Max is the longest piece handed to Emit; it must be positive.
	Max int
	// Emit receives each line. The slice is valid only during the call.
	Emit    func(line []byte)
	partial []byte
}

// Write splits p into lines. It never fails.
func (s *Splitter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.partial = append(s.partial, p...)
			for len(s.partial) >= s.Max {
				s.Emit(s.partial[:s.Max])
				s.partial = append(s.partial[:0], s.partial[s.Max:]...)
			}
			break
		}
		line := p[:i]
		if len(s.partial) > 0 {
			s.partial = append(s.partial, line...)
			line = s.partial
		}
		for len(line) > s.Max {
			s.Emit(line[:s.Max])
			line = line[s.Max:]
		}
		s.Emit(line)
		s.partial = s.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}

// Flush hands over the line still waiting for its newline, if any, e.g.
// a panic message cut short.
func (s *Splitter) Flush() {
	if len(s.partial) > 0 {
		s.Emit(s.partial)
		s.partial = s.partial[:0]
	}
}

// Partial is the line still waiting for its newline; valid until the next
// Write or Flush.
func (s *Splitter) Partial() []byte { return s.partial }

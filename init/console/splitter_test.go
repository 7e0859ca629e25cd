package console

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSplitter: lines that span writes come whole, long ones in pieces of
// Max, and the unfinished line waits for its newline or a Flush.
func TestSplitter(t *testing.T) {
	var got []string
	s := Splitter{Max: 4, Emit: func(l []byte) { got = append(got, string(l)) }}
	for _, w := range []string{"ab", "c\nd", "\n\n", "0123456789", "x\nlong line\ny"} {
		n, err := s.Write([]byte(w))
		assert.NoError(t, err)
		assert.Equal(t, len(w), n)
	}
	assert.Equal(t, []string{"abc", "d", "", "0123", "4567", "89x", "long", " lin", "e"}, got)
	assert.Equal(t, "y", string(s.Partial()))
	s.Flush()
	assert.Equal(t, "y", got[len(got)-1])
	assert.Empty(t, s.Partial())
	s.Flush()
	assert.Len(t, got, 10, "a second Flush has nothing to hand over")

	// A line of exactly Max bytes is one piece, then the empty rest.
	got = nil
	_, _ = s.Write([]byte(strings.Repeat("z", 4) + "\n"))
	assert.Equal(t, []string{"zzzz"}, got)
}

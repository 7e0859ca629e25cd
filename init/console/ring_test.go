package console

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRingSince(t *testing.T) {
	r := NewRing(4)
	lines, last, dropped := r.Since(0, 0)
	assert.Empty(t, lines)
	assert.Zero(t, last)
	assert.Zero(t, dropped)
	fmt.Fprint(r, "a\nb\nc")
	assert.Equal(t, uint64(2), r.Seq(), "a partial line has no number yet")
	lines, last, dropped = r.Since(0, 0)
	assert.Equal(t, []string{"a", "b"}, lines)
	assert.Equal(t, uint64(2), last)
	assert.Zero(t, dropped)
	fmt.Fprint(r, "\nd\ne\nf\n") // c d e f held; a, b gone
	lines, last, dropped = r.Since(2, 0)
	assert.Equal(t, []string{"c", "d", "e", "f"}, lines)
	assert.Equal(t, uint64(6), last)
	assert.Zero(t, dropped)
	lines, last, dropped = r.Since(1, 0)
	assert.Equal(t, []string{"c", "d", "e", "f"}, lines)
	assert.Equal(t, uint64(6), last)
	assert.Equal(t, uint64(1), dropped, "b was overwritten")
	lines, last, _ = r.Since(3, 2)
	assert.Equal(t, []string{"d", "e"}, lines, "max keeps the oldest")
	assert.Equal(t, uint64(5), last)
	lines, last, _ = r.Since(6, 0)
	assert.Empty(t, lines)
	assert.Equal(t, uint64(6), last)
	// A follower's number from before a restart: everything held.
	lines, last, dropped = r.Since(99, 0)
	assert.Equal(t, []string{"c", "d", "e", "f"}, lines)
	assert.Equal(t, uint64(6), last)
	assert.Zero(t, dropped)
}

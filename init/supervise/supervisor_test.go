package supervise

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: 30 * time.Second, Factor: 2, Reset: time.Minute}
	tests := []struct {
		name     string
		b        Backoff
		failures int
		want     time.Duration
	}{
		{"first", b, 0, time.Second},
		{"second", b, 1, 2 * time.Second},
		{"fifth", b, 4, 16 * time.Second},
		{"capped", b, 5, 30 * time.Second},
		{"capped far out", b, 1000, 30 * time.Second},
		{"factor 1.5", Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Factor: 1.5}, 2, 225 * time.Millisecond},
		{"defaults", Backoff{}, 3, 8 * time.Second},
		{"max below initial", Backoff{Initial: 5 * time.Second, Max: time.Second}, 2, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.b.withDefaults().delay(tt.failures)
			assert.Equal(t, tt.want, got, "delay(%d)", tt.failures)
		})
	}
}

func TestBackoffDefaults(t *testing.T) {
	assert.Equal(t, DefaultBackoff, Backoff{}.withDefaults())
	assert.Equal(t, Backoff{Initial: time.Second, Max: 30 * time.Second, Factor: 2, Reset: time.Minute}, DefaultBackoff)
}

func TestLineWriter(t *testing.T) {
	var got []string
	w := writerFunc(func(p []byte) (int, error) { got = append(got, string(p)); return len(p), nil })
	lw := newLineWriter("etcd: ", w)
	_, _ = lw.Write([]byte("a\nb"))
	_, _ = lw.Write([]byte("c\n\npanic: x"))
	assert.Equal(t, []string{"etcd: a\n", "etcd: bc\n", "etcd: \n"}, got)
	lw.Flush()
	assert.Equal(t, "etcd: panic: x\n", got[len(got)-1])
	lw.Flush()
	assert.Len(t, got, 4, "Flush with nothing pending writes nothing")
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

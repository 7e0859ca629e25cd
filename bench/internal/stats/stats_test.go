package stats

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []float64
		want Summary
	}{
		{"empty", nil, Summary{}},
		{"one", []float64{2}, Summary{N: 1, Median: 2, Min: 2, Max: 2}},
		{"odd", []float64{3, 1, 2}, Summary{N: 3, Median: 2, Min: 1, Max: 3}},
		{"even", []float64{4, 1, 3, 2}, Summary{N: 4, Median: 2.5, Min: 1, Max: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Of(tc.in), "Of(%v)", tc.in)
		})
	}
}

func TestFormatAndRatio(t *testing.T) {
	a := Durations([]time.Duration{3 * time.Second, time.Second, 2 * time.Second})
	b := Of([]float64{1})
	assert.Equal(t, "2.0s (min 1.0s, max 3.0s, n=3)", a.Format("%.1fs"))
	assert.Equal(t, "n/a", Summary{}.Format("%.1fs"))
	assert.Equal(t, "2.00x", Ratio(a, b))
	assert.Equal(t, "n/a", Ratio(a, Summary{}))
}

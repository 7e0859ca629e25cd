// Package stats summarises repeated measurements for the bench programs:
// median, min and max, and the ratio of two medians. Figures are printed
// for people and never asserted; this machine is too noisy for
// thresholds, so benchmarks compare variants side by side in one run.
package stats

import (
	"fmt"
	"slices"
	"time"
)

// Summary is the median, min and max of a sample.
type Summary struct {
	N                int
	Median, Min, Max float64
}

// Of summarises xs; the median of an even count is the mean of the two
// middle values. An empty sample gives the zero Summary.
func Of(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + m) / 2
	}
	return Summary{N: len(s), Median: m, Min: s[0], Max: s[len(s)-1]}
}

// Durations summarises ds in seconds.
func Durations(ds []time.Duration) Summary {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = d.Seconds()
	}
	return Of(xs)
}

// Format prints the summary with the verb f for each value, e.g. "%.1fs":
// "12.3s (min 11.9s, max 13.0s, n=3)", or "n/a" for an empty sample.
func (s Summary) Format(f string) string {
	if s.N == 0 {
		return "n/a"
	}
	return fmt.Sprintf(f+" (min "+f+", max "+f+", n=%d)", s.Median, s.Min, s.Max, s.N)
}

// Ratio returns "a/b" of the medians as "1.23x", or "n/a" when either
// sample is empty or b's median is zero.
func Ratio(a, b Summary) string {
	if a.N == 0 || b.N == 0 || b.Median == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", a.Median/b.Median)
}

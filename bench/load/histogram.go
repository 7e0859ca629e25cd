package load

import (
	"math"
	"math/bits"
	"time"
)

// subBits sets a Histogram's precision: each power of two of nanoseconds
// is split into 2^subBits equal buckets, so a recorded value is known to
// within 1/2^subBits (0.8%) of itself, as in an HDR histogram with two
// significant digits.
const subBits = 7

const subCount = 1 << subBits

// Histogram counts latencies in log-linear buckets: values below
// 2^subBits ns have a bucket each, and every power of two above is cut
// into 2^subBits equal buckets. It records in constant time and memory
// (64 powers of two at most), merges by adding counts, and answers
// quantiles to within a bucket's width. The zero value is empty and
// ready; it is not safe for concurrent use (give each goroutine its own
// and Merge them).
type Histogram struct {
	counts   []uint64
	n        uint64
	sum      float64 // ns, for the mean
	min, max time.Duration
}

// bucketOf returns the bucket index of v ns (v >= 0).
func bucketOf(v uint64) int {
	if v < subCount {
		return int(v)
	}
	exp := bits.Len64(v) - 1 - subBits // v >> exp is in [subCount, 2*subCount)
	return (exp+1)*subCount + int(v>>exp) - subCount
}

// bucketRange returns the smallest value of bucket i and its width, in ns.
func bucketRange(i int) (lo, width uint64) {
	if i < subCount {
		return uint64(i), 1
	}
	exp := i/subCount - 1
	sub := uint64(i%subCount) + subCount
	return sub << exp, 1 << exp
}

// Record counts one latency; a negative one counts as zero.
func (h *Histogram) Record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	i := bucketOf(uint64(d))
	if i >= len(h.counts) {
		grown := make([]uint64, i+1+subCount)
		copy(grown, h.counts)
		h.counts = grown
	}
	h.counts[i]++
	if h.n == 0 || d < h.min {
		h.min = d
	}
	if d > h.max {
		h.max = d
	}
	h.n++
	h.sum += float64(d)
}

// Merge adds o's counts to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	if len(o.counts) > len(h.counts) {
		grown := make([]uint64, len(o.counts))
		copy(grown, h.counts)
		h.counts = grown
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// Count is the number of recorded values.
func (h *Histogram) Count() uint64 { return h.n }

// Min and Max are the exact extremes (0 when empty).
func (h *Histogram) Min() time.Duration { return h.min }

// Max is the largest recorded value.
func (h *Histogram) Max() time.Duration { return h.max }

// Mean is the exact mean (0 when empty).
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.n))
}

// Quantile returns the value below which a fraction q (0..1) of the
// recorded values lie: the value of rank ceil(q*n), interpolated inside
// its bucket and kept within [Min, Max]; Min for q <= 0. It is 0 when
// empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	if q <= 0 {
		return h.min
	}
	q = math.Min(math.Max(q, 0), 1)
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		if c == 0 || seen+c < rank {
			seen += c
			continue
		}
		lo, width := bucketRange(i)
		// The rank's place among the bucket's c values, spread evenly.
		v := time.Duration(float64(lo) + float64(width)*(float64(rank-seen)-0.5)/float64(c))
		return min(max(v, h.min), h.max)
	}
	return h.max
}

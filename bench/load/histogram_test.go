package load

import (
	"math/rand/v2"
	"testing"
	"time"
)

// within fails unless got is within frac of want.
func within(t *testing.T, what string, got, want time.Duration, frac float64) {
	t.Helper()
	if d := float64(got - want); d > frac*float64(want) || -d > frac*float64(want) {
		t.Errorf("%s = %s, want %s within %.1f%%", what, got, want, 100*frac)
	}
}

func TestBucketsCoverEveryValue(t *testing.T) {
	for _, v := range []uint64{0, 1, 127, 128, 129, 255, 256, 257, 511, 512, 1e3, 1e6, 123456789, 1 << 40, 1<<63 - 1} {
		lo, w := bucketRange(bucketOf(v))
		if v < lo || v >= lo+w {
			t.Errorf("value %d: bucket [%d, %d)", v, lo, lo+w)
		}
		if v >= subCount && float64(w)/float64(v) > 1.0/subCount {
			t.Errorf("value %d: bucket width %d is over 1/%d of it", v, w, subCount)
		}
	}
	// Consecutive buckets tile the line.
	for i := range 40 * subCount {
		lo, w := bucketRange(i)
		next, _ := bucketRange(i + 1)
		if lo+w != next {
			t.Fatalf("bucket %d ends at %d, bucket %d starts at %d", i, lo+w, i+1, next)
		}
	}
}

func TestQuantilesOfUniform(t *testing.T) {
	var h Histogram
	// 1ms, 2ms, ..., 10000ms, shuffled: the q-quantile is q*10s.
	vals := make([]time.Duration, 10000)
	for i := range vals {
		vals[i] = time.Duration(i+1) * time.Millisecond
	}
	rand.Shuffle(len(vals), func(i, j int) { vals[i], vals[j] = vals[j], vals[i] })
	for _, v := range vals {
		h.Record(v)
	}
	if h.Count() != 10000 || h.Min() != time.Millisecond || h.Max() != 10*time.Second {
		t.Fatalf("count %d min %s max %s", h.Count(), h.Min(), h.Max())
	}
	within(t, "mean", h.Mean(), 5000500*time.Microsecond, 1e-9)
	for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 0.999} {
		within(t, "quantile", h.Quantile(q), time.Duration(q*10000)*time.Millisecond, 0.01)
	}
	if h.Quantile(1) != 10*time.Second || h.Quantile(0) != time.Millisecond {
		t.Errorf("q0 %s, q1 %s: want the min and the max", h.Quantile(0), h.Quantile(1))
	}
}

// A bimodal sample, as a cluster gives when 1% of requests wait for an
// election or a slow fsync: p50 sits in the fast mode, p99 at the edge.
func TestQuantilesOfBimodal(t *testing.T) {
	var fast, slow Histogram
	for i := range 9900 {
		fast.Record(2*time.Millisecond + time.Duration(i%100)*time.Microsecond)
	}
	for range 100 {
		slow.Record(300 * time.Millisecond)
	}
	var h Histogram
	h.Merge(&fast)
	h.Merge(&slow)
	h.Merge(&Histogram{})
	if h.Count() != 10000 {
		t.Fatalf("count %d after merging", h.Count())
	}
	within(t, "p50", h.Quantile(0.5), 2050*time.Microsecond, 0.01)
	within(t, "p99", h.Quantile(0.99), 2099*time.Microsecond, 0.01)
	within(t, "p99.5", h.Quantile(0.995), 300*time.Millisecond, 0.01)
	if h.Min() != 2*time.Millisecond || h.Max() != 300*time.Millisecond {
		t.Errorf("min %s max %s", h.Min(), h.Max())
	}
}

func TestEmptyAndNegative(t *testing.T) {
	var h Histogram
	if h.Quantile(0.5) != 0 || h.Mean() != 0 || h.Count() != 0 {
		t.Fatal("an empty histogram answers 0")
	}
	h.Record(-time.Second)
	if h.Count() != 1 || h.Quantile(0.99) != 0 {
		t.Fatalf("a negative latency counts as 0: count %d, p99 %s", h.Count(), h.Quantile(0.99))
	}
}

func BenchmarkRecord(b *testing.B) {
	var h Histogram
	for i := range b.N {
		h.Record(time.Duration(i) * time.Microsecond)
	}
}

func TestResultAdd(t *testing.T) {
	var sum Result
	for _, ms := range []int{10, 30} {
		r := Result{Op: Put, Clients: 16, Ops: 2, Elapsed: time.Second, Latency: &Histogram{}}
		r.Latency.Record(time.Duration(ms) * time.Millisecond)
		r.Latency.Record(time.Duration(ms) * time.Millisecond)
		sum.Add(r)
	}
	if sum.Name() != "put c16" || sum.Ops != 4 || sum.Elapsed != 2*time.Second || sum.Throughput() != 2 {
		t.Errorf("got %s", sum)
	}
	if sum.Latency.Count() != 4 || sum.Latency.Min() != 10*time.Millisecond || sum.Latency.Max() != 30*time.Millisecond {
		t.Errorf("latencies: %d, %s to %s", sum.Latency.Count(), sum.Latency.Min(), sum.Latency.Max())
	}
}

package loadbench

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestHistogramQuantiles(t *testing.T) {
	tests := []struct {
		name string
		gen  func(r *rand.Rand) time.Duration
	}{
		{"small-exact", func(r *rand.Rand) time.Duration { return time.Duration(r.IntN(200)) }},
		{"micro-to-milli", func(r *rand.Rand) time.Duration { return time.Duration(1e3 + r.ExpFloat64()*3e5) }},
		{"bimodal-with-tail", func(r *rand.Rand) time.Duration {
			if r.IntN(100) == 0 {
				return time.Duration(5e7 + r.IntN(1e9))
			}
			return time.Duration(2e5 + r.IntN(1e5))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			var h Histogram
			var all []time.Duration
			for range 100000 {
				d := tt.gen(r)
				h.Record(d)
				all = append(all, d)
			}
			slices.Sort(all)
			for _, q := range []float64{0, 0.01, 0.5, 0.9, 0.99, 0.999, 1} {
				rank := int(float64(len(all))*q+0.999999) - 1
				want := all[max(rank, 0)]
				got := h.Quantile(q)
				if diff := float64(got - want); diff > float64(want)/128+1 || -diff > float64(want)/128+1 {
					t.Errorf("q%g = %v, exact %v (more than 1/128 off)", q, got, want)
				}
			}
			if h.Max() != all[len(all)-1] || h.Count() != uint64(len(all)) {
				t.Errorf("max %v count %d, want %v %d", h.Max(), h.Count(), all[len(all)-1], len(all))
			}
		})
	}
}

func TestHistogramMergeAndEmpty(t *testing.T) {
	var a, b, empty Histogram
	if empty.Quantile(0.5) != 0 || empty.Mean() != 0 {
		t.Fatal("an empty histogram has no figures")
	}
	for i := 1; i <= 100; i++ {
		a.Record(time.Duration(i) * time.Millisecond)
		b.Record(time.Duration(i+100) * time.Millisecond)
	}
	a.Merge(&b)
	a.Merge(&empty)
	if a.Count() != 200 || a.Max() != 200*time.Millisecond {
		t.Fatalf("count %d max %v", a.Count(), a.Max())
	}
	if p50 := a.Quantile(0.5); p50 < 99*time.Millisecond || p50 > 101*time.Millisecond {
		t.Fatalf("p50 %v, want ~100ms", p50)
	}
	if a.Quantile(0) != time.Millisecond {
		t.Fatalf("min %v", a.Quantile(0))
	}
	a.Record(-time.Second) // a clock step back counts as zero
	if a.Quantile(0) != 0 {
		t.Fatalf("min %v after a negative sample", a.Quantile(0))
	}
}

func TestBucketsCoverEveryValue(t *testing.T) {
	for _, v := range []uint64{0, 1, 255, 256, 257, 1000, 1 << 20, 1<<20 + 12345, 1 << 40, 1<<63 - 1} {
		i := bucketOf(v)
		if i < 0 || i >= nBuckets {
			t.Fatalf("bucket of %d is %d (of %d)", v, i, nBuckets)
		}
		lo, hi := bucketRange(i)
		if v < lo || v > hi {
			t.Fatalf("%d is in bucket %d = [%d, %d]", v, i, lo, hi)
		}
	}
}

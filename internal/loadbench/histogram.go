package loadbench

import (
	"math"
	"math/bits"
	"time"
)

// subBits sets the histogram's precision: each power of two is cut into 2^subBits buckets, so a
// recorded latency is known to within 1/2^subBits (0.8 %) of its value.
const (
	subBits    = 7
	subCount   = 1 << subBits
	nBuckets   = (64 - subBits) * subCount
	exactBelow = 2 * subCount // values below this have a bucket of their own
)

// Histogram records latencies (in nanoseconds) in log-linear buckets, HDR-style: a fixed 58 KiB
// array, so recording allocates nothing and costs a few nanoseconds, whatever the count. The
// zero value is empty and ready. A Histogram is not safe for concurrent use: each connection
// records into its own, and Merge adds them up.
type Histogram struct {
	counts   [nBuckets]uint64
	n        uint64
	sum      float64
	min, max int64
}

// bucketOf returns the bucket index of v ≥ 0.
func bucketOf(v uint64) int {
	if v < exactBelow {
		return int(v)
	}
	shift := bits.Len64(v) - (subBits + 1)
	top := v >> uint(shift) // in [subCount, 2*subCount)
	return (shift+1)*subCount + int(top-subCount)
}

// bucketRange returns the smallest and largest value of bucket i.
func bucketRange(i int) (lo, hi uint64) {
	if i < exactBelow {
		return uint64(i), uint64(i)
	}
	shift := uint(i/subCount - 1)
	top := uint64(i%subCount + subCount)
	return top << shift, (top+1)<<shift - 1
}

// Record adds one latency; a negative one counts as zero.
func (h *Histogram) Record(d time.Duration) {
	v := max(int64(d), 0)
	h.counts[bucketOf(uint64(v))]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += float64(v)
}

// Merge adds every latency of o.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
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

// Count is the number of latencies recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Max is the largest latency recorded (exact).
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Mean is the mean latency (exact).
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.n))
}

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of the recorded latencies: the value at rank
// ⌈q·n⌉, as the middle of its bucket (within 0.4 % of it), never outside [min, max]; q ≤ 0
// is the minimum and q ≥ 1 the maximum (exact). Zero when nothing was recorded.
func (h *Histogram) Quantile(q float64) time.Duration {
	switch {
	case h.n == 0:
		return 0
	case q <= 0:
		return time.Duration(h.min)
	case q >= 1:
		return time.Duration(h.max)
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := bucketRange(i)
			v := int64(lo + (hi-lo)/2)
			return time.Duration(min(max(v, h.min), h.max))
		}
	}
	return time.Duration(h.max)
}

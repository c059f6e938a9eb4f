package wasm

import "sync/atomic"

// memBudget is the memory budget shared by every linear memory the executor makes (the guests'
// and the Extism kernels', running or pooled) and every snapshot: a memory that would grow
// past it fails to grow (the guest runs out of memory), and a run that finds it exhausted is
// refused at once (admission.go).
type memBudget struct {
	limit atomic.Int64 // zero: no limit
	used  atomic.Int64
}

func newBudget(limit int64) *memBudget {
	b := &memBudget{}
	b.limit.Store(limit)
	return b
}

// fits reports whether n more bytes fit.
func (b *memBudget) fits(n int) bool {
	l := b.limit.Load()
	return l <= 0 || b.used.Load()+int64(n) <= l
}

// take charges n bytes, or reports false when they do not fit.
func (b *memBudget) take(n int) bool {
	limit := b.limit.Load()
	if limit <= 0 {
		b.used.Add(int64(n))
		return true
	}
	for {
		cur := b.used.Load()
		if cur+int64(n) > limit {
			return false
		}
		if b.used.CompareAndSwap(cur, cur+int64(n)) {
			return true
		}
	}
}

func (b *memBudget) give(n int) { b.used.Add(-int64(n)) }

// Used returns the bytes charged.
func (b *memBudget) Used() int64 { return b.used.Load() }

package wasm

import "sync/atomic"

// memBudget is the memory budget shared by every linear memory the executor makes (the guests'
// and the Extism kernels', running or pooled) and every snapshot: a memory that would grow
// past it fails to grow (the guest runs out of memory), and a run that finds it exhausted is
// refused at once (admission.go).
type memBudget struct {
	limit int64
	used  atomic.Int64
}

// take charges n bytes, or reports false when they do not fit.
func (b *memBudget) take(n int) bool {
	if b.limit <= 0 {
		b.used.Add(int64(n))
		return true
	}
	for {
		cur := b.used.Load()
		if cur+int64(n) > b.limit {
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

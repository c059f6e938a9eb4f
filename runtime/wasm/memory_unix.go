//go:build linux || darwin || freebsd || netbsd || openbsd

package wasm

import (
	"context"
	"sync"
	"syscall"

	"github.com/tetratelabs/wazero/experimental"
)

// Linear memories.
//
// Each guest's (and each Extism kernel's) linear memory is an anonymous mapping of its own, of
// the memory's maximum size, instead of wazero's Go slice, which copies the whole memory each
// time a Go guest grows its heap and leaves the copies to the garbage collector. A mapping
// reserves address space only; growing makes the new pages resident (populate) without copying
// anything, and closing an instance unmaps its memory at once.
//
// An instance is reused across runs and reset to its module's snapshot after each (reset.go),
// so a memory also knows how to go back to a snapshot cheaply: on Linux its mapping is
// registered with a userfaultfd in asynchronous write-protect mode (memory_linux.go), the kernel
// marks each page written since the last reset, and the reset copies back only those pages
// (PAGEMAP_SCAN finds them and protects them again in one system call). Elsewhere, or where
// userfaultfd is not allowed, the reset copies back the whole snapshot.

// memAllocator hands out mmapMemory and remembers them, in order, for the instance being made
// (Extism instantiates the kernel's memory first, then the guest's).
type memAllocator struct {
	mu   sync.Mutex
	mems []*mmapMemory
	// budget, when set, is charged for every byte of linear memory (admission.go).
	budget *memBudget
	// untracked: no write tracking (tests of the copy-everything reset).
	untracked bool
	// lazy: the memories start lazy (mmapMemory.lazy), for an instance made from a snapshot.
	lazy bool
}

// withMemory returns ctx with a, for instantiating modules.
func withMemory(ctx context.Context, a *memAllocator) context.Context {
	return experimental.WithMemoryAllocator(ctx, a)
}

func (a *memAllocator) Allocate(_, max uint64) experimental.LinearMemory {
	m := &mmapMemory{max: max, budget: a.budget, untracked: a.untracked, lazy: a.lazy}
	a.mu.Lock()
	a.mems = append(a.mems, m)
	a.mu.Unlock()
	return m
}

// refused reports whether the budget refused one of a's memories a growth.
func (a *memAllocator) refused() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range a.mems {
		if m.refused {
			return true
		}
	}
	return false
}

// failed reports whether one of a's memories could not be mapped.
func (a *memAllocator) failed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range a.mems {
		if m.failed {
			return true
		}
	}
	return false
}

type mmapMemory struct {
	buf []byte // the whole mapping
	len int    // the memory's current length
	max uint64
	// tracked: writes to the mapping are tracked (memory_linux.go).
	tracked, untracked bool
	budget             *memBudget
	// charged is what the budget was charged for this memory.
	charged int
	// refused is set when the budget refused a growth (the guest then runs out of memory), or
	// the memory's initial size at instantiation (the instance is then closed at once).
	refused bool
	// resets and lastCopied: how many resets restored the memory, and what the last copied.
	resets, lastCopied int
	// started: Reallocate was called (the first call is the instantiation's); failed: the
	// mapping failed, and buf is a Go slice of the initial size only.
	started, failed bool
	// lazy: growing does not make the new pages resident. An instance made from a snapshot is
	// lazy until it is ready (newInstance), so that the snapshot's zero pages (image) take no
	// memory until a run writes them.
	lazy bool
}

// Reallocate implements experimental.LinearMemory: the first call maps max bytes (at least one
// page), later ones only change the length. It returns nil, which the guest sees as a failed
// memory.grow, past max, past the memory budget, or when the mapping fails.
//
// wazero cannot take nil for a memory's initial size (instantiating the module panics), so the
// first call never returns nil: past the budget it charges the bytes anyway and sets refused,
// and when the mapping fails it returns a Go slice of the initial size and sets failed; the
// instance is then closed before it runs (newInstance).
func (m *mmapMemory) Reallocate(size uint64) []byte {
	first := !m.started
	m.started = true
	if size > m.max && !first {
		return nil
	}
	if m.failed {
		return nil
	}
	if m.buf == nil {
		n := max(m.max, size, 1<<16)
		b, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|mapNoReserve)
		if err != nil {
			if !first {
				return nil
			}
			m.failed = true
			m.len = int(size)
			return make([]byte, size)
		}
		m.buf = b
		m.tracked = !m.untracked && track(b)
		if !m.tracked {
			hugePages(b)
		}
	}
	if old := uint64(m.len); size > old {
		if grow := int(size) - m.charged; grow > 0 && m.budget != nil {
			if !m.budget.take(grow) {
				m.refused = true
				if !first {
					return nil
				}
				m.budget.used.Add(int64(grow)) // given back when the instance is closed
			}
			m.charged += grow
		}
		if !m.lazy {
			populate(m.buf[old:size])
		}
	}
	m.len = int(size)
	return m.buf[:size:m.max]
}

// touch writes one byte per page, for kernels without MADV_POPULATE_WRITE.
func touch(b []byte) {
	for i := 0; i < len(b); i += 4096 {
		b[i] = 0
	}
}

// Free implements experimental.LinearMemory.
func (m *mmapMemory) Free() {
	if m.buf != nil {
		_ = syscall.Munmap(m.buf[:cap(m.buf)])
	}
	m.buf, m.len = nil, 0
	if m.budget != nil && m.charged > 0 {
		m.budget.give(m.charged)
		m.charged = 0
	}
}

// A tracked memory is write-protected again every rearmEvery resets, or after a reset that
// copied more than rearmBytes.
const (
	rearmEvery = 64
	rearmBytes = 1 << 20
)

// restore makes the memory's first len(snap) bytes snap again and drops what lies past them
// (the caller then sets the memory's length back, wazerox.SetMemoryLen). It returns how many
// bytes it copied.
func (m *mmapMemory) restore(snap *image) int {
	n := snap.len()
	copied := 0
	if m.tracked {
		// Protect the memory again now and then, and when the pages found written grew past
		// rearmBytes (restoreWritten says why not at every reset).
		rearm := m.resets%rearmEvery == rearmEvery-1 || m.lastCopied > rearmBytes
		copied = restoreWritten(m.buf, min(m.len, n), snap, rearm)
		m.resets++
		m.lastCopied = copied
	} else {
		snap.copyTo(m.buf, 0, n)
		copied = n
	}
	if m.len > n {
		drop(m.buf[n:m.len], m.tracked)
	}
	m.len = n
	if m.budget != nil && m.charged > n {
		m.budget.give(m.charged - n)
		m.charged = n
	}
	return copied
}

// protect starts tracking writes from now on (after the snapshot was copied in).
func (m *mmapMemory) protect() {
	if m.tracked {
		writeProtect(m.buf[:m.len])
	}
}

//go:build linux || darwin || freebsd || netbsd || openbsd

package wasm

import (
	"context"
	"syscall"

	"github.com/tetratelabs/wazero/experimental"
)

// mmapAllocator backs each guest's linear memory with its own anonymous mapping of the
// memory's maximum size. wazero's default grows a memory by appending to a Go slice, which
// copies the whole memory at every growth (a Go guest grows its heap 4 MiB at a time, several
// times while it starts) and leaves the old copies to the garbage collector, which keeps them
// resident until it returns them. A mapping reserves address space only; growing makes the new
// pages resident (populate) without copying anything, and closing the instance unmaps the
// memory at once.
type mmapAllocator struct{}

// withMemory returns ctx with the allocator, for instantiating modules.
func withMemory(ctx context.Context) context.Context {
	return experimental.WithMemoryAllocator(ctx, mmapAllocator{})
}

func (mmapAllocator) Allocate(_, max uint64) experimental.LinearMemory {
	return &mmapMemory{max: max}
}

type mmapMemory struct {
	buf []byte // the whole mapping
	len int    // the memory's current length
	max uint64
}

// Reallocate implements experimental.LinearMemory: the first call maps max bytes (at least one
// page), later ones only change the length. It returns nil, which the guest sees as a failed
// memory.grow, past max or when the mapping fails.
func (m *mmapMemory) Reallocate(size uint64) []byte {
	if size > m.max {
		return nil
	}
	if m.buf == nil {
		n := max(m.max, 1<<16)
		b, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|mapNoReserve)
		if err != nil {
			return nil
		}
		hugePages(b)
		m.buf = b
	}
	if old := uint64(m.len); size > old {
		populate(m.buf[old:size])
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
		m.buf, m.len = nil, 0
	}
}

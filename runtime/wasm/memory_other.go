//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package wasm

import "context"

// memAllocator is not used where there is no mmap: wazero's own memories are, and instances
// are then never reused (a reset needs memories of ours).
type memAllocator struct {
	mems            []*mmapMemory
	budget          *memBudget
	untracked, lazy bool
}

type mmapMemory struct {
	buf                    []byte
	len                    int
	refused, tracked, lazy bool
}

func (m *mmapMemory) restore(*image) int { panic("wasm: no reset here") }
func (m *mmapMemory) protect()           {}

// withMemory leaves wazero's default (Go slice) memories where there is no mmap.
func withMemory(ctx context.Context, _ *memAllocator) context.Context { return ctx }

func (a *memAllocator) refused() bool { return false }
func (a *memAllocator) failed() bool  { return false }

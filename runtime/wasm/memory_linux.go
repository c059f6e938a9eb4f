package wasm

import "syscall"

// mapNoReserve keeps a memory's reservation out of the kernel's overcommit accounting.
const mapNoReserve = syscall.MAP_NORESERVE

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14): fault a range in, writable, in one
// call.
const madvPopulateWrite = 23

// populate makes b's pages resident, as wazero's own memories are when they grow (it zeroes the
// new part): paying for the page faults while an instance is prepared, not during the rule's
// call.
func populate(b []byte) {
	if len(b) == 0 {
		return
	}
	if syscall.Madvise(b, madvPopulateWrite) == nil {
		return
	}
	touch(b)
}

// madvHugepage is MADV_HUGEPAGE.
const madvHugepage = 14

// hugePages asks for transparent huge pages behind a guest's memory (where the system's THP
// mode is "madvise" or "always"). A run touches its instance's memory for the first time in
// that call, from a CPU that did not prepare it; with 2 MiB pages that costs a few TLB entries
// instead of one page walk per 4 KiB (on a virtual machine, a two-level walk).
// BenchmarkRunBlockRisky, interleaved runs: p50 401 and 361 µs with it, 436 and 504 µs
// without. Memory is populated when it grows anyway, so the resident size changes only by the
// rounding to 2 MiB.
func hugePages(b []byte) { _ = syscall.Madvise(b, madvHugepage) }

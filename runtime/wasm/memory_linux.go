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

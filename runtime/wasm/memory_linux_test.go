package wasm

import (
	"bytes"
	"testing"
)

// TestRestoreWritten runs resets on a tracked memory: each puts the snapshot back exactly; a
// page written once is copied back at every reset until the memory is protected again (every
// rearmEvery resets), after which only the pages written since are copied.
func TestRestoreWritten(t *testing.T) {
	const page = 1 << 16
	m := (&memAllocator{}).Allocate(0, 8*page).(*mmapMemory)
	defer m.Free()
	b := m.Reallocate(4 * page)
	if !m.tracked {
		t.Skip("no write tracking here (userfaultfd with asynchronous write protection: Linux 6.7)")
	}
	for i := range b {
		b[i] = byte(i / osPage)
	}
	snap := bytes.Clone(b)
	im := newImage(snap)
	m.protect()
	reset := func(name string, wantCopied int) {
		t.Helper()
		if got := m.restore(im); got != wantCopied {
			t.Fatalf("%s: %d bytes copied back, want %d", name, got, wantCopied)
		}
		if !bytes.Equal(m.buf[:m.len], snap) {
			t.Fatalf("%s: the memory is not the snapshot after the reset", name)
		}
	}
	b[0], b[5*osPage+1] = 0xff, 0xff
	reset("two pages written", 2*osPage)
	b[9*osPage] = 0xff
	reset("a third page written", 3*osPage) // the first two are still writable
	reset("nothing written", 3*osPage)
	// Grown past the snapshot: the pages past it are dropped, not copied.
	grown := m.Reallocate(6 * page)
	grown[5*page] = 1
	reset("grown", 3*osPage)
	if m.len != len(snap) {
		t.Fatalf("length %d after the reset, want %d", m.len, len(snap))
	}
	for m.resets%rearmEvery != rearmEvery-1 {
		reset("waiting for the re-protection", 3*osPage)
	}
	reset("re-protected", 3*osPage)
	m.buf[2*osPage] = 0xff
	reset("one page written since", osPage)
}

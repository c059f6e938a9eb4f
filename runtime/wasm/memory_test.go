//go:build linux || darwin || freebsd || netbsd || openbsd

package wasm

import "testing"

func TestMmapMemory(t *testing.T) {
	const page = 1 << 16
	m := (&memAllocator{}).Allocate(0, 4*page)
	b := m.Reallocate(page)
	if len(b) != page || cap(b) != 4*page {
		t.Fatalf("len %d cap %d", len(b), cap(b))
	}
	b[page-1] = 7
	grown := m.Reallocate(3 * page)
	if len(grown) != 3*page || &grown[0] != &b[0] || grown[page-1] != 7 || grown[3*page-1] != 0 {
		t.Fatal("growing moved or lost the memory")
	}
	if m.Reallocate(4*page+1) != nil {
		t.Fatal("grew past the maximum")
	}
	if len(m.Reallocate(4*page)) != 4*page {
		t.Fatal("cannot grow to the maximum")
	}
	m.Free()
	m.Free() // twice is harmless
}

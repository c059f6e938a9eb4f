package instrument

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/tetratelabs/wazero"
)

// seg is an active data segment at a constant offset in memory 0.
func seg(offset int32, init []byte) []byte {
	return cat([]byte{0x00, opI32Const}, appendS64(nil, int64(offset)), []byte{opEnd}, leb(uint32(len(init))), init)
}

func passive(init []byte) []byte { return cat([]byte{0x01}, leb(uint32(len(init))), init) }

func fill(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }

// dataModule is a module with one page of memory, exported as "mem", and the given data
// segments (and, with more, other sections before the data section).
func dataModule(segs [][]byte, more ...[]byte) []byte {
	parts := [][]byte{memory, sec(secExport, vec(cat(str("mem"), []byte{kindMemory, 0x00}))...)}
	parts = append(parts, more...)
	return wasmModule(append(parts, sec(secData, vec(segs...)...))...)
}

// dataSection returns the payload of wasm's data section.
func dataSection(t *testing.T, wasm []byte) []byte {
	t.Helper()
	secs, err := split(wasm[8:])
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secs {
		if s.id == secData {
			return s.payload
		}
	}
	t.Fatal("no data section")
	return nil
}

// segments counts the segments of a data section.
func segments(t *testing.T, payload []byte) int {
	r := &reader{b: payload}
	n, err := r.u32()
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

// image applies a data section's active segments (constant offsets, memory 0) to a memory of
// pages pages, as instantiation does; ok is false when one is out of bounds.
func image(t *testing.T, payload []byte, pages int) (mem []byte, ok bool) {
	t.Helper()
	mem = make([]byte, pages<<16)
	r := &reader{b: payload}
	n, _ := r.u32()
	for range n {
		flags, _ := r.u32()
		var off int64
		if flags != 1 {
			start := r.off
			m := &module{}
			if err := m.skipConst(r); err != nil {
				t.Fatal(err)
			}
			v, isConst := i32Const(payload[start:r.off])
			if !isConst {
				t.Fatalf("offset %x is not a constant", payload[start:r.off])
			}
			off = int64(uint32(v))
		}
		size, _ := r.u32()
		init, err := r.bytes(int(size))
		if err != nil {
			t.Fatal(err)
		}
		if flags == 1 {
			continue
		}
		if off+int64(size) > int64(len(mem)) {
			return nil, false
		}
		copy(mem[off:], init)
	}
	return mem, true
}

// TestJoinData checks when data segments are joined, and that an instance starts with the same
// memory either way (wazero instantiating the original and the rewritten module).
func TestJoinData(t *testing.T) {
	ctx := context.Background()
	dataCount := sec(secDataCnt, leb(3)...)
	tests := []struct {
		name  string
		wasm  []byte
		want  int  // segments after the rewrite
		fails bool // instantiation fails (both)
	}{
		{name: "ascending with short gaps are joined", want: 1,
			wasm: dataModule([][]byte{seg(16, fill(1, 9)), seg(40, fill(2, 3)), seg(40+3+mergeGap, fill(3, 1))})},
		{name: "a gap longer than mergeGap splits", want: 2,
			wasm: dataModule([][]byte{seg(0, fill(1, 4)), seg(4+mergeGap+1, fill(2, 4)), seg(4+mergeGap+1+4+8, fill(3, 4))})},
		{name: "a gap an earlier segment wrote into is not filled", want: 3,
			wasm: dataModule([][]byte{seg(100, fill(9, 10)), seg(0, fill(1, 10)), seg(200, fill(2, 10))})},
		{name: "a later segment may cover a gap", want: 2,
			wasm: dataModule([][]byte{seg(0, fill(1, 10)), seg(200, fill(2, 10)), seg(100, fill(9, 10))})},
		{name: "overlapping segments keep their order", want: 2,
			wasm: dataModule([][]byte{seg(0, fill(1, 10)), seg(5, fill(2, 10))})},
		{name: "descending segments are not joined", want: 3,
			wasm: dataModule([][]byte{seg(300, fill(1, 10)), seg(200, fill(2, 10)), seg(100, fill(3, 10))})},
		{name: "a negative offset is past 2 GiB", want: 2, fails: true,
			wasm: dataModule([][]byte{seg(0, fill(1, 10)), seg(-16, fill(2, 10))})},
		{name: "one segment out of bounds: nothing is joined", want: 3, fails: true,
			wasm: dataModule([][]byte{seg(0, fill(1, 10)), seg(20, fill(2, 10)), seg(65536-4, fill(3, 10))})},
		{name: "a passive segment: nothing is joined", want: 3,
			wasm: dataModule([][]byte{seg(0, fill(1, 10)), passive(fill(7, 3)), seg(20, fill(2, 10))})},
		{name: "a data count section: nothing is joined", want: 3,
			wasm: dataModule([][]byte{seg(0, fill(1, 10)), seg(20, fill(2, 10)), seg(40, fill(3, 10))}, dataCount)},
		{name: "segments at the memory's end are joined", want: 1,
			wasm: dataModule([][]byte{seg(65536-20, fill(1, 10)), seg(65536-4, fill(2, 4))})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Rewrite(tc.wasm)
			if err != nil {
				t.Fatal(err)
			}
			orig, got := dataSection(t, tc.wasm), dataSection(t, res.Wasm)
			if n := segments(t, got); n != tc.want {
				t.Fatalf("%d segments after the rewrite, want %d", n, tc.want)
			}
			before, okBefore := image(t, orig, 1)
			after, okAfter := image(t, got, 1)
			if okBefore != okAfter || !bytes.Equal(before, after) {
				t.Fatalf("the rewrite changes the memory an instance starts with (in bounds %v → %v)", okBefore, okAfter)
			}
			var calls atomic.Int64
			rt := runtimeWithCheck(ctx, t, &calls)
			plain := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
			defer plain.Close(ctx)
			a, errA := plain.Instantiate(ctx, tc.wasm)
			b, errB := rt.Instantiate(ctx, res.Wasm)
			if (errA != nil) != tc.fails || (errB != nil) != tc.fails {
				t.Fatalf("instantiating: original %v, rewritten %v; want failure %v", errA, errB, tc.fails)
			}
			if tc.fails {
				return
			}
			ma, _ := a.ExportedMemory("mem").Read(0, 65536)
			mb, _ := b.ExportedMemory("mem").Read(0, 65536)
			if !bytes.Equal(ma, mb) || !bytes.Equal(ma, before) {
				t.Fatal("the instances' memories differ")
			}
		})
	}
}

// TestJoinDataGoGuest: a Go guest's tens of thousands of segments become a few, with the same
// memory image.
func TestJoinDataGoGuest(t *testing.T) {
	wasm, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "bin", "guests", "block-risky-commands.wasm"))
	if err != nil {
		t.Skipf("no guests built (make guests): %v", err)
	}
	res, err := Rewrite(wasm)
	if err != nil {
		t.Fatal(err)
	}
	orig, got := dataSection(t, wasm), dataSection(t, res.Wasm)
	before, after := segments(t, orig), segments(t, got)
	if before < 1000 || after > 64 {
		t.Fatalf("%d segments became %d", before, after)
	}
	m := &module{res: &Result{}}
	if err := m.scan(mustSplit(t, wasm)); err != nil {
		t.Fatal(err)
	}
	a, okA := image(t, orig, int(m.memPages))
	b, okB := image(t, got, int(m.memPages))
	if !okA || !okB || !bytes.Equal(a, b) {
		t.Fatalf("the memory images differ (in bounds %v, %v)", okA, okB)
	}
	t.Logf("%d segments (%d bytes) → %d (%d bytes)", before, len(orig), after, len(got))
}

func mustSplit(t *testing.T, wasm []byte) []section {
	secs, err := split(wasm[8:])
	if err != nil {
		t.Fatal(err)
	}
	return secs
}

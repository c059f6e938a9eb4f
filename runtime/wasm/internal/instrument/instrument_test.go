package instrument

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// Hand-assembled modules.

func leb(v uint32) []byte { return appendU32(nil, v) }

func wasmModule(sections ...[]byte) []byte {
	out := []byte("\x00asm\x01\x00\x00\x00")
	for _, s := range sections {
		out = append(out, s...)
	}
	return out
}

func sec(id byte, payload ...byte) []byte { return appendSection(nil, id, payload) }

func vec(items ...[]byte) []byte {
	out := leb(uint32(len(items)))
	for _, it := range items {
		out = append(out, it...)
	}
	return out
}

func str(s string) []byte { return appendName(nil, s) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func body(code ...byte) []byte {
	b := append([]byte{0x00}, code...)
	return append(leb(uint32(len(b))), b...)
}

var (
	// types: 0 = () -> (), 1 = () -> i32, 2 = (i32) -> ()
	types  = sec(secType, vec([]byte{0x60, 0x00, 0x00}, []byte{0x60, 0x00, 0x01, 0x7F}, []byte{0x60, 0x01, 0x7F, 0x00})...)
	memory = sec(secMemory, vec([]byte{0x00, 0x01})...)
)

// exportFunc is an export of function idx as name.
func exportFunc(name string, idx uint32) []byte { return cat(str(name), []byte{kindFunc}, leb(idx)) }

// runtimeWithCheck returns a runtime with the check host module, counting its calls.
func runtimeWithCheck(ctx context.Context, t *testing.T, calls *atomic.Int64) wazero.Runtime {
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	t.Cleanup(func() { rt.Close(ctx) })
	_, err := rt.NewHostModuleBuilder(CheckModule).NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, stack []uint64) {
			calls.Add(1)
			stack[0] = Budget
		}), nil, []api.ValueType{api.ValueTypeI64}).Export(CheckName).Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// TestFuelIsSpentByCodeSize runs code whose only events are function entries (a long function
// of straight-line code, called n times from a function that is itself called once per call):
// the check must run at least once per Budget bytes executed.
func TestFuelIsSpentByCodeSize(t *testing.T) {
	ctx := context.Background()
	const ops = 50000 // i32.const 0; drop: 3 bytes each
	code := append(bytes.Repeat([]byte{0x41, 0x00, 0x1A}, ops), 0x0B)
	long := append(append(leb(uint32(len(code)+1)), 0x00), code...)
	// caller (i32 n): calls long n times through a loop.
	caller := body(0x03, 0x40, // loop
		0x10, 0x00, // call long
		0x20, 0x00, 0x41, 0x01, 0x6B, 0x22, 0x00, // n - 1, tee n
		0x0D, 0x00, // br_if 0
		0x0B, 0x0B)
	wasm := wasmModule(types, sec(secFunction, vec([]byte{0x00}, []byte{0x02})...), memory,
		sec(secExport, vec(exportFunc("run", 1))...), sec(secCode, vec(long, caller)...))
	res, err := Rewrite(wasm)
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	rt := runtimeWithCheck(ctx, t, &calls)
	m, err := rt.Instantiate(ctx, res.Wasm)
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	if _, err := m.ExportedFunction("run").Call(ctx, n); err != nil {
		t.Fatal(err)
	}
	executed := int64(n * len(code))
	if min := executed / Budget; calls.Load() < min {
		t.Fatalf("%d checks for %d bytes of code executed; want at least %d", calls.Load(), executed, min)
	}
	t.Logf("%d checks for %d bytes executed", calls.Load(), executed)
}

// TestRewriteKeepsWorking rewrites modules of each shape the rewrite handles and checks that
// the rewrite instantiates and computes the same.
func TestRewriteKeepsWorking(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		wasm []byte
	}{
		{name: "no global, export or import section", wasm: wasmModule(types, sec(secFunction, vec([]byte{0x01})...), memory,
			sec(secExport, vec(exportFunc("f", 0))...), sec(secCode, vec(body(0x41, 0x07, 0x0B))...))},
		{name: "an imported function shifts nothing below it", wasm: wasmModule(types,
			sec(secImport, vec(cat(str("env"), str("seven"), []byte{kindFunc, 0x01}))...),
			sec(secFunction, vec([]byte{0x01})...), memory,
			sec(secExport, vec(exportFunc("f", 1))...), sec(secCode, vec(body(0x10, 0x00, 0x0B))...))},
		{name: "a start function and an element segment", wasm: wasmModule(types,
			sec(secFunction, vec([]byte{0x00}, []byte{0x01}, []byte{0x01})...),
			sec(secTable, vec([]byte{0x70, 0x00, 0x01})...), memory,
			sec(secGlobal, vec([]byte{0x7F, 0x01, 0x41, 0x00, 0x0B})...),
			sec(secExport, vec(exportFunc("f", 1))...),
			sec(secStart, leb(0)...),
			sec(secElement, vec(cat([]byte{0x00, 0x41, 0x00, 0x0B}, vec(leb(2))))...),
			// 0: start sets the global to 7; 1: f calls 2 through the table; 2: returns the global
			sec(secCode, vec(body(0x41, 0x07, 0x24, 0x00, 0x0B), body(0x41, 0x00, 0x11, 0x01, 0x00, 0x0B), body(0x23, 0x00, 0x0B))...))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Rewrite(tc.wasm)
			if err != nil {
				t.Fatal(err)
			}
			var calls atomic.Int64
			rt := runtimeWithCheck(ctx, t, &calls)
			if _, err := rt.NewHostModuleBuilder("env").NewFunctionBuilder().
				WithFunc(func() int32 { return 7 }).Export("seven").Instantiate(ctx); err != nil {
				t.Fatal(err)
			}
			m, err := rt.Instantiate(ctx, res.Wasm)
			if err != nil {
				t.Fatalf("the rewrite does not instantiate: %v", err)
			}
			out, err := m.ExportedFunction("f").Call(ctx)
			if err != nil || out[0] != 7 {
				t.Fatalf("f: %v %v", out, err)
			}
			if m.ExportedGlobal(FuelExport) == nil {
				t.Fatal("no fuel export")
			}
			for _, g := range res.Globals {
				if m.ExportedGlobal(g.Export) == nil {
					t.Fatalf("global %d is not exported as %s", g.Index, g.Export)
				}
			}
		})
	}
}

func TestRewriteRefuses(t *testing.T) {
	fn := sec(secFunction, vec([]byte{0x01})...)
	tests := []struct {
		name string
		wasm []byte
		want string
	}{
		{name: "not wasm", wasm: []byte("hello world"), want: "not a WebAssembly 1.0 binary"},
		{name: "truncated", wasm: wasmModule(types)[:12], want: "truncated"},
		{name: "an unknown section", wasm: wasmModule(sec(42, 0x00)), want: "unknown section 42"},
		{name: "a tag section", wasm: wasmModule(sec(13, 0x00)), want: "exception handling"},
		{name: "a reserved export", wasm: wasmModule(types, fn, memory, sec(secExport, vec(exportFunc("pixie:x", 0))...),
			sec(secCode, vec(body(0x41, 0x00, 0x0B))...)), want: "reserved for Pixie"},
		{name: "an import from the check's module", wasm: wasmModule(types,
			sec(secImport, vec(cat(str(CheckModule), str("x"), []byte{kindFunc, 0x00}))...)), want: "reserved for Pixie"},
		{name: "an unknown instruction", wasm: wasmModule(types, fn, memory, sec(secCode, vec(body(0x06, 0x0B))...)),
			want: "unknown instruction 0x06"},
		{name: "a global that does not exist", wasm: wasmModule(types, fn, memory, sec(secCode, vec(body(0x23, 0x00, 0x0B))...)),
			want: "global 0 does not exist"},
		{name: "a local that does not exist", wasm: wasmModule(types, fn, memory, sec(secCode, vec(body(0x20, 0x00, 0x0B))...)),
			want: "local 0 does not exist"},
		{name: "a function that does not exist", wasm: wasmModule(types, fn, memory, sec(secCode, vec(body(0x10, 0x01, 0x0B))...)),
			want: "function 1 does not exist"},
		{name: "a type that does not exist", wasm: wasmModule(types, fn, memory,
			sec(secCode, vec(body(0x41, 0x00, 0x11, 0x03, 0x00, 0x0B))...)), want: "type 3 does not exist"},
		{name: "an export of a global that does not exist", wasm: wasmModule(types, fn, memory,
			sec(secExport, vec(cat(str("g"), []byte{kindGlobal, 0x00}))...), sec(secCode, vec(body(0x41, 0x00, 0x0B))...)),
			want: "global 0 does not exist"},
		{name: "a LEB128 with unused bits", wasm: wasmModule(types, fn, memory,
			sec(secExport, vec(cat(str("f"), []byte{kindFunc, 0x80, 0x80, 0x80, 0x80, 0x10}))...)), want: "unused bits"},
		{name: "a signed LEB128 whose unused bits are not its sign", wasm: wasmModule(types, fn, memory,
			sec(secCode, vec(body(0x41, 0x80, 0x80, 0x80, 0x80, 0x70, 0x0B))...)), want: "not its sign"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Rewrite(tc.wasm)
			if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an ErrUnsupported saying %q", err, tc.want)
			}
		})
	}
}

func TestNotResettable(t *testing.T) {
	fn := sec(secFunction, vec([]byte{0x00})...)
	table := sec(secTable, vec([]byte{0x70, 0x00, 0x01})...)
	tests := []struct {
		name string
		wasm []byte
		want string
	}{
		{name: "table.set", wasm: wasmModule(types, fn, table, memory,
			sec(secCode, vec(body(0x41, 0x00, 0xD0, 0x70, 0x26, 0x00, 0x0B))...)), want: "table.set"},
		{name: "table.grow", wasm: wasmModule(types, fn, table, memory,
			sec(secCode, vec(body(0xD0, 0x70, 0x41, 0x01, 0xFC, 0x0F, 0x00, 0x1A, 0x0B))...)), want: "table.grow"},
		{name: "a mutable v128 global", wasm: wasmModule(types, fn, memory,
			sec(secGlobal, vec(append(append([]byte{0x7B, 0x01, 0xFD, 0x0C}, make([]byte, 16)...), 0x0B))...), sec(secCode, vec(body(0x0B))...)), want: "v128 global"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Rewrite(tc.wasm)
			if err != nil {
				t.Fatal(err)
			}
			if res.Resettable || !strings.Contains(res.NotResettable, tc.want) {
				t.Fatalf("resettable %v (%q), want not, saying %q", res.Resettable, res.NotResettable, tc.want)
			}
		})
	}
}

// TestRewriteGuests rewrites the Go guests built by make guests (when built) and the Extism
// kernel: they stay resettable, and every loop is instrumented.
func TestRewriteGuests(t *testing.T) {
	for _, name := range []string{"block-risky-commands", "claim-check"} {
		g := filepath.Join("..", "..", "..", "..", "bin", "guests", name+".wasm")
		wasm, err := os.ReadFile(g)
		if err != nil {
			t.Skipf("no guests built (make guests): %v", err)
		}
		res, err := Rewrite(wasm)
		if err != nil {
			t.Fatalf("%s: %v", g, err)
		}
		if !res.Resettable || res.Loops < 500 || res.Functions < 500 || len(res.Globals) == 0 {
			t.Fatalf("%s: resettable %v (%s), %d loops, %d functions, %d globals", g, res.Resettable, res.NotResettable, res.Loops, res.Functions, len(res.Globals))
		}
		if _, err := Rewrite(res.Wasm); err == nil || !strings.Contains(err.Error(), "reserved") {
			t.Fatalf("rewriting twice: %v", err)
		}
	}
}

// BenchmarkRewrite rewrites a Go guest (done once per module, before compiling).
func BenchmarkRewrite(b *testing.B) {
	guests, _ := filepath.Glob(filepath.Join("..", "..", "..", "..", "bin", "guests", "block-risky-commands.wasm"))
	if len(guests) == 0 {
		b.Skip("no guests built (make guests)")
	}
	wasm, _ := os.ReadFile(guests[0])
	b.SetBytes(int64(len(wasm)))
	for b.Loop() {
		if _, err := Rewrite(wasm); err != nil {
			b.Fatal(err)
		}
	}
}

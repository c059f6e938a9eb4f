package wasm

import (
	"context"
	"errors"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime"
)

// Hand-assembled modules (the binary format, section by section).

func wasmModule(sections ...[]byte) []byte {
	out := []byte("\x00asm\x01\x00\x00\x00")
	for _, s := range sections {
		out = append(out, s...)
	}
	return out
}

func section(id byte, payload ...byte) []byte { return appendSection(nil, id, payload) }

func vec(items ...[]byte) []byte {
	out := appendU32(nil, uint32(len(items)))
	for _, it := range items {
		out = append(out, it...)
	}
	return out
}

func str(s string) []byte { return append(appendU32(nil, uint32(len(s))), s...) }

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// body is a function body: no locals, then code (which must end with 0x0B).
func body(code ...byte) []byte {
	b := append([]byte{0x00}, code...)
	return append(appendU32(nil, uint32(len(b))), b...)
}

var (
	// one memory of at least one page (the check grows memory 0 by zero pages)
	memorySection = section(5, vec([]byte{0x00, 0x01})...)
	// types: 0 = () -> (), 1 = () -> i32, 2 = (i32) -> (i32)
	typeSection = section(1, vec([]byte{0x60, 0x00, 0x00}, []byte{0x60, 0x00, 0x01, 0x7F}, []byte{0x60, 0x01, 0x7F, 0x01, 0x7F})...)
	// spin: loop br 0 end, forever.
	spinBody = body(0x03, 0x40, 0x0C, 0x00, 0x0B, 0x0B)
	// count: (i32 n) -> i32, counts n down in a loop whose block type is a type index with a
	// parameter (multi-value), then returns 7.
	countBody = body(
		0x20, 0x00, // local.get 0
		0x03, 0x02, // loop (type 2: i32 -> i32)
		0x41, 0x01, 0x6B, // i32.const 1, i32.sub
		0x22, 0x00, // local.tee 0: the loop's value stays on the stack
		0x20, 0x00, // local.get 0: the condition
		0x0D, 0x00, // br_if 0: back to the loop with the value
		0x0B,       // end
		0x1A,       // drop
		0x41, 0x07, // i32.const 7
		0x0B)
)

// spinModule exports spin () -> () and count (i32) -> i32; with imports it imports a global
// first (so the interrupt global's index is not 0), and with exportName it also exports a
// function under that name.
func spinModule(importGlobal bool, exportName string) []byte {
	var secs [][]byte
	secs = append(secs, typeSection)
	if importGlobal {
		secs = append(secs, section(2, vec(cat(str("env"), str("g"), []byte{kindGlobal, 0x7F, 0x00}))...))
	}
	secs = append(secs, section(3, vec([]byte{0x00}, []byte{0x02})...), memorySection)
	exports := [][]byte{cat(str("spin"), []byte{0x00, 0x00}), cat(str("count"), []byte{0x00, 0x01})}
	if exportName != "" {
		exports = append(exports, cat(str(exportName), []byte{0x00, 0x00}))
	}
	secs = append(secs, section(7, vec(exports...)...))
	secs = append(secs, section(0, cat(str("a custom section"), []byte("kept as it is"))...))
	secs = append(secs, section(10, vec(spinBody, countBody)...))
	return wasmModule(secs...)
}

func TestInstrument(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name         string
		wasm         []byte
		loops        int
		importGlobal bool
	}{
		{name: "no global section", wasm: spinModule(false, ""), loops: 2},
		{name: "an imported global shifts the index", wasm: spinModule(true, ""), loops: 2, importGlobal: true},
		{name: "no export section", wasm: wasmModule(typeSection, section(3, vec([]byte{0x00})...), memorySection, section(10, vec(spinBody)...)), loops: 1},
		{name: "an existing global section", wasm: wasmModule(typeSection, section(3, vec([]byte{0x00})...), memorySection,
			section(6, vec([]byte{0x7E, 0x00, 0x42, 0x05, 0x0B})...), section(7, vec(cat(str("spin"), []byte{0x00, 0x00}))...),
			section(10, vec(spinBody)...)), loops: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, loops, err := instrument(tc.wasm)
			if err != nil {
				t.Fatal(err)
			}
			if loops != tc.loops {
				t.Fatalf("%d loops instrumented, want %d", loops, tc.loops)
			}
			rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig())
			defer rt.Close(ctx)
			if tc.importGlobal {
				// wazero's host modules cannot export globals; a tiny wasm module does.
				env := wasmModule(section(6, vec([]byte{0x7F, 0x00, 0x41, 0x00, 0x0B})...), section(7, vec(cat(str("g"), []byte{kindGlobal, 0x00}))...))
				if _, err := rt.InstantiateWithConfig(ctx, env, wazero.NewModuleConfig().WithName("env")); err != nil {
					t.Fatal(err)
				}
			}
			m, err := rt.InstantiateWithConfig(ctx, out, wazero.NewModuleConfig().WithName(""))
			if err != nil {
				t.Fatalf("the instrumented module does not instantiate: %v", err)
			}
			// The check reads this global (with an imported global before it, reading the
			// wrong index would leave the loop running below).
			g, ok := m.ExportedGlobal(interruptExport).(api.MutableGlobal)
			if !ok || g.Type() != api.ValueTypeI32 || g.Get() != 0 {
				t.Fatalf("interrupt global: %v %v", g, ok)
			}
			if f := m.ExportedFunction("count"); f != nil {
				if res, err := f.Call(ctx, 1000); err != nil || res[0] != 7 {
					t.Fatalf("count: %v %v", res, err)
				}
			}
			spin := m.ExportedFunction("spin")
			if spin == nil {
				return // the module without exports: only the global's export is checked
			}
			// A spinning loop stops at its next iteration once the global is set, with no
			// other way to stop it: the runtime is built without wazero's own check.
			done := make(chan error, 1)
			go func() {
				_, err := spin.Call(ctx)
				done <- err
			}()
			select {
			case err := <-done:
				t.Fatalf("spin returned before the interrupt: %v", err)
			case <-time.After(50 * time.Millisecond):
			}
			// The garbage collector can stop the world while the guest spins: machine code
			// cannot be preempted, but the check's periodic call into Go can. (Without it this
			// deadlocks: the timeout below cannot fire either, and go test's -timeout ends it.)
			gc := make(chan struct{})
			go func() {
				goruntime.GC()
				close(gc)
			}()
			select {
			case <-gc:
			case <-time.After(20 * time.Second):
				t.Fatal("a garbage collection could not stop the world while the guest spins")
			}
			select {
			case err := <-done:
				t.Fatalf("spin returned before the interrupt: %v", err)
			default:
			}
			g.Set(1)
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "unreachable") {
					t.Fatalf("spin ended with %v, want the unreachable trap", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("setting the interrupt global did not stop the loop")
			}
		})
	}
}

func TestInstrumentRefuses(t *testing.T) {
	good := spinModule(false, "")
	tests := []struct {
		name string
		wasm []byte
		want string
	}{
		{name: "not wasm", wasm: []byte("hello world"), want: "not a WebAssembly 1.0 binary"},
		{name: "truncated", wasm: good[:len(good)-3], want: "truncated"},
		{name: "already exports the name", wasm: spinModule(false, interruptExport), want: "already exports"},
		{name: "an unknown instruction", wasm: wasmModule(typeSection, section(3, vec([]byte{0x00})...), memorySection, section(10, vec(body(0x06, 0x40, 0x0B, 0x0B))...)),
			want: "unknown instruction 0x06"},
		{name: "an unknown section", wasm: wasmModule(section(42, 0x00)), want: "unknown section 42"},
		// global.set 0 in a module without globals: index 0 would be the fuel global.
		{name: "a reference to a global the module does not have", wasm: wasmModule(typeSection, section(3, vec([]byte{0x00})...), memorySection,
			section(10, vec(body(0x41, 0x00, 0x24, 0x00, 0x0B))...)), want: "global 0 does not exist"},
		{name: "a start function", wasm: wasmModule(typeSection, section(3, vec([]byte{0x00})...), memorySection, section(8, 0x00),
			section(10, vec(spinBody)...)), want: "start function"},
		{name: "no memory", wasm: wasmModule(typeSection, section(3, vec([]byte{0x00})...), section(10, vec(spinBody)...)), want: "no memory"},
		{name: "a body overrunning its section", wasm: wasmModule(typeSection, section(3, vec([]byte{0x00})...), memorySection, section(10, 0x01, 0x09, 0x00, 0x0B)),
			want: "truncated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := instrument(tc.wasm)
			if !errors.Is(err, errNotInstrumentable) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an errNotInstrumentable saying %q", err, tc.want)
			}
		})
	}
}

// TestInstrumentGuests instruments Go guests. Compiling and running them instrumented is what
// the rest of this package's tests do (through the executor and its compilation cache; a
// compilation here would take tens of seconds under the race detector).
func TestInstrumentGuests(t *testing.T) {
	for _, g := range []string{"block-risky-commands", "only-search-tools", "testdata/fault-loop", "testdata/echo"} {
		t.Run(g, func(t *testing.T) {
			out, loops, err := instrument(testutil.Guest(t, g))
			if err != nil {
				t.Fatal(err)
			}
			if loops < 500 || len(out) <= len(testutil.Guest(t, g)) {
				t.Fatalf("%d loops instrumented in a Go guest, %d bytes", loops, len(out))
			}
			if _, _, err := instrument(out); err == nil || !strings.Contains(err.Error(), "already exports") {
				t.Fatalf("instrumenting twice: %v", err)
			}
		})
	}
}

// TestGuestModuleReachable pins the extism internals guestModule relies on: if an upgrade
// renames the field, every module would silently fall back to wazero's slower check.
func TestGuestModuleReachable(t *testing.T) {
	if !canReachGuest() {
		t.Fatalf("extism.Plugin has no %s field of type api.Module", guestField)
	}
	e := env(t)
	e.push(t, "testdata/echo", "echo")
	if err := e.x.Warm(context.Background(), "echo"); err != nil {
		t.Fatal(err)
	}
	m := e.module(t, "echo")
	if !m.interruptible {
		t.Fatal("the echo guest was not compiled instrumented")
	}
	inst, err := m.take(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer inst.close()
	if inst.interrupt == nil {
		t.Fatal("the instance has no interrupt global")
	}
}

// TestUninstrumentedModuleStillStops runs a module that cannot be instrumented (it already
// exports the interrupt global's name): it is compiled with wazero's check and a spinning call
// still ends at the time limit.
func TestUninstrumentedModuleStillStops(t *testing.T) {
	ctx := context.Background()
	gate := cat(str("gate"), []byte{0x00, 0x02})
	wasm := wasmModule(typeSection, section(3, vec([]byte{0x00}, []byte{0x01}, []byte{0x01})...), memorySection,
		section(7, vec(gate, cat(str(interruptExport), []byte{0x00, 0x01}))...),
		section(10, vec(spinBody, body(0x41, 0x00, 0x0B), body(0x10, 0x00, 0x41, 0x00, 0x0B))...))
	x, err := New(ctx, Config{PoolSize: -1}, memSource{wasm})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close(ctx)
	start := time.Now()
	_, err = x.Run(ctx, runtime.Request{Kind: runtime.KindModule, Ref: "m", Timeout: 200 * time.Millisecond})
	if !errors.Is(err, runtime.ErrTimeout) {
		t.Fatalf("got %v, want a timeout", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the call stopped after %s", d)
	}
	m, err := x.module(ctx, "00000000000000000000000000000000000000000000000000000000000000aa")
	if err != nil {
		t.Fatal(err)
	}
	defer m.release()
	if m.interruptible {
		t.Fatal("the module should have been compiled with wazero's check")
	}
}

// BenchmarkInstrument measures instrumenting the block-risky-commands guest (done once per
// module, before compiling).
func BenchmarkInstrument(b *testing.B) {
	wasm := testutil.Guest(b, "block-risky-commands")
	b.SetBytes(int64(len(wasm)))
	for b.Loop() {
		if _, _, err := instrument(wasm); err != nil {
			b.Fatal(err)
		}
	}
}

// TestValidatorRefusesReachingAddedGlobals uploads a module whose code sets global 0 although
// it has no global: instrumented, index 0 would be its fuel counter. It is refused.
func TestValidatorRefusesReachingAddedGlobals(t *testing.T) {
	ctx := context.Background()
	v, err := NewValidator(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	wasm := wasmModule(typeSection, section(3, vec([]byte{0x01})...), memorySection,
		section(7, vec(cat(str("gate"), []byte{0x00, 0x00}))...),
		section(10, vec(body(0x41, 0x00, 0x24, 0x00, 0x41, 0x00, 0x0B))...))
	_, err = v.Validate(ctx, wasm, "")
	if !errs.Is(err, errs.Unprocessable) || !strings.Contains(err.Error(), "does not compile") {
		t.Fatalf("got %v, want a refusal", err)
	}
}

package wasm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/runtime"
)

// watModule reads testdata/wat/name.wasm, built from name.wat (TestWatUpToDate checks it).
func watModule(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "wat", name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWatUpToDate checks that every testdata/wat/*.wasm is what wat2wasm (Debian's wabt, which
// .ci/run installs) makes of its .wat.
func TestWatUpToDate(t *testing.T) {
	bin, err := exec.LookPath("wat2wasm")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("wat2wasm is not installed (apt-get install wabt)")
		}
		t.Skip("wat2wasm is not installed (apt-get install wabt)")
	}
	wats, _ := filepath.Glob(filepath.Join("testdata", "wat", "*.wat"))
	if len(wats) == 0 {
		t.Fatal("no .wat files")
	}
	for _, w := range wats {
		out := filepath.Join(t.TempDir(), "m.wasm")
		if b, err := exec.Command(bin, w, "-o", out).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v %s", w, err, b)
		}
		want, _ := os.ReadFile(out)
		have, _ := os.ReadFile(strings.TrimSuffix(w, ".wat") + ".wasm")
		if !bytes.Equal(want, have) {
			t.Errorf("%s.wasm is stale: run wat2wasm %s -o %s.wasm", strings.TrimSuffix(w, ".wat"), w, strings.TrimSuffix(w, ".wat"))
		}
	}
}

// Hand-assembled modules (the binary format, section by section).

func leb(v uint32) []byte {
	var b []byte
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

func wasmModule(sections ...[]byte) []byte {
	out := []byte("\x00asm\x01\x00\x00\x00")
	for _, s := range sections {
		out = append(out, s...)
	}
	return out
}

func section(id byte, payload ...byte) []byte {
	return append(append([]byte{id}, leb(uint32(len(payload)))...), payload...)
}

func vec(items ...[]byte) []byte {
	out := leb(uint32(len(items)))
	for _, it := range items {
		out = append(out, it...)
	}
	return out
}

func str(s string) []byte { return append(leb(uint32(len(s))), s...) }

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
	return append(leb(uint32(len(b))), b...)
}

var (
	// types: 0 = () -> (), 1 = () -> i32
	typeSection   = section(1, vec([]byte{0x60, 0x00, 0x00}, []byte{0x60, 0x00, 0x01, 0x7F})...)
	memorySection = section(5, vec([]byte{0x00, 0x01})...)
	gateExport    = cat(str("gate"), []byte{0x00})
)

// straightLineModule exports gate, which calls in an endless loop a function of n times
// `i32.const 0; drop` and no loop of its own: code that runs a long time between loop headers.
func straightLineModule(n int) []byte {
	code := bytes.Repeat([]byte{0x41, 0x00, 0x1A}, n)
	code = append(code, 0x0B)
	long := append(append(leb(uint32(len(code)+1)), 0x00), code...)
	gate := body(0x03, 0x40, 0x10, 0x00, 0x0C, 0x00, 0x0B, 0x41, 0x0A, 0x0B) // loop call 0 br 0 end; i32.const 10
	return wasmModule(typeSection, section(3, vec([]byte{0x00}, []byte{0x01})...), memorySection,
		section(7, vec(cat(gateExport, leb(1)))...), section(10, vec(long, gate)...))
}

// TestTimeLimit runs guests that never end, each in its own way, with a short time limit: each
// run fails with the timeout error within 100 ms of its deadline, a garbage collection started
// while the guest spins finishes, and the executor keeps serving.
func TestTimeLimit(t *testing.T) {
	tests := []struct {
		name string
		wasm []byte
		vars map[string]string
		// inStart: the time runs out while the instance is made (the start function spins),
		// before the run has a class.
		inStart bool
	}{
		{name: "tree recursion without a loop", wasm: watModule(t, "treerec")},
		{name: "mutual recursion", wasm: watModule(t, "mutual")},
		{name: "recursion through call_indirect", wasm: watModule(t, "indirect")},
		{name: "a loop inside a br_table target", wasm: watModule(t, "brtable")},
		{name: "a start function that spins", wasm: watModule(t, "startspin"), inStart: true},
		{name: "the Extism kernel looping in the guest's alloc", wasm: watModule(t, "gate_kernel")},
		{name: "the Extism kernel looping in a host function's alloc", wasm: watModule(t, "kernel_host"), vars: map[string]string{"BIG": strings.Repeat("x", 30000)}},
		{name: "a bulk memory instruction in a loop", wasm: watModule(t, "fillspin")},
		{name: "long straight-line code called in a loop", wasm: straightLineModule(200000)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			sum := sha256.Sum256(tc.wasm)
			src := &fixedSource{sha: hex.EncodeToString(sum[:]), wasm: tc.wasm}
			x, err := New(ctx, Config{CacheDir: t.TempDir(), PoolSize: -1, Source: src})
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close(ctx)
			const limit = 300 * time.Millisecond
			bound := 100 * time.Millisecond
			if raceEnabled {
				bound = 500 * time.Millisecond
			}
			// On a shared machine a run can lose its CPU for longer than the bound; a guest that
			// dodged the limit would overshoot every time, so the bound must hold in one of
			// three runs, and every run must end with the timeout error within seconds. The
			// first run starts in the foreground class and is demoted as it runs; once it timed
			// out, its module's runs are in the background class from their start, on an idle
			// thread (lower.go), and the bound must hold for them too.
			// Compiled first, so that the time limit is spent in the guest, not in waiting for
			// the compiler (slow under -race for the long straight-line module).
			wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			if err := x.Warm(wctx, "m"); err != nil {
				t.Fatal(err)
			}
			run := func() (time.Duration, error) {
				start := time.Now()
				_, err := x.Run(ctx, runtime.Request{Kind: runtime.KindModule, Ref: "m", Vars: tc.vars, Timeout: limit})
				return time.Since(start) - limit, err
			}
			bestOfThree(t, run, bound, limit)
			if tc.inStart {
				return // the run never reached a slot's class: its module is not held against
			}
			x.mu.Lock()
			m := x.mods[src.sha]
			x.mu.Unlock()
			if m == nil || !m.health.unhealthy() {
				t.Fatal("the module is not in the background class after timing out")
			}
			bestOfThree(t, run, bound, limit)
		})
	}
}

// bestOfThree runs run up to three times, until one ends within bound after its deadline; each
// must fail with the timeout error, within seconds, and a GC started meanwhile must finish.
func bestOfThree(t *testing.T, run func() (time.Duration, error), bound, limit time.Duration) {
	t.Helper()
	var best time.Duration = -1
	for attempt := 0; attempt < 3 && (best < 0 || best > bound); attempt++ {
		gc := make(chan time.Duration, 1)
		go func() {
			time.Sleep(limit / 2)
			t0 := time.Now()
			goruntime.GC()
			gc <- time.Since(t0)
		}()
		over, err := run()
		if !errors.Is(err, runtime.ErrTimeout) {
			t.Fatalf("got %v, want the timeout error", err)
		}
		if over > 5*time.Second {
			t.Fatalf("the run ended %s after its deadline", over)
		}
		select {
		case d := <-gc:
			t.Logf("ended %s after the deadline; a GC during the run took %s", over, d)
		case <-time.After(5 * time.Second):
			t.Fatal("a garbage collection started during the run did not finish")
		}
		if best < 0 || over < best {
			best = over
		}
	}
	if best > bound {
		t.Errorf("the run ended %s after its deadline, at best of three (bound %s)", best, bound)
	}
}

// fixedSource serves one module under any name, with its real sha256.
type fixedSource struct {
	sha  string
	wasm []byte
}

func (s *fixedSource) Resolve(context.Context, string) (string, error) { return s.sha, nil }
func (s *fixedSource) Load(context.Context, string) ([]byte, error)    { return s.wasm, nil }

// TestValidatorRefuses uploads modules that wazero itself refuses, or that would reach what
// the rewrite adds, or use its reserved names: each is refused with the reason.
func TestValidatorRefuses(t *testing.T) {
	ctx := context.Background()
	v, err := NewValidator(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	gateBody := body(0x41, 0x0A, 0x0B)
	funcs := section(3, vec([]byte{0x01})...)
	code := section(10, vec(gateBody)...)
	tests := []struct {
		name string
		wasm []byte
		want string
	}{
		// exports.wast: an export of a global one past the last (none here): instrumented, it
		// would be the fuel.
		{name: "an export of a global that does not exist", wasm: wasmModule(typeSection, funcs, memorySection,
			section(7, vec(cat(gateExport, leb(0)), cat(str("g"), []byte{0x03, 0x00}))...), code), want: "does not compile"},
		// binary-leb128.wast: a 5-byte LEB128 with unused bits set (the export's index).
		{name: "a LEB128 with unused bits set", wasm: wasmModule(typeSection, funcs, memorySection,
			section(7, vec(cat(gateExport, []byte{0x80, 0x80, 0x80, 0x80, 0x70}))...), code), want: "does not compile"},
		{name: "global.set of a global that does not exist", wasm: wasmModule(typeSection, funcs, memorySection,
			section(7, vec(cat(gateExport, leb(0)))...), section(10, vec(body(0x41, 0x00, 0x24, 0x00, 0x41, 0x0A, 0x0B))...)),
			want: "does not compile"},
		{name: "a reserved export name", wasm: wasmModule(typeSection, funcs, memorySection,
			section(7, vec(cat(gateExport, leb(0)), cat(str("pixie:fuel"), []byte{0x00, 0x00}))...), code), want: "reserved for Pixie"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.Validate(ctx, tc.wasm, "")
			if !errs.Is(err, errs.Unprocessable) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a refusal saying %q", err, tc.want)
			}
		})
	}
}

// TestValidatorRefusesEndlessStart uploads a module whose start function never ends: it is
// refused, with the reason, once the validator's bound on instantiating it has passed.
func TestValidatorRefusesEndlessStart(t *testing.T) {
	ctx := context.Background()
	v, err := NewValidator(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = v.Validate(ctx, watModule(t, "startspin"), "")
	if !errs.Is(err, errs.Unprocessable) || !strings.Contains(err.Error(), "start function did not end") {
		t.Fatalf("got %v, want a refusal", err)
	}
}

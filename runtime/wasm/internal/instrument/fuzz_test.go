package instrument

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// FuzzRewrite is a differential fuzz test of the rewrite: whenever the rewrite accepts a module
// that wazero compiles, the rewrite compiles, instantiates exactly when the original does, and every exported
// function called with zero arguments gives the same results or the same trap, leaving the
// same exported memories; whenever wazero refuses a module the rewrite accepted, it refuses the
// rewrite too. (That the rewrite accepts every module wazero compiles is checked on the spec
// suite's modules, TestSpecSuiteDifferential.) Its seed corpus (run by go test) is the repository's WAT
// modules and a sample of the spec suite's modules.
func FuzzRewrite(f *testing.F) {
	wats, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "wat", "*.wasm"))
	for _, w := range wats {
		if b, err := os.ReadFile(w); err == nil {
			f.Add(b)
		}
	}
	base := filepath.Join(wazeroDir(f), "internal", "integration_test", "spectest")
	specs, _ := filepath.Glob(filepath.Join(base, "v2", "testdata", "*.wasm"))
	for i := 0; i < len(specs); i += 30 {
		if b, err := os.ReadFile(specs[i]); err == nil {
			f.Add(b)
		}
	}
	ctx := context.Background()
	cfg := specConfig()
	f.Fuzz(func(t *testing.T, wasm []byte) {
		// The rewrite reads the module first, as the validator does: wazero's decoder trusts
		// the counts a module declares (a few bytes can make it allocate gigabytes), so only
		// what the rewrite's strict reader accepted is handed to wazero.
		res, rerr := Rewrite(wasm)
		if rerr != nil {
			if !errors.Is(rerr, ErrUnsupported) {
				t.Fatalf("an error that is not ErrUnsupported: %v", rerr)
			}
			return
		}
		orig := wazero.NewRuntimeWithConfig(ctx, cfg)
		defer orig.Close(ctx)
		if cerr := compileSafely(ctx, orig, wasm); cerr != nil {
			if strings.Contains(cerr.Error(), "custom section") {
				// wazero v1.12 refuses an empty custom section at the very end of a module
				// (its reader returns EOF for a read of zero bytes there); the rewrite moves it
				// off the end. The validator compiles the upload as it is, so it is refused.
				return
			}
			rewr := wazero.NewRuntimeWithConfig(ctx, cfg)
			defer rewr.Close(ctx)
			if _, err := rewr.CompileModule(ctx, res.Wasm); err == nil {
				t.Fatalf("wazero refuses the module (%v) but compiles its rewrite", cerr)
			}
			return
		}
		rewr := wazero.NewRuntimeWithConfig(ctx, cfg)
		defer rewr.Close(ctx)
		if _, err := rewr.NewHostModuleBuilder(CheckModule).NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, _ api.Module, stack []uint64) {
				if err := ctx.Err(); err != nil {
					panic(err)
				}
				stack[0] = Budget
			}), nil, []api.ValueType{api.ValueTypeI64}).Export(CheckName).Instantiate(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := rewr.CompileModule(ctx, res.Wasm); err != nil {
			t.Fatalf("wazero compiles the module but not its rewrite: %v", err)
		}
		// The rewrite runs first, under a deadline its check enforces; the original runs only
		// after the rewrite ended in time (wazero's own check cannot stop every original:
		// loop-free recursion does not stop).
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		mr, errR := rewr.InstantiateWithConfig(cctx, res.Wasm, wazero.NewModuleConfig().WithName("m"))
		if cctx.Err() != nil {
			return // a start function that does not end: nothing to compare
		}
		mo, errO := orig.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName("m"))
		if (errO == nil) != (errR == nil) {
			t.Fatalf("instantiating the original: %v; the rewrite: %v", errO, errR)
		}
		if errO != nil {
			return
		}
		var names []string
		for name := range mo.ExportedFunctionDefinitions() {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			def := mo.ExportedFunctionDefinitions()[name]
			args := make([]uint64, 0, len(def.ParamTypes()))
			for _, p := range def.ParamTypes() {
				args = append(args, 0)
				if p == valV128 {
					args = append(args, 0)
				}
			}
			callCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			b, errB := mr.ExportedFunction(name).Call(callCtx, args...)
			timedOut := callCtx.Err() != nil
			cancel()
			if timedOut {
				return // a call that does not end: the state is not comparable afterwards
			}
			a, errA := mo.ExportedFunction(name).Call(ctx, args...)
			if firstLine(errA) != firstLine(errB) || !slices.Equal(a, b) {
				t.Fatalf("%s: original %v %v, rewrite %v %v", name, a, errA, b, errB)
			}
		}
		for name := range mo.ExportedMemoryDefinitions() {
			a, b := mo.ExportedMemory(name), mr.ExportedMemory(name)
			ab, _ := a.Read(0, a.Size())
			bb, _ := b.Read(0, b.Size())
			if !slices.Equal(ab, bb) {
				t.Fatalf("memory %s differs", name)
			}
		}
	})
}

// compileSafely compiles wasm, turning a panic in wazero (which its validator can raise on
// malformed modules) into an error.
func compileSafely(ctx context.Context, rt wazero.Runtime, wasm []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("wazero panicked: %v", p)
		}
	}()
	_, err = rt.CompileModule(ctx, wasm)
	return err
}

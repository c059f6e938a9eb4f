package extismx

import (
	"context"
	"reflect"
	"slices"
	"testing"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// recordingKernel stands in for a plug-in instance's kernel module: it records which function
// a forward looked up and how it was called.
type recordingKernel struct {
	api.Module // nil: only ExportedFunction is used
	looked     []string
	fn         recordingFunc
}

func (k *recordingKernel) ExportedFunction(name string) api.Function {
	k.looked = append(k.looked, name)
	return &k.fn
}

type recordingFunc struct {
	api.Function // nil: only CallWithStack is used
	calls        int
	stack        []uint64
}

func (f *recordingFunc) CallWithStack(_ context.Context, stack []uint64) error {
	f.calls++
	f.stack = stack
	return nil
}

// compiled returns the runtime of a compiled plug-in (guest: TestReach's), closed with t.
func compiled(t *testing.T) wazero.Runtime {
	t.Helper()
	ctx := context.Background()
	cp, err := extism.NewCompiledPlugin(ctx, extism.Manifest{Wasm: []extism.Wasm{extism.WasmData{Data: guest}}},
		extism.PluginConfig{RuntimeConfig: wazero.NewRuntimeConfigInterpreter()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Close(ctx) })
	rt, err := Runtime(cp)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// callEnv calls function name of rt's env module as a guest would, with ctx and stack.
func callEnv(t *testing.T, rt wazero.Runtime, ctx context.Context, name string, stack []uint64) {
	t.Helper()
	def, ok := rt.Module(EnvModule).ExportedFunctionDefinitions()[name]
	if !ok {
		t.Fatalf("%s does not export %s", EnvModule, name)
	}
	fn, ok := def.GoFunction().(api.GoModuleFunction)
	if !ok {
		t.Fatalf("%s.%s is a %T", EnvModule, name, def.GoFunction())
	}
	fn.Call(ctx, nil, stack)
}

// TestForwardedPinned pins Forwarded to Extism's env module: each of them forwards to the
// kernel's function of the same name, with the guest's stack; and every other function of the
// env module that the kernel exports too is one Extism implements itself.
func TestForwardedPinned(t *testing.T) {
	rt := compiled(t)
	for _, name := range Forwarded {
		k := &recordingKernel{}
		stack := make([]uint64, 4)
		callEnv(t, rt, context.WithValue(context.Background(), extism.PluginCtxKey("extism"), api.Module(k)), name, stack)
		if !slices.Equal(k.looked, []string{name}) || k.fn.calls != 1 || &k.fn.stack[0] != &stack[0] {
			t.Errorf("Extism's %s looked up %q and called it %d times: not a forward", name, k.looked, k.fn.calls)
		}
	}
	cm, err := rt.CompileModule(context.Background(), Kernel())
	if err != nil {
		t.Fatal(err)
	}
	native := []string{"input_load_u64", "load_u64", "store_u64"} // Extism's Go, on the kernel's memory
	var both []string
	for name := range rt.Module(EnvModule).ExportedFunctionDefinitions() {
		if _, ok := cm.ExportedFunctions()[name]; ok && !slices.Contains(native, name) {
			both = append(both, name)
		}
	}
	slices.Sort(both)
	want := slices.Sorted(slices.Values(Forwarded[:]))
	if !slices.Equal(both, want) {
		t.Fatalf("the env module's functions the kernel exports too (less %v) are %v, Forwarded is %v", native, both, want)
	}
}

// TestReplaceEnv checks the replacement: the same functions with the same types, Extism's
// own implementation for those it does not forward, and forwards that call what the
// KernelFunc returns, or look the function up as Extism does when it returns nil.
func TestReplaceEnv(t *testing.T) {
	rt := compiled(t)
	before := rt.Module(EnvModule).ExportedFunctionDefinitions()
	mine := &recordingFunc{}
	var asked []int
	kernel := func(ctx context.Context, k int) api.Function {
		if ctx.Value(mineKey{}) == nil {
			return nil
		}
		asked = append(asked, k)
		return mine
	}
	if err := ReplaceEnv(context.Background(), rt, kernel); err != nil {
		t.Fatal(err)
	}
	after := rt.Module(EnvModule).ExportedFunctionDefinitions()
	if len(after) != len(before) {
		t.Fatalf("%d functions after, %d before", len(after), len(before))
	}
	for name, b := range before {
		a, ok := after[name]
		switch {
		case !ok:
			t.Errorf("%s is gone", name)
		case !slices.Equal(a.ParamTypes(), b.ParamTypes()) || !slices.Equal(a.ResultTypes(), b.ResultTypes()):
			t.Errorf("%s: %v -> %v, was %v -> %v", name, a.ParamTypes(), a.ResultTypes(), b.ParamTypes(), b.ResultTypes())
		case !slices.Contains(Forwarded[:], name) && !sameFunc(a.GoFunction(), b.GoFunction()):
			t.Errorf("%s is not Extism's own any more", name)
		}
	}
	for k, name := range Forwarded {
		asked = asked[:0]
		mine.calls = 0
		stack := make([]uint64, 4)
		callEnv(t, rt, context.WithValue(context.Background(), mineKey{}, true), name, stack)
		if !slices.Equal(asked, []int{k}) || mine.calls != 1 || &mine.stack[0] != &stack[0] {
			t.Errorf("%s: asked for %v, called %d times", name, asked, mine.calls)
		}
		rk := &recordingKernel{}
		callEnv(t, rt, context.WithValue(context.Background(), extism.PluginCtxKey("extism"), api.Module(rk)), name, stack)
		if !slices.Equal(rk.looked, []string{name}) || rk.fn.calls != 1 {
			t.Errorf("%s without the instance: looked up %q, called %d times", name, rk.looked, rk.fn.calls)
		}
	}
}

type mineKey struct{}

// sameFunc reports whether a and b are the same Go implementation.
func sameFunc(a, b any) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Type() != vb.Type() {
		return false
	}
	switch va.Kind() {
	case reflect.Func, reflect.Pointer:
		return va.Pointer() == vb.Pointer()
	}
	return false
}

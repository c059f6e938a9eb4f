// Package extismx is the one place where Pixie reaches into extism/go-sdk's unexported state,
// each reach beside the test that pins it (extismx_test.go), so that an upgrade that changes a
// field fails those tests instead of silently changing what runs.
//
// What Extism does not expose, and Pixie needs:
//
//   - The guest module of a plug-in instance (Plugin.mainModule), for its exported globals and
//     functions; Plugin.Module() wraps it without them.
//   - The kernel module of a plug-in instance (Plugin.extism), whose functions (alloc, length,
//     input_set, output_offset, …) Pixie calls with the run's context instead of Extism's
//     context.Background(), and whose memory and globals are reset after a run.
//   - The wazero runtime of a compiled plug-in (CompiledPlugin.runtime), to add the host module
//     the instrumented code imports (instrument.CheckModule) and to compile the kernel.
//   - The compiled kernel of a compiled plug-in (CompiledPlugin.extism), replaced by Kernel()
//     instrumented: Extism compiles its kernel as it is, and a guest that corrupts the kernel's
//     block list would make it loop forever (shared/repro/wasm/gate_kernel.wat).
//
// And one replacement through wazero's public API (env.go): Extism's env module, whose kernel
// forwards look the kernel's function up anew at every call, is swapped for one whose
// forwards reuse each instance's functions. TestForwardedPinned pins which functions forward.
//
// Extism's public API was checked for each (go-sdk v1.7.1) and replaces none of them:
// Plugin.Module() wraps the guest module with ExportedFunctions only (no globals, no calls);
// the kernel module is reachable from host functions only, through CurrentPlugin, and only
// its memory; and a host function given to NewCompiledPlugin (even with SetNamespace, which
// would serve instrument.CheckModule) gets no calling module, and panics when the call's
// context lacks the plug-in, as Extism's own kernel calls (context.Background()) and a start
// function at instantiation do: the check must find its instance from the calling module. Nor
// can a kernel of one's own be given to Extism.
//
// Kernel is a copy of the kernel Extism embeds (extism-runtime.wasm, v1.7.0 in go-sdk
// v1.7.1); the test checks it is byte for byte the module cache's.
package extismx

import (
	_ "embed"
	"errors"
	"fmt"
	"reflect"
	"unsafe"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

//go:embed kernel.wasm
var kernel []byte

// Kernel returns the Extism kernel's module (do not modify it).
func Kernel() []byte { return kernel }

// Field names of extism/go-sdk v1.7.1.
const (
	pluginMain     = "mainModule"
	pluginKernel   = "extism"
	compiledRT     = "runtime"
	compiledKernel = "extism"
)

var (
	typeModule   = reflect.TypeFor[api.Module]()
	typeRuntime  = reflect.TypeFor[wazero.Runtime]()
	typeCompiled = reflect.TypeFor[wazero.CompiledModule]()
)

// ErrUnreachable is returned when a field is not where this package expects it (an Extism
// upgrade): the caller must refuse to run rather than run without it.
var ErrUnreachable = errors.New("extismx: extism internals are not as expected")

func field(v any, name string, want reflect.Type) (reflect.Value, error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return reflect.Value{}, fmt.Errorf("%w: nil %T", ErrUnreachable, v)
	}
	f := rv.Elem().FieldByName(name)
	if !f.IsValid() || f.Type() != want {
		return reflect.Value{}, fmt.Errorf("%w: %T has no field %s of type %s", ErrUnreachable, v, name, want)
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem(), nil
}

// Check reports whether every field this package reads is present with its expected type.
func Check() error {
	for _, c := range []struct {
		t    reflect.Type
		name string
		want reflect.Type
	}{
		{reflect.TypeFor[extism.Plugin](), pluginMain, typeModule},
		{reflect.TypeFor[extism.Plugin](), pluginKernel, typeModule},
		{reflect.TypeFor[extism.CompiledPlugin](), compiledRT, typeRuntime},
		{reflect.TypeFor[extism.CompiledPlugin](), compiledKernel, typeCompiled},
	} {
		f, ok := c.t.FieldByName(c.name)
		if !ok || f.Type != c.want {
			return fmt.Errorf("%w: %s has no field %s of type %s", ErrUnreachable, c.t, c.name, c.want)
		}
	}
	return nil
}

// MainModule returns the guest module of p.
func MainModule(p *extism.Plugin) (api.Module, error) {
	f, err := field(p, pluginMain, typeModule)
	if err != nil {
		return nil, err
	}
	m, _ := f.Interface().(api.Module)
	if m == nil {
		return nil, fmt.Errorf("%w: the plug-in has no guest module", ErrUnreachable)
	}
	return m, nil
}

// KernelModule returns the kernel module of p.
func KernelModule(p *extism.Plugin) (api.Module, error) {
	f, err := field(p, pluginKernel, typeModule)
	if err != nil {
		return nil, err
	}
	m, _ := f.Interface().(api.Module)
	if m == nil {
		return nil, fmt.Errorf("%w: the plug-in has no kernel module", ErrUnreachable)
	}
	return m, nil
}

// Runtime returns the wazero runtime of cp.
func Runtime(cp *extism.CompiledPlugin) (wazero.Runtime, error) {
	f, err := field(cp, compiledRT, typeRuntime)
	if err != nil {
		return nil, err
	}
	rt, _ := f.Interface().(wazero.Runtime)
	if rt == nil {
		return nil, fmt.Errorf("%w: the compiled plug-in has no runtime", ErrUnreachable)
	}
	return rt, nil
}

// SetKernel replaces the kernel cp instantiates for each new instance by k (compiled in cp's
// runtime). Call it before cp's first Instance.
func SetKernel(cp *extism.CompiledPlugin, k wazero.CompiledModule) error {
	f, err := field(cp, compiledKernel, typeCompiled)
	if err != nil {
		return err
	}
	if k == nil {
		return errors.New("extismx: no kernel")
	}
	f.Set(reflect.ValueOf(k))
	return nil
}

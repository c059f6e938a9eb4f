package extismx

import (
	"context"
	"fmt"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// EnvModule is the host module Extism gives guests ("extism:host/env"): the kernel's
// functions and Extism's own (config_get, var_get, http_request, log_*, …).
const EnvModule = "extism:host/env"

// Forwarded are the functions of Extism's env module that only forward a guest's call to the
// same-named function of the plug-in instance's kernel (go-sdk v1.7.1, host.go:
// instantiateEnvModule's extismFunc). load_u64, store_u64 and input_load_u64 are not among
// them: Extism implements those in Go, on the kernel's memory. TestForwardedPinned checks the
// list against Extism's module.
var Forwarded = [...]string{"alloc", "free", "load_u8", "input_load_u8", "store_u8", "input_set",
	"output_set", "input_length", "input_offset", "output_length", "output_offset", "length",
	"length_unsafe", "reset", "error_set", "error_get", "memory_bytes"}

// KernelFunc returns the kernel function Forwarded[k] of the plug-in instance whose call ctx
// is, or nil when it does not know the instance (the forward then looks the function up as
// Extism does).
type KernelFunc func(ctx context.Context, k int) api.Function

// ReplaceEnv replaces Extism's env module in rt (a compiled plug-in's runtime, before its
// first instance) by one with the same functions, where the forwarding ones call the kernel
// function kernel returns.
//
// Why: Extism's forward looks the kernel's function up by name at every call
// (api.Module.ExportedFunction), and wazero makes a new function for each lookup, with a call
// stack of its own (10 KiB, zeroed). A Go guest's run makes a few such calls (alloc,
// output_set), so every run allocated tens of KiB the CPU's caches did not hold, which an
// idle server pays in full. A function found once per instance is reused instead: an
// instance runs one call at a time, and no kernel function calls back into another.
func ReplaceEnv(ctx context.Context, rt wazero.Runtime, kernel KernelFunc) error {
	old := rt.Module(EnvModule)
	if old == nil {
		return fmt.Errorf("%w: the runtime has no %s module", ErrUnreachable, EnvModule)
	}
	forwarded := map[string]int{}
	for k, name := range Forwarded {
		forwarded[name] = k
	}
	b := rt.NewHostModuleBuilder(EnvModule)
	for name, def := range old.ExportedFunctionDefinitions() {
		fb := b.NewFunctionBuilder()
		if k, ok := forwarded[name]; ok {
			fb = fb.WithGoModuleFunction(forward(kernel, k), def.ParamTypes(), def.ResultTypes())
		} else {
			switch fn := def.GoFunction().(type) {
			case api.GoModuleFunction:
				fb = fb.WithGoModuleFunction(fn, def.ParamTypes(), def.ResultTypes())
			case api.GoFunction:
				fb = fb.WithGoFunction(fn, def.ParamTypes(), def.ResultTypes())
			default:
				return fmt.Errorf("%w: %s.%s is not a Go function (%T)", ErrUnreachable, EnvModule, name, fn)
			}
		}
		fb.Export(name)
	}
	if err := old.Close(ctx); err != nil {
		return fmt.Errorf("extismx: close Extism's %s: %w", EnvModule, err)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		return fmt.Errorf("extismx: instantiate %s: %w", EnvModule, err)
	}
	return nil
}

// forward is the Go function of Forwarded[k]: Extism's, with the kernel's function from
// kernel when it knows the instance.
func forward(kernel KernelFunc, k int) api.GoModuleFunction {
	name := Forwarded[k]
	return api.GoModuleFunc(func(ctx context.Context, _ api.Module, stack []uint64) {
		f := kernel(ctx, k)
		if f == nil {
			m, ok := ctx.Value(extism.PluginCtxKey("extism")).(api.Module)
			if !ok {
				panic("Invalid context, `extism` key not found") // Extism's words
			}
			if f = m.ExportedFunction(name); f == nil {
				panic(fmt.Errorf("function %q not found in extism:host", name))
			}
		}
		if err := f.CallWithStack(ctx, stack); err != nil {
			panic(err)
		}
	})
}

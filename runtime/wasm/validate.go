package wasm

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/pixie-dev/pixie/hostfuncs"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/runtime/modules"
	"github.com/pixie-dev/pixie/runtime/wasm/internal/instrument"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// Import namespaces the host provides.
const (
	// validateInitTimeout bounds instantiating an upload once (its start function).
	validateInitTimeout = 5 * time.Second
	nsWASI              = "wasi_snapshot_preview1"
	nsExtismEnv         = "extism:host/env"
	maxReasonLen        = 500
)

// Validator checks modules for the registry (it implements modules.Validator). It compiles
// through the same configuration and compilation cache directory as the Executor, so an
// accepted module is already compiled on disk when it first runs.
type Validator struct {
	e    *engine
	wasi map[string]bool
	// sem lets one validation run at a time: each compiles a module and instantiates it once.
	sem chan struct{}
}

var _ modules.Validator = (*Validator)(nil)

// NewValidator returns a validator using cfg's limits and cache directory.
func NewValidator(ctx context.Context, cfg Config) (*Validator, error) {
	e, err := newEngine(cfg)
	if err != nil {
		return nil, err
	}
	// The WASI function names the host provides, read off wazero's implementation.
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		return nil, fmt.Errorf("wasm: instantiate WASI: %w", err)
	}
	wasi := map[string]bool{}
	for name := range rt.Module(nsWASI).ExportedFunctionDefinitions() {
		wasi[name] = true
	}
	return &Validator{e: e, wasi: wasi, sem: make(chan struct{}, 1)}, nil
}

// Close releases the validator. (Each validation releases what it compiled as it ends.)
func (v *Validator) Close(context.Context) error { return nil }

// Validate implements modules.Validator: wasm must be at most Config.MaxModuleSize bytes,
// compile, export entry ("" means abi.EntryGate) as a function of no parameters returning
// i32, import only the host's functions (WASI, extism's kernel, and the pixie_* functions in
// abi.Namespace) and no memory, table or global, and instantiate within the memory limit.
// Refusals are errs.Unprocessable (errs.TooLarge for the size) with the reason.
func (v *Validator) Validate(ctx context.Context, wasm []byte, entry string) (modules.Info, error) {
	if entry == "" {
		entry = abi.EntryGate
	}
	if int64(len(wasm)) > v.e.cfg.MaxModuleSize {
		return modules.Info{}, errs.New(errs.TooLarge, "module is %d bytes; the limit is %d", len(wasm), v.e.cfg.MaxModuleSize)
	}
	if len(wasm) == 0 {
		return modules.Info{}, errs.New(errs.Unprocessable, "module is empty")
	}
	select {
	case v.sem <- struct{}{}:
		defer func() { <-v.sem }()
	case <-ctx.Done():
		return modules.Info{}, errs.Wrap(errs.Timeout, ctx.Err(), "validation was not started before the deadline")
	}

	// One cache for this validation: the module compiled below is written to the cache directory
	// (where the executor finds it) and released from memory when the validation ends.
	cache, err := v.e.newCache()
	if err != nil {
		return modules.Info{}, err
	}
	defer cache.Close(ctx)
	// The upload must compile as it is (instrumenting it must never make an invalid module
	// valid), and its imports and exports are checked on it as it is; then it is compiled
	// instrumented (interrupt.go), which is what the executor runs and then finds in the cache
	// directory.
	// The rewrite's strict reader goes first: wazero's decoder allocates by the counts a module
	// declares before reading what they count (a few bytes declaring billions of function
	// parameters make it run out of memory, which no recover catches); the reader refuses any
	// count the module's bytes do not hold.
	prep, err := v.e.prepare(wasm)
	if err != nil {
		return modules.Info{}, refuse("module does not compile: %s", instrument.Reason(err))
	}
	if !v.e.knownValid(wasm) {
		plain := wazero.NewRuntimeWithConfig(ctx, v.e.plain)
		defer plain.Close(ctx)
		if _, err := compileModule(ctx, plain, wasm); err != nil {
			return modules.Info{}, refuse("module does not compile: %v", err)
		}
		v.e.markValid(wasm)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, v.e.rc.WithCompilationCache(cache))
	defer rt.Close(ctx)
	cm, err := compileModule(ctx, rt, prep.wasm)
	if err != nil {
		return modules.Info{}, refuse("module does not compile once instrumented: %v", err)
	}
	var info modules.Info
	var bad []string
	user := map[string]bool{}
	for _, n := range hostfuncs.Names() {
		user[n] = true
	}
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		if mod == instrument.CheckModule {
			continue // added by the rewrite (the rewrite refuses modules that import it)
		}
		info.Imports = append(info.Imports, mod+"."+name)
		ok := false
		switch mod {
		case nsWASI:
			ok = v.wasi[name]
		case nsExtismEnv:
			ok = true // checked by instantiating below
		case abi.Namespace:
			ok = user[name]
		}
		if !ok {
			bad = append(bad, mod+"."+name)
		}
	}
	for _, kind := range []struct {
		what string
		defs []api.MemoryDefinition
	}{{"memory", cm.ImportedMemories()}} {
		for _, d := range kind.defs {
			mod, name, _ := d.Import()
			bad = append(bad, fmt.Sprintf("%s %s.%s", kind.what, mod, name))
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return modules.Info{}, refuse("module imports what the host does not provide: %s", strings.Join(bad, ", "))
	}
	for name := range cm.ExportedFunctions() {
		if strings.HasPrefix(name, instrument.ReservedPrefix) {
			continue
		}
		info.Exports = append(info.Exports, name)
	}
	slices.Sort(info.Exports)
	slices.Sort(info.Imports)
	info.Imports = slices.Compact(info.Imports) // a Go guest imports fd_write twice
	fn, ok := cm.ExportedFunctions()[entry]
	if !ok {
		return modules.Info{}, refuse("module does not export the entry point %q (exports: %s)", entry, strings.Join(info.Exports, ", "))
	}
	if len(fn.ParamTypes()) != 0 || !slices.Equal(fn.ResultTypes(), []api.ValueType{api.ValueTypeI32}) {
		return modules.Info{}, refuse("entry point %q must take no parameters and return i32; it is %s", entry, signature(fn))
	}
	// Instantiate it once as the executor would (the same cache: no second compilation): this
	// resolves every import against the real host modules (names and signatures) and checks
	// the memory limit.
	cp, err := v.e.compile(ctx, cache, prep)
	if err != nil {
		return modules.Info{}, refuse("module does not compile: %v", err)
	}
	defer cp.Close(ctx)
	// A start function runs while the module is instantiated: it must end in time.
	ictx, cancel := context.WithTimeout(ctx, validateInitTimeout)
	defer cancel()
	p, err := cp.Instance(withMemory(ictx, &memAllocator{}), extism.PluginInstanceConfig{ModuleConfig: moduleConfig(&capBuffer{max: 1024}, nil)})
	if err != nil {
		if _, ok := isInterrupt(err); ok || ictx.Err() != nil {
			return modules.Info{}, refuse("module cannot be instantiated: its start function did not end within %s", validateInitTimeout)
		}
		return modules.Info{}, refuse("module cannot be instantiated: %v", err)
	}
	_ = p.Close(ctx)
	return info, nil
}

func signature(fn api.FunctionDefinition) string {
	names := func(ts []api.ValueType) string {
		var s []string
		for _, t := range ts {
			s = append(s, api.ValueTypeName(t))
		}
		return strings.Join(s, ", ")
	}
	return fmt.Sprintf("(%s) -> (%s)", names(fn.ParamTypes()), names(fn.ResultTypes()))
}

func refuse(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if len(msg) > maxReasonLen {
		msg = msg[:maxReasonLen] + "…"
	}
	return errs.New(errs.Unprocessable, "%s", msg)
}

// compileModule compiles wasm in rt, turning a panic in wazero into an error: wazero's
// validator can panic on a malformed module (found by FuzzRewrite: a function section naming
// a type that does not exist), and an upload must never bring the server down.
func compileModule(ctx context.Context, rt wazero.Runtime, wasm []byte) (cm wazero.CompiledModule, err error) {
	defer func() {
		if p := recover(); p != nil {
			cm, err = nil, fmt.Errorf("wazero panicked: %v", p)
		}
	}()
	return rt.CompileModule(ctx, wasm)
}

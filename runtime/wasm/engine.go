package wasm

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/pixie-dev/pixie/hostfuncs"
	"github.com/pixie-dev/pixie/runtime/wasm/internal/extismx"
	"github.com/pixie-dev/pixie/runtime/wasm/internal/instrument"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// engine is what the executor and the validator share: the wazero runtime configuration and
// the host functions.
//
// Compiled code is cached per module, not in one shared wazero cache: a wazero compilation
// cache keeps every module it compiled in memory until the cache itself is closed (closing a
// runtime or an extism plug-in does not release it), so a shared cache would keep every module
// ever validated or evicted, and the validator's and the executor's copies of each. Each
// compilation (one validation, one module of the executor) gets its own cache, closed with it;
// all of them use the same directory, so what one compiled is read from disk by the next.
type engine struct {
	cfg Config
	// rc compiles instrumented modules (interrupt.go); plain checks uploads as they are.
	rc, plain wazero.RuntimeConfig
	funcs     []extism.HostFunction
	checks    checks
}

func newEngine(cfg Config) (*engine, error) {
	cfg = cfg.withDefaults()
	if cfg.CacheDir != "" {
		// Fail early on a directory that cannot be used.
		c, err := wazero.NewCompilationCacheWithDir(cfg.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("wasm: compilation cache in %s: %w", cfg.CacheDir, err)
		}
		_ = c.Close(context.Background())
	}
	if err := extismx.Check(); err != nil {
		return nil, err
	}
	if _, err := kernel(); err != nil {
		return nil, err
	}
	rc := wazero.NewRuntimeConfig().WithMemoryLimitPages(cfg.MemoryPages)
	// The interpreter validates exactly as the compiler does (one decoder and validator), and
	// compiles far faster: it only checks that an upload is valid as it is.
	plain := wazero.NewRuntimeConfigInterpreter().WithMemoryLimitPages(cfg.MemoryPages)
	return &engine{cfg: cfg, rc: rc, plain: plain, funcs: extismFuncs()}, nil
}

// prepared is a module as the engine compiles it.
type prepared struct {
	wasm []byte
	info *instrument.Result
}

// prepare instruments wasm (interrupt.go); a module that cannot be instrumented is not run.
func (e *engine) prepare(wasm []byte) (prepared, error) {
	res, err := instrument.Rewrite(wasm)
	if err != nil {
		return prepared{}, err
	}
	return prepared{wasm: res.Wasm, info: res}, nil
}

// knownValid reports whether wasm was found valid as it is (by the plain check) before, on
// this machine: a marker file in Config.CacheDir, named after the module's sha256 and the
// check's configuration, saves compiling it again (the plain check compiles with wazero's
// interpreter, about 0.15 s for a Go guest). The cache directory holds the machine code the
// executor runs, so a marker in it is trusted no less.
func (e *engine) knownValid(wasm []byte) bool {
	if e.cfg.CacheDir == "" {
		return false
	}
	_, err := os.Stat(e.validMarker(wasm))
	return err == nil
}

func (e *engine) markValid(wasm []byte) {
	if e.cfg.CacheDir != "" {
		_ = os.WriteFile(e.validMarker(wasm), nil, 0o600)
	}
}

func (e *engine) validMarker(wasm []byte) string {
	h := sha256.New()
	h.Write(wasm)
	fmt.Fprintf(h, "\x00plain-check v1 wazero %s pages %d", wazeroVersion, e.cfg.MemoryPages)
	return filepath.Join(e.cfg.CacheDir, "valid-"+hex.EncodeToString(h.Sum(nil)[:16]))
}

// newCache returns a compilation cache for one compilation: in memory, and on disk in
// Config.CacheDir when it is set. The caller closes it after what it compiled.
func (e *engine) newCache() (wazero.CompilationCache, error) {
	if e.cfg.CacheDir == "" {
		return wazero.NewCompilationCache(), nil
	}
	c, err := wazero.NewCompilationCacheWithDir(e.cfg.CacheDir)
	if err != nil {
		return nil, fmt.Errorf("wasm: compilation cache in %s: %w", e.cfg.CacheDir, err)
	}
	return c, nil
}

// compile compiles a prepared module into a plug-in with WASI and the host functions, through
// cache, with the host module instrumented code calls and the instrumented Extism kernel.
func (e *engine) compile(ctx context.Context, cache wazero.CompilationCache, p prepared) (*extism.CompiledPlugin, error) {
	cp, err := extism.NewCompiledPlugin(ctx,
		extism.Manifest{Wasm: []extism.Wasm{extism.WasmData{Data: p.wasm}}},
		extism.PluginConfig{RuntimeConfig: e.rc.WithCompilationCache(cache), EnableWasi: true},
		e.funcs)
	if err != nil {
		return nil, err
	}
	if err := e.setup(ctx, cp); err != nil {
		_ = cp.Close(ctx)
		return nil, err
	}
	return cp, nil
}

// setup adds what instrumented code imports to cp's runtime, swaps in the instrumented kernel
// and an env module whose kernel calls reuse each instance's functions (internal/extismx).
func (e *engine) setup(ctx context.Context, cp *extism.CompiledPlugin) error {
	rt, err := extismx.Runtime(cp)
	if err != nil {
		return err
	}
	if _, err := rt.NewHostModuleBuilder(instrument.CheckModule).NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(e.checks.fn), nil, []api.ValueType{api.ValueTypeI64}).
		Export(instrument.CheckName).Instantiate(ctx); err != nil {
		return fmt.Errorf("wasm: host module %s: %w", instrument.CheckModule, err)
	}
	if err := extismx.ReplaceEnv(ctx, rt, kernelFunc); err != nil {
		return err
	}
	k, err := kernel()
	if err != nil {
		return err
	}
	cm, err := rt.CompileModule(ctx, k.Wasm)
	if err != nil {
		return fmt.Errorf("wasm: compile the instrumented kernel: %w", err)
	}
	return extismx.SetKernel(cp, cm)
}

// moduleConfig is the WASI configuration of one instance: real clocks, crypto randomness,
// stdout and stderr into out, and, when mount is set, the late mount at MountPath (bound to
// the session's cwd, read-only, only by a run that grants it).
func moduleConfig(out *capBuffer, mount *lateMount) wazero.ModuleConfig {
	mc := wazero.NewModuleConfig().
		WithStdout(out).WithStderr(out).
		WithSysWalltime().WithSysNanotime().
		WithRandSource(rand.Reader)
	if mount != nil {
		mc = withMount(mc, mount)
	}
	return mc
}

// extismFuncs adapts hostfuncs to extism host functions in abi.Namespace.
func extismFuncs() []extism.HostFunction {
	var out []extism.HostFunction
	for _, f := range hostfuncs.Funcs() {
		call := f.Call
		hf := extism.NewHostFunctionWithStack(f.Name,
			func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
				// Pixie's own calls give host functions a memory that calls the kernel with the
				// run's context (instance.go); Extism's CurrentPlugin calls it with
				// context.Background().
				if c, ok := ctx.(*callCtx); ok {
					call(ctx, kernelMemory{c: c}, stack)
					return
				}
				call(ctx, p, stack)
			},
			i64s(f.Params), i64s(f.Results))
		hf.SetNamespace(abi.Namespace)
		out = append(out, hf)
	}
	return out
}

func i64s(n int) []extism.ValueType {
	out := make([]extism.ValueType, n)
	for i := range out {
		out[i] = extism.ValueTypeI64
	}
	return out
}

// capBuffer keeps the first max bytes written to it and counts the rest.
type capBuffer struct {
	mu      sync.Mutex
	max     int
	buf     []byte
	dropped int
}

func (b *capBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := b.max - len(b.buf)
	if room > len(p) {
		room = len(p)
	}
	if room > 0 {
		b.buf = append(b.buf, p[:room]...)
	}
	b.dropped += len(p) - room
	return len(p), nil
}

// reset empties the buffer.
func (b *capBuffer) reset() {
	b.mu.Lock()
	b.buf, b.dropped = b.buf[:0], 0
	b.mu.Unlock()
}

func (b *capBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dropped > 0 {
		return string(b.buf) + fmt.Sprintf("\n…[%d more bytes dropped]", b.dropped)
	}
	return string(b.buf)
}

// wazeroVersion is the version of wazero in this binary (for the plain check's markers).
var wazeroVersion = func() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/tetratelabs/wazero" {
				return d.Version
			}
		}
	}
	return "unknown"
}()

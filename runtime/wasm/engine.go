package wasm

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"

	"github.com/pixie-dev/pixie/hostfuncs"
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
	// rc compiles instrumented modules, which interrupt themselves (interrupt.go); rcChecked
	// compiles the others with wazero's slower check at every loop (CloseOnContextDone).
	rc, rcChecked wazero.RuntimeConfig
	// instrument is false when the guest module of an extism plug-in cannot be reached (see
	// guestModule): every module is then compiled with wazero's check.
	instrument bool
	funcs      []extism.HostFunction
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
	rc := wazero.NewRuntimeConfig().WithMemoryLimitPages(cfg.MemoryPages)
	return &engine{cfg: cfg, rc: rc, rcChecked: rc.WithCloseOnContextDone(true), instrument: canReachGuest(),
		funcs: extismFuncs()}, nil
}

// prepared is a module as the engine compiles it.
type prepared struct {
	wasm []byte
	rc   wazero.RuntimeConfig
	// interruptible: the module carries the interrupt global (interrupt.go).
	interruptible bool
	loops         int
}

// prepare instruments wasm so that it can be interrupted cheaply, or, when it cannot be
// instrumented, keeps it as it is and selects wazero's check.
func (e *engine) prepare(wasm []byte) prepared {
	if e.instrument {
		if out, loops, err := instrument(wasm); err == nil {
			return prepared{wasm: out, rc: e.rc, interruptible: true, loops: loops}
		}
	}
	return prepared{wasm: wasm, rc: e.rcChecked}
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
// cache.
func (e *engine) compile(ctx context.Context, cache wazero.CompilationCache, p prepared) (*extism.CompiledPlugin, error) {
	return extism.NewCompiledPlugin(ctx,
		extism.Manifest{Wasm: []extism.Wasm{extism.WasmData{Data: p.wasm}}},
		extism.PluginConfig{RuntimeConfig: p.rc.WithCompilationCache(cache), EnableWasi: true},
		e.funcs)
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
			func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) { call(ctx, p, stack) },
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

func (b *capBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dropped > 0 {
		return string(b.buf) + fmt.Sprintf("\n…[%d more bytes dropped]", b.dropped)
	}
	return string(b.buf)
}

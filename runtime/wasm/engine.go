package wasm

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"

	"github.com/pixie-dev/pixie/hostfuncs"
	"github.com/pixie-dev/pixie/internal/abi"
)

// engine is what the executor and the validator share: the wazero runtime configuration with
// its compilation cache, and the host functions.
type engine struct {
	cfg   Config
	cache wazero.CompilationCache
	rc    wazero.RuntimeConfig
	funcs []extism.HostFunction
}

func newEngine(cfg Config) (*engine, error) {
	cfg = cfg.withDefaults()
	var (
		cache wazero.CompilationCache
		err   error
	)
	if cfg.CacheDir != "" {
		if cache, err = wazero.NewCompilationCacheWithDir(cfg.CacheDir); err != nil {
			return nil, fmt.Errorf("wasm: compilation cache in %s: %w", cfg.CacheDir, err)
		}
	} else {
		cache = wazero.NewCompilationCache()
	}
	rc := wazero.NewRuntimeConfig().
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(cfg.MemoryPages).
		WithCompilationCache(cache)
	return &engine{cfg: cfg, cache: cache, rc: rc, funcs: extismFuncs()}, nil
}

func (e *engine) close(ctx context.Context) error { return e.cache.Close(ctx) }

// compile compiles wasm into a plug-in with WASI and the host functions.
func (e *engine) compile(ctx context.Context, wasm []byte) (*extism.CompiledPlugin, error) {
	return extism.NewCompiledPlugin(ctx,
		extism.Manifest{Wasm: []extism.Wasm{extism.WasmData{Data: wasm}}},
		extism.PluginConfig{RuntimeConfig: e.rc, EnableWasi: true},
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

package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/modules"
	"github.com/pixie-dev/pixie/runtime/wasm"
)

// The WASM module side of the server: the registry, its validator and the executor of module
// rules.

var _ gate.TxModuleChecker = (*modules.Registry)(nil)

// wasmModules is the wired module registry and the executor that runs its modules. With WASM
// unavailable (the validator could not start) reg and x are nil: module routes are not
// mounted and module rules fail under their gate's error policy.
type wasmModules struct {
	reg *modules.Registry
	v   *wasm.Validator
	x   *wasm.Executor
	log *slog.Logger
	// limits is the WASM admission control (run slots, memory budget) that the rule executor
	// shares with Pet's.
	limits *wasm.Limits
}

// wasmConfig maps the wasm section of the configuration to the engine's; compiled code is
// cached in <home>/cache/wasm.
func wasmConfig(cfg config.Config) wasm.Config {
	return wasm.Config{
		CacheDir:      filepath.Join(cfg.Home, homeCache, "wasm"),
		MaxModuleSize: cfg.WASM.MaxModuleSize,
		MemoryPages:   uint32(cfg.WASM.MemoryPages),
		MaxInput:      cfg.WASM.MaxInput,
		MaxOutput:     cfg.WASM.MaxOutput,
		PoolSize:      cfg.WASM.PoolSize,
		MaxHostCalls:  cfg.WASM.MaxHostCalls,
		MaxConcurrent: cfg.WASM.MaxConcurrent,
		MaxQueued:     cfg.WASM.MaxQueued,
		QueueTimeout:  cfg.WASM.QueueTimeout,
		MemoryBudget:  cfg.WASM.MemoryBudget,
		Hidden:        []string{cfg.Home}, // a guest's /work mount never shows the home
	}
}

// newModules builds the registry (bodies in <home>/blobs, metadata in st), validating uploads
// through the same engine configuration and compilation cache as the executor, and registers
// the executor for module rules in rules. It adds "wasm" to info.
func newModules(ctx context.Context, cfg config.Config, log *slog.Logger, st *store.Store, rules runtime.Dispatcher, info map[string]any) (*wasmModules, error) {
	wc := wasmConfig(cfg)
	wc.Limits = wasm.NewLimits(wc)
	m := &wasmModules{log: log, limits: wc.Limits}
	v, err := wasm.NewValidator(ctx, wc)
	if err != nil {
		log.Warn("WASM modules are unavailable", "err", err)
		info["wasm"] = map[string]any{"error": err.Error()}
		return m, nil
	}
	reg, err := modules.New(ctx, modules.Config{Store: st, Dir: filepath.Join(cfg.Home, homeBlobs), Validator: v, MaxSize: wc.MaxModuleSize})
	if err != nil {
		_ = v.Close(context.Background())
		return nil, fmt.Errorf("modules: %w", err)
	}
	wc.Source = reg
	x, err := wasm.New(ctx, wc)
	if err != nil {
		_ = v.Close(context.Background())
		return nil, fmt.Errorf("wasm: %w", err)
	}
	m.reg, m.v, m.x = reg, v, x
	rules[runtime.KindModule] = x
	info["wasm"] = wasmInfo{reg: reg, cfg: cfg.WASM, cacheDir: wc.CacheDir, maxConcurrent: wc.Limits.MaxConcurrent()}
	return m, nil
}

// checker is the gate's module check (nil without a registry).
func (m *wasmModules) checker() gate.ModuleChecker {
	if m.reg == nil {
		return nil
	}
	return m.reg
}

// warm compiles the modules the saved gates use and fills their pools, in the background, so
// that the first evaluation after a start does not pay for it.
func (m *wasmModules) warm(ctx context.Context, gates *gate.Service) {
	if m.x == nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		set, err := gates.Definitions(ctx)
		if err != nil {
			m.log.Warn("modules of saved gates not warmed", "err", err)
			return
		}
		seen := map[string]bool{}
		for _, g := range set.Gates {
			if g.Rule == nil || g.Rule.Kind != runtime.KindModule || seen[g.Rule.Name] {
				continue
			}
			seen[g.Rule.Name] = true
			if err := m.x.Warm(ctx, g.Rule.Name); err != nil && ctx.Err() == nil {
				m.log.Warn("module not warmed", "module", g.Rule.Name, "gate", g.Name, "err", err)
			}
		}
	}()
}

// Close releases the executor, the validator and the registry.
func (m *wasmModules) Close(ctx context.Context) error {
	var err error
	if m.x != nil {
		err = m.x.Close(ctx)
	}
	if m.v != nil {
		err = errors.Join(err, m.v.Close(ctx))
	}
	if m.reg != nil {
		err = errors.Join(err, m.reg.Close(ctx))
	}
	return err
}

// wasmInfo is the "wasm" entry of /v1/info: the limits in force, the cache directory and the
// number of modules (read when the info is served).
type wasmInfo struct {
	reg      *modules.Registry
	cfg      config.WASMConfig
	cacheDir string
	// maxConcurrent is the run slots in force (wasm.maxConcurrent, or the number of CPUs).
	maxConcurrent int
}

// MarshalJSON implements json.Marshaler.
func (w wasmInfo) MarshalJSON() ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out := map[string]any{
		"cacheDir": w.cacheDir, "maxModuleSize": w.reg.MaxSize(), "memoryPages": w.cfg.MemoryPages,
		"maxInput": w.cfg.MaxInput, "maxOutput": w.cfg.MaxOutput, "poolSize": w.cfg.PoolSize,
		"maxHostCalls": w.cfg.MaxHostCalls, "maxConcurrent": w.maxConcurrent, "maxQueued": w.cfg.MaxQueued,
		"queueTimeout": w.cfg.QueueTimeout.String(), "memoryBudget": w.cfg.MemoryBudget,
	}
	if ms, err := w.reg.List(ctx); err != nil {
		out["modulesError"] = "cannot list the modules"
	} else {
		out["modules"] = len(ms)
	}
	return json.Marshal(out)
}

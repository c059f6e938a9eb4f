package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/modules"
	"github.com/pixie-dev/pixie/runtime/wasm"
	"github.com/pixie-dev/pixie/server"
)

// The WASM module side of the server (wiring) and `pixie module push|list|show|rm`.

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
	reg, err := modules.New(st, filepath.Join(cfg.Home, homeBlobs), v, modules.Options{MaxSize: wc.MaxModuleSize})
	if err != nil {
		_ = v.Close(context.Background())
		return nil, fmt.Errorf("modules: %w", err)
	}
	x, err := wasm.New(ctx, wc, reg)
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

func (m *wasmModules) close() {
	if m.x != nil {
		_ = m.x.Close(context.Background())
	}
	if m.v != nil {
		_ = m.v.Close(context.Background())
	}
	if m.reg != nil {
		m.reg.Close()
	}
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

func init() {
	register(&command{name: "module", summary: "WASM modules: push, list, show, rm", subs: []*command{
		{name: "push", args: "FILE.wasm", nargs: one, summary: "upload a module (validated first; pushing a name again replaces it)",
			flags: func(fs *flag.FlagSet) runFunc {
				name := fs.String("name", "", "the module's name (default: the file name without .wasm)")
				asJSON := fs.Bool("json", false, "print JSON")
				return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, pos []string) error {
					return modulePush(ctx, c, io.stdout, pos[0], *name, *asJSON)
				})
			}},
		{name: "list", summary: "the modules: name, sha256, size, upload time", flags: func(fs *flag.FlagSet) runFunc {
			asJSON := fs.Bool("json", false, "print JSON")
			return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, _ []string) error {
				return moduleList(ctx, c, io.stdout, *asJSON)
			})
		}},
		{name: "show", args: "NAME|SHA256", nargs: one, summary: "one module with its exports and imports", flags: func(fs *flag.FlagSet) runFunc {
			asJSON := fs.Bool("json", false, "print JSON")
			return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, pos []string) error {
				return moduleShow(ctx, c, io.stdout, pos[0], *asJSON)
			})
		}},
		{name: "rm", args: "NAME", nargs: one, summary: "delete a module (refused while a saved gate uses it)", flags: func(fs *flag.FlagSet) runFunc {
			return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, pos []string) error {
				if err := c.do(ctx, http.MethodDelete, "/v1/modules/"+url.PathEscape(pos[0]), nil, nil); err != nil {
					return err
				}
				fmt.Fprintf(io.stdout, "deleted module %s\n", pos[0])
				return nil
			})
		}},
	}})
}

// runModule runs `pixie module …` (the tests' entry point).
func runModule(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return executeVerb(ctx, "module", args, cmdIO{os.Stdin, stdout, stderr})
}

// modulePush sends the file's bytes as the body of POST /v1/modules?name=N.
func modulePush(ctx context.Context, c *apiClient, stdout io.Writer, file, name string, asJSON bool) error {
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(file), ".wasm")
	}
	if err := modules.ValidName(name); err != nil {
		return fmt.Errorf("%w (pass --name)", err)
	}
	body, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if err := c.ready(); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/modules?name="+url.QueryEscape(name), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/wasm")
	var m modules.Module
	if err := c.send(req, &m); err != nil {
		return err
	}
	if asJSON {
		return writeJSON(stdout, m)
	}
	fmt.Fprintf(stdout, "pushed %s: sha256 %s, %d bytes, exports %s\n", m.Name, m.SHA256, m.Size, strings.Join(m.Exports, ", "))
	return nil
}

func moduleList(ctx context.Context, c *apiClient, stdout io.Writer, asJSON bool) error {
	var list server.ModuleList
	if err := c.do(ctx, http.MethodGet, "/v1/modules", nil, &list); err != nil {
		return err
	}
	if asJSON {
		return writeJSON(stdout, list)
	}
	if len(list.Modules) == 0 {
		fmt.Fprintln(stdout, "no modules (pixie module push FILE.wasm)")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSHA256\tSIZE\tUPLOADED")
	for _, m := range list.Modules {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", m.Name, m.SHA256[:12], m.Size, m.UploadedAt.Local().Format(time.DateTime))
	}
	return tw.Flush()
}

func moduleShow(ctx context.Context, c *apiClient, stdout io.Writer, ref string, asJSON bool) error {
	var m modules.Module
	if err := c.do(ctx, http.MethodGet, "/v1/modules/"+url.PathEscape(ref), nil, &m); err != nil {
		return err
	}
	if asJSON {
		return writeJSON(stdout, m)
	}
	fmt.Fprintf(stdout, "name      %s\nsha256    %s\nsize      %d\nuploaded  %s\nexports   %s\nimports   %s\n",
		m.Name, m.SHA256, m.Size, m.UploadedAt.Local().Format(time.RFC3339), strings.Join(m.Exports, ", "), strings.Join(m.Imports, ", "))
	return nil
}

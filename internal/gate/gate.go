// Package gate owns Pixie Gate: gate definitions and presets (saved all-or-nothing, validated
// at save time), the representative templates, the script folder, the evaluation pipeline
// with its point table and error policy, run records and their chat-note view, and per-session
// switches.
//
// Rules run through a runtime.Executor (the binary wires a runtime.Dispatcher with runtime/bash
// and runtime/wasm); the Pixie model is a model.Model. Each rule run gets a helper from
// internal/helper (its run token, its budget, `pixie ask` / `pixie judge` and the host
// functions), the same Service Pet's Skills use. HTTP lives in the server package; nothing here
// imports echo. The user-facing guide is docs/gates.md.
package gate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pixie-dev/pixie/internal/helper"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/runtime"
)

// ModuleChecker reports whether a WASM module exists in the module registry. Without one,
// gates whose rule is a module cannot be saved.
type ModuleChecker interface {
	ModuleExists(ctx context.Context, name string) (bool, error)
}

// TxModuleChecker is a ModuleChecker that can also check inside a save's store transaction
// (the module registry implements it). A save then reads the module's record in its own
// transaction, so a concurrent delete of that module makes one of the two conflict and retry:
// a saved gate never names a deleted module. (The registry's delete does the same the other
// way round, through Service.ModuleInUse.)
type TxModuleChecker interface {
	ModuleChecker
	ModuleExistsTx(ctx context.Context, tx *store.Tx, name string) (bool, error)
}

// Config configures a Service. Store is required; the zero value of every other field works.
type Config struct {
	// Store holds the definitions, run records and per-session state.
	Store *store.Store
	// Exec runs rules; nil means rules fail as unsupported.
	Exec runtime.Executor
	// Model is the Pixie model; nil means no model.
	Model model.Model
	// Helpers opens each rule run's helper (`pixie ask`, `pixie judge`, pixie_log, the run
	// token). Nil means a helper of the Service's own over Model, with no decision engine
	// (`pixie judge` is unavailable) and no URL (scripts get no helper).
	Helpers *helper.Service
	// Home is Pixie's data directory; the default script folder is <Home>/commands. Empty
	// means the current directory.
	Home string
	// ScriptDir is the script folder used when none was set through the API: an absolute path
	// or one starting with "~/". Empty means <Home>/commands.
	ScriptDir string
	// DefaultTimeout is the time limit of a gate that sets none; zero means 60s.
	DefaultTimeout time.Duration
	// RecordTTL is how long redo counters and per-session switches are kept; zero means 30
	// days. Run records are kept by Records.
	RecordTTL time.Duration
	// Records bounds the run records kept (records.maxBytes, records.maxAge); the zero value
	// keeps every record.
	Records RecordRetention
	// Modules checks module rules at save time; nil means modules are not available.
	Modules ModuleChecker
	// Logger receives operational messages; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Service is Pixie Gate. It is safe for concurrent use.
type Service struct {
	store *store.Store
	exec  runtime.Executor
	model model.Model
	cfg   Config
	log   *slog.Logger

	mu      sync.Mutex
	snap    *snapshot // saved definitions, indexed; nil until loaded
	listing *ScriptListing

	helpers  *helper.Service // each rule run's helper (PIXIE_TOKEN): internal/helper
	rec      *recorder       // writes run records in the background (recorder.go)
	ret      *retention      // counts the run records and sweeps them (retention.go)
	sessions sessionCache    // the sessions' entries this process wrote (records.go)
	missing  *missingTracker // counts the presets asked for that do not exist (missing.go)
	switches switchCache     // per-session switches read by Evaluate (switches.go)

	// snapGen counts invalidations of snap (under mu), so that a load racing with one does not
	// keep what it read before it.
	snapGen  uint64
	unlisten func() // stops hearing other replicas' changes (shared stores)
}

// New returns a Service over cfg.Store. On a shared store it hears other replicas' changes
// until Close.
func New(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("gate: Config.Store is required")
	}
	st, h := cfg.Store, cfg.Helpers
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = 60 * time.Second
	}
	if cfg.RecordTTL <= 0 {
		cfg.RecordTTL = 30 * 24 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Home == "" {
		if wd, err := os.Getwd(); err == nil {
			cfg.Home = wd
		}
	}
	cfg.Home = filepath.Clean(cfg.Home)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if h == nil {
		var err error
		if h, err = helper.New(context.Background(), helper.Config{Instance: st.Instance(), Model: cfg.Model}); err != nil {
			return nil, fmt.Errorf("gate: %w", err)
		}
	}
	s := &Service{
		store:   st,
		exec:    cfg.Exec,
		model:   cfg.Model,
		cfg:     cfg,
		log:     log,
		helpers: h,
		missing: newMissingTracker(st, log, cfg.Now),
		ret:     newRetention(st, cfg.Records, log, cfg.Now),
	}
	s.sessions.on = !st.Shared()
	s.rec = newRecorder(st, log, &s.sessions.commit, s.writeRecords)
	if err := s.ret.markFresh(ctx); err != nil {
		return nil, fmt.Errorf("gate: %w", err)
	}
	s.ret.start()
	if st.Shared() {
		s.unlisten = st.Listen(topic, s.heard)
	}
	return s, nil
}

// collections (documented in internal/store's key layout).
var (
	defsCol    = store.NewCollection[Gate]("gate-def")
	presetsCol = store.NewCollection[Preset]("gate-preset")
	configCol  = store.NewCollection[string]("gate-config")
	revCol     = store.NewCollection[int64]("gate-config")
	runsCol    = store.NewCollection[Record]("gate-run")
	runIDCol   = store.NewCollection[string]("gate-run-id")
	switchCol  = store.NewCollection[sessionSwitch]("gate-switch")
	redoCol    = store.NewCollection[int]("gate-redo")
	sessionCol = store.NewCollection[sessionInfo]("gate-session")
	// missingCol (gate-missing) is in missing.go.
)

const (
	cfgScriptDir = "script-dir"
	cfgRevision  = "revision"
)

// ModuleCheckerFunc adapts a function to ModuleChecker.
type ModuleCheckerFunc func(ctx context.Context, name string) (bool, error)

// ModuleExists implements ModuleChecker.
func (f ModuleCheckerFunc) ModuleExists(ctx context.Context, name string) (bool, error) {
	return f(ctx, name)
}

var _ ModuleChecker = ModuleCheckerFunc(nil)

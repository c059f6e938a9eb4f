// Package app is Pixie's composition root: it builds the server `pixie serve` runs. It opens the
// home's store (Badger, or PostgreSQL), joins the cluster, takes the admin token, and wires the
// domain services (settings and models, the judge, the rule executors, WASM modules, the per-run
// helper, gates, hints, the model-API proxy, Pet, the Lark channel, hooks) into server.Deps. It
// is the one place that chooses engines (Badger, wazero, bash) for the portable interfaces the
// domains use; cmd/pixie holds only verbs.
//
// Every component is built by New(ctx, Config) (*T, error), its dependencies being fields of its
// Config, and released by Close(ctx) error, in the reverse order of its making: gate, hint,
// proxy, settings, runtime/modules, runtime/wasm (the executor's module source is
// Config.Source; the validator needs none), judge, helper, pet, hooks, lark, cluster,
// runtime/bash and the server. Where a component holds nothing to release its Close returns nil, so that every
// one closes alike. The exceptions, and why:
//   - the stores (badgerstore.Open, pgstore.Open, store.Store.Close() error): drivers opened
//     like database/sql's, by their own packages' Open;
//   - values with nothing to start or release, built as values: model.NewSwappable,
//     judge.NewKeyStore, credentials.For, wasm.NewLimits, runtime.Dispatcher.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/pixie-dev/pixie/internal/channel/lark"
	"github.com/pixie-dev/pixie/internal/cluster"
	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/helper"
	"github.com/pixie-dev/pixie/internal/redact"
	"github.com/pixie-dev/pixie/internal/settings"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
	"github.com/pixie-dev/pixie/internal/store/pgstore"
	"github.com/pixie-dev/pixie/server"
)

// Config configures New. The zero value of every field but Config works.
type Config struct {
	// Config is the loaded configuration (config.Load); its Home is the Pixie home.
	Config config.Config
	// Version is reported by /v1/info and used to update installed agent skills.
	Version string
	// Logger receives operational messages; nil means one built from Config's log settings
	// (text or JSON on stderr).
	Logger *slog.Logger
}

// App is a wired server: the store, the cluster node and the domain services behind it.
type App struct {
	cfg      config.Config
	log      *slog.Logger
	st       *store.Store
	node     *cluster.Node
	token    string
	fresh    bool
	srv      *server.Server
	helpers  *helper.Service
	settings *settings.Service
	lark     *lark.Channel
	info     map[string]any // /v1/info's static part
	// closers release what New made, in reverse order.
	closers []func(context.Context) error
}

// New builds the server: it creates the home's folders on first start, opens the store, takes
// the admin token (the home's token file, or, on a shared store, the store's, written into this
// home's token file, so that every replica accepts it), joins the cluster and wires the domain
// services. On error, what was made is released.
func New(ctx context.Context, c Config) (_ *App, err error) {
	cfg := c.Config
	log := c.Logger
	var logw *logWriter
	if log == nil {
		logw = newLogWriter(os.Stderr)
		log = newLogger(cfg, logw)
	}
	a := &App{cfg: cfg, log: log}
	if logw != nil {
		// The first closer, so the last to run: what the others log is written too.
		a.closers = append(a.closers, func(context.Context) error { _ = logw.Close(); return nil })
	}
	defer func() {
		if err != nil {
			_ = a.Close(context.Background())
		}
	}()
	if err := prepareHome(cfg.Home); err != nil {
		return nil, err
	}
	st, storeInfo, err := openStore(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	a.st = st
	a.closers = append(a.closers, func(context.Context) error {
		if err := st.Close(); err != nil {
			log.Error("closing the store", "err", err)
			return fmt.Errorf("store: %w", err)
		}
		return nil
	})
	if a.token, a.fresh, err = cluster.AdminToken(ctx, st, cfg.Home); err != nil {
		return nil, err
	}
	node, err := cluster.New(ctx, cluster.Config{Store: st, URL: cfg.Store.Postgres.ReplicaURL, Logger: log})
	if err != nil {
		return nil, err
	}
	a.node = node
	// Leaving the cluster is best effort: the record expires on its own.
	a.closers = append(a.closers, func(ctx context.Context) error { _ = node.Close(ctx); return nil })
	if err := a.wire(ctx, c.Version); err != nil {
		return nil, err
	}
	a.info["store"] = storeInfo
	return a, nil
}

// Close releases every component in the reverse order of its making and returns their errors
// joined. It may be called more than once.
func (a *App) Close(ctx context.Context) error {
	var errList []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		if err := a.closers[i](ctx); err != nil {
			errList = append(errList, err)
		}
	}
	a.closers = nil
	return errors.Join(errList...)
}

// Server is the wired HTTP server.
func (a *App) Server() *server.Server { return a.srv }

// Store is the opened store.
func (a *App) Store() *store.Store { return a.st }

// Logger is the App's logger.
func (a *App) Logger() *slog.Logger { return a.log }

// Token is the admin token; fresh says it was made by this start (show it once).
func (a *App) Token() (token string, fresh bool) { return a.token, a.fresh }

// Settings is the run-time model and decision-engine settings service.
func (a *App) Settings() *settings.Service { return a.settings }

// Lark is the Lark channel.
func (a *App) Lark() *lark.Channel { return a.lark }

// Listening tells the App the URL the server listens at: scripts get it as PIXIE_URL when no
// public URL is configured (the real port, when the address asked for :0), and the cluster
// records it as this replica's when no replica URL is configured.
func (a *App) Listening(ctx context.Context, url string) error {
	if a.cfg.PublicURL == "" && a.helpers != nil {
		a.helpers.SetURL(url)
	}
	if a.cfg.Store.Postgres.ReplicaURL == "" {
		if err := a.node.SetURL(ctx, url); err != nil {
			return fmt.Errorf("cluster: record this replica's URL: %w", err)
		}
	}
	return nil
}

// The home's layout. The store lives in data/, module bytes in blobs/, the wazero compilation
// cache in cache/, and legacy gate scripts in commands/ (the default script folder).
const (
	homeData     = "data"
	homeBlobs    = "blobs"
	homeCache    = "cache"
	homeCommands = "commands"
)

// newLogger returns the logger of cfg's log settings, writing through w (logwriter.go).
func newLogger(cfg config.Config, w *logWriter) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(flushOnWarn{Handler: h, w: w})
}

// prepareHome creates the home and its folders on first start.
func prepareHome(home string) error {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("create home %s: %w", home, err)
	}
	for _, d := range []string{homeData, homeBlobs, homeCache, homeCommands} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	return nil
}

// openStore opens the configured store: Badger in <home>/data, or PostgreSQL. An unreachable
// database stops start-up with an error naming it (password masked).
func openStore(ctx context.Context, cfg config.Config, log *slog.Logger) (*store.Store, map[string]any, error) {
	if cfg.Store.Driver == "postgres" {
		pg := cfg.Store.Postgres
		st, err := pgstore.Open(ctx, pgstore.Options{URL: pg.URL, MaxConns: pg.MaxConns,
			StatementTimeout: pg.StatementTimeout, Poll: pg.Poll, PollInterval: pg.PollInterval, Logger: log})
		if err != nil {
			return nil, nil, err
		}
		log.Info("store: PostgreSQL", "url", redact.URL(pg.URL), "instance", st.Instance())
		return st, map[string]any{"driver": "postgres", "url": redact.URL(pg.URL), "poll": pg.Poll,
			"schemaVersion": pgstore.SchemaVersion, "instance": st.Instance()}, nil
	}
	dir := filepath.Join(cfg.Home, homeData)
	st, err := badgerstore.Open(ctx, badgerstore.Options{Dir: dir, GCInterval: cfg.Server.StoreGCInterval, Logger: log})
	if err != nil {
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			// Badger's lock says another process holds the store: most likely a second
			// `pixie serve` with the same home.
			return nil, nil, fmt.Errorf("another process (most likely a `pixie serve` already running) is using the home %s: its store %s is locked. Use that server, stop it, or start this one with another home (--home DIR, or $PIXIE_HOME)", cfg.Home, dir)
		}
		return nil, nil, err
	}
	return st, map[string]any{"driver": "badger", "dir": dir}, nil
}

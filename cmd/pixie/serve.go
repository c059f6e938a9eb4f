package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
	"github.com/pixie-dev/pixie/server"
)

const tokenFile = "token"

// The home's layout. The store lives in data/, module bytes in blobs/, the wazero compilation
// cache in cache/, and legacy gate scripts in commands/ (the default script folder).
const (
	homeData     = "data"
	homeBlobs    = "blobs"
	homeCache    = "cache"
	homeCommands = "commands"
)

func init() {
	register(verb{name: "serve", usage: "start the server: pixie serve [--home DIR] [--addr HOST:PORT] [--set key=value]…", run: cmdServe})
	register(verb{name: "config", usage: "print the effective configuration (secrets masked)", run: cmdConfig})
}

// setFlags collects repeated --set key=value flags.
type setFlags map[string]string

func (s setFlags) String() string { return "" }
func (s setFlags) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("--set needs key=value, got %q", v)
	}
	s[k] = val
	return nil
}

// loadConfig parses the shared --home/--addr/--set flags and loads the configuration.
func loadConfig(name string, args []string) (config.Config, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	home := fs.String("home", "", "Pixie home (default $PIXIE_HOME, else ~/.pixie)")
	addr := fs.String("addr", "", "listen address host:port (default $PIXIE_ADDR, else 127.0.0.1:7777)")
	sets := setFlags{}
	fs.Var(sets, "set", "override any setting: --set model.provider=openai (repeatable)")
	if err := fs.Parse(args); err != nil {
		return config.Config{}, err
	}
	if fs.NArg() > 0 {
		return config.Config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *addr != "" {
		sets["addr"] = *addr
	}
	h, err := config.ResolveHome(*home, os.Getenv)
	if err != nil {
		return config.Config{}, err
	}
	return config.Load(h, os.Getenv, os.Environ(), sets)
}

func cmdConfig(ctx context.Context, args []string) int {
	markdown := false
	rest := args[:0:0]
	for _, a := range args {
		if a == "--markdown" {
			markdown = true
			continue
		}
		rest = append(rest, a)
	}
	cfg, err := loadConfig("config", rest)
	if err != nil {
		return fail(err)
	}
	if markdown {
		fmt.Println("| key | environment | default | meaning |")
		fmt.Println("| --- | --- | --- | --- |")
		for _, s := range cfg.Settings() {
			def := "(empty)"
			if s.Value != "" {
				def = "`" + s.Value + "`"
			}
			fmt.Printf("| `%s` | `%s` | %s | %s |\n", s.Key, s.Env, def, s.Doc)
		}
		return 0
	}
	fmt.Printf("# home: %s\n", cfg.Home)
	for _, s := range cfg.Settings() {
		fmt.Printf("%-28s = %-24s # %s\n", s.Key, s.Value, s.Env)
	}
	return 0
}

func cmdServe(ctx context.Context, args []string) int {
	cfg, err := loadConfig("serve", args)
	if err != nil {
		return fail(err)
	}
	if err := serve(ctx, cfg); err != nil {
		return fail(err)
	}
	return 0
}

func newLogger(cfg config.Config) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: lvl}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// prepareHome creates the home and its folders on first start and returns the admin token,
// creating it (and reporting fresh=true) when missing.
func prepareHome(home string) (token string, fresh bool, err error) {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return "", false, fmt.Errorf("create home %s: %w", home, err)
	}
	for _, d := range []string{homeData, homeBlobs, homeCache, homeCommands} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
			return "", false, fmt.Errorf("create %s: %w", d, err)
		}
	}
	p := filepath.Join(home, tokenFile)
	raw, err := os.ReadFile(p)
	switch {
	case err == nil:
		t := strings.TrimSpace(string(raw))
		if len(t) < 32 {
			return "", false, fmt.Errorf("token file %s is too short; delete it to generate a new one", p)
		}
		if st, err := os.Stat(p); err == nil && st.Mode().Perm()&0o077 != 0 {
			return "", false, fmt.Errorf("token file %s must not be readable by others (chmod 600)", p)
		}
		return t, false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", false, fmt.Errorf("read token: %w", err)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", false, err
	}
	t := hex.EncodeToString(b)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", false, fmt.Errorf("write token: %w", err)
	}
	if _, err := f.WriteString(t + "\n"); err != nil {
		f.Close()
		return "", false, err
	}
	if err := f.Close(); err != nil {
		return "", false, err
	}
	return t, true, nil
}

func serve(ctx context.Context, cfg config.Config) error {
	log := newLogger(cfg)
	token, fresh, err := prepareHome(cfg.Home)
	if err != nil {
		return err
	}
	st, err := badgerstore.Open(ctx, badgerstore.Options{
		Dir: filepath.Join(cfg.Home, homeData), GCInterval: cfg.Server.StoreGCInterval, Logger: log,
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := st.Close(); err != nil {
			log.Error("closing the store", "err", err)
		}
	}()

	a, err := buildApp(ctx, cfg, log, st, token)
	if err != nil {
		return err
	}
	defer a.close()

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	url := "http://" + ln.Addr().String()
	if cfg.PublicURL == "" && a.gates != nil {
		a.gates.SetHelperURL(url) // the real port, when --addr asked for :0
	}
	fmt.Printf("Pixie %s is listening on %s (home %s)\n", version, url, cfg.Home)
	if fresh {
		fmt.Printf("Admin token (shown once; it is also in %s):\n  %s\n", filepath.Join(cfg.Home, tokenFile), token)
	} else {
		fmt.Printf("Admin token: in %s\n", filepath.Join(cfg.Home, tokenFile))
	}
	fmt.Printf("Try: curl -H \"Authorization: Bearer $(cat %s)\" %s/v1/info\n", filepath.Join(cfg.Home, tokenFile), url)
	log.Info("serving", "addr", ln.Addr().String())
	err = a.srv.Serve(ctx, ln, cfg.Server.ShutdownTimeout)
	log.Info("stopped")
	return err
}

// app holds the wired services of a running server.
type app struct {
	srv     *server.Server
	gates   *gate.Service
	closers []func()
}

func (a *app) close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
}

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

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
	register(&command{name: "serve", summary: "start the server", flags: func(fs *flag.FlagSet) runFunc {
		cf := configFlags(fs, true)
		return func(ctx context.Context, io cmdIO, _ []string) error {
			cfg, err := cf.load()
			if err != nil {
				return err
			}
			return serve(ctx, cfg, io.stdout)
		}
	}})
	register(&command{name: "config", summary: "print the effective configuration (secrets masked)", flags: func(fs *flag.FlagSet) runFunc {
		cf := configFlags(fs, true)
		markdown := fs.Bool("markdown", false, "print the settings as the README's Markdown table")
		return func(ctx context.Context, io cmdIO, _ []string) error {
			cfg, err := cf.load()
			if err != nil {
				return err
			}
			return printConfig(io.stdout, cfg, *markdown)
		}
	}})
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

// cfgFlags are the flags that choose the configuration: --home, --addr and --set.
type cfgFlags struct {
	home, addr *string
	sets       setFlags
}

func configFlags(fs *flag.FlagSet, withAddr bool) *cfgFlags {
	f := &cfgFlags{sets: setFlags{}}
	f.home = fs.String("home", "", "Pixie home (default $PIXIE_HOME, else ~/.pixie)")
	empty := ""
	f.addr = &empty
	if withAddr {
		f.addr = fs.String("addr", "", "listen address host:port (default $PIXIE_ADDR, else 127.0.0.1:7777)")
	}
	fs.Var(f.sets, "set", "override any setting: --set model.provider=openai (repeatable)")
	return f
}

// load resolves the home and loads the configuration with the flags' overrides.
func (f *cfgFlags) load() (config.Config, error) {
	if *f.addr != "" {
		f.sets["addr"] = *f.addr
	}
	h, err := config.ResolveHome(*f.home, os.Getenv)
	if err != nil {
		return config.Config{}, err
	}
	return config.Load(h, os.Getenv, os.Environ(), f.sets)
}

func printConfig(w io.Writer, cfg config.Config, markdown bool) error {
	if markdown {
		fmt.Fprintln(w, "| key | environment | default | meaning |")
		fmt.Fprintln(w, "| --- | --- | --- | --- |")
		for _, s := range cfg.Settings() {
			def := "(empty)"
			if s.Value != "" {
				def = "`" + s.Value + "`"
			}
			fmt.Fprintf(w, "| `%s` | `%s` | %s | %s |\n", s.Key, s.Env, def, s.Doc)
		}
		return nil
	}
	fmt.Fprintf(w, "# home: %s\n", cfg.Home)
	for _, s := range cfg.Settings() {
		fmt.Fprintf(w, "%-28s = %-24s # %s\n", s.Key, s.Value, s.Env)
	}
	return nil
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

func serve(ctx context.Context, cfg config.Config, out io.Writer) error {
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
		return listenError(cfg.Addr, err)
	}
	url := "http://" + ln.Addr().String()
	if cfg.PublicURL == "" && a.gates != nil {
		a.gates.SetHelperURL(url) // the real port, when --addr asked for :0
	}
	fmt.Fprintf(out, "Pixie %s is listening on %s (home %s)\n", version, url, cfg.Home)
	if fresh {
		fmt.Fprintf(out, "Admin token (shown once; it is also in %s):\n  %s\n", filepath.Join(cfg.Home, tokenFile), token)
	} else {
		fmt.Fprintf(out, "Admin token: in %s\n", filepath.Join(cfg.Home, tokenFile))
	}
	fmt.Fprintf(out, "Try: curl -H \"Authorization: Bearer $(cat %s)\" %s/v1/info\n", filepath.Join(cfg.Home, tokenFile), url)
	log.Info("serving", "addr", ln.Addr().String())
	err = a.srv.Serve(ctx, ln, cfg.Server.ShutdownTimeout)
	log.Info("stopped")
	return err
}

// listenError explains a failed listen; a busy port suggests --addr.
func listenError(addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		host, port, _ := net.SplitHostPort(addr)
		next := "another port"
		if n, perr := strconv.Atoi(port); perr == nil && n > 0 && n < 65535 {
			next = net.JoinHostPort(host, strconv.Itoa(n+1))
		}
		return fmt.Errorf("cannot listen on %s: the port is already in use (another `pixie serve`?). Stop it, or start on another address: pixie serve --addr %s (or set PIXIE_ADDR, or addr in pixie.yaml), and give the CLI the same address with --url http://%s", addr, next, next)
	}
	return fmt.Errorf("cannot listen on %s: %w", addr, err)
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

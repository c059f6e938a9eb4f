package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pixie-dev/pixie/internal/app"
	"github.com/pixie-dev/pixie/internal/cluster"
	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/settings"
)

const tokenFile = cluster.TokenFile

func init() {
	register(&command{name: "serve", summary: "start the server", flags: func(fs *flag.FlagSet) runFunc {
		cf := configFlags(fs, true)
		return func(ctx context.Context, io cmdIO, _ []string) error {
			cfg, err := cf.load()
			if err != nil {
				return err
			}
			setServeProcs(ctx)
			return serve(ctx, cfg, io.stdout)
		}
	}})
	register(&command{name: "config", summary: "print the effective configuration (secrets masked)", flags: func(fs *flag.FlagSet) runFunc {
		cf := configFlags(fs, true)
		markdown := fs.Bool("markdown", false, "print the settings as the README's Markdown table")
		offline := fs.Bool("offline", false, "do not ask the server for the settings saved at run time")
		var get getFlags
		fs.Var(&get, "get", "print only this setting's value from pixie.yaml and the environment, a line each (repeatable; implies --offline): --get hooks.timeout")
		var conn clientFlags
		fs.StringVar(&conn.url, "url", "", "server URL for the run-time settings (default $PIXIE_SERVER_URL, else http://<addr>)")
		fs.StringVar(&conn.token, "token", "", "admin token (default $PIXIE_ADMIN_TOKEN, else the home's token file)")
		return func(ctx context.Context, io cmdIO, _ []string) error {
			cfg, err := cf.load()
			if err != nil {
				return err
			}
			if *markdown {
				return printConfig(io.stdout, cfg, true, nil)
			}
			if len(get) > 0 {
				return printValues(io.stdout, cfg, get)
			}
			rt := &runtimeSettings{}
			if !*offline {
				conn.home = cfg.Home
				if conn.url == "" && os.Getenv("PIXIE_SERVER_URL") == "" {
					conn.url = "http://" + cfg.Addr
				}
				rt = fetchRuntimeSettings(ctx, conn)
			}
			return printConfig(io.stdout, cfg, false, rt)
		}
	}})
}

// getFlags collects repeated --get key flags.
type getFlags []string

func (g *getFlags) String() string { return "" }
func (g *getFlags) Set(v string) error {
	if v == "" {
		return fmt.Errorf("--get needs a setting's key, e.g. hooks.timeout")
	}
	*g = append(*g, v)
	return nil
}

// printValues prints the values of the keys, a line each (secrets masked), as config.Load
// made them: what pixie-hook reads when it needs the configuration (internal/hookcmd).
func printValues(w io.Writer, cfg config.Config, keys []string) error {
	all := cfg.Settings()
	var b strings.Builder
	for _, k := range keys {
		i := slices.IndexFunc(all, func(s config.Setting) bool { return strings.EqualFold(s.Key, k) })
		if i < 0 {
			return errs.New(errs.Invalid, "no setting %q (pixie config lists them)", k)
		}
		b.WriteString(all[i].Value + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
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

// runtimeSettings are the settings saved on the server at run time (Studio's settings page,
// `pixie settings`, PUT /v1/settings/model), which win over pixie.yaml: key → value.
type runtimeSettings struct {
	values map[string]string
	from   string // the server asked
	err    error  // why they are not shown
}

// fetchRuntimeSettings asks the server for its run-time settings, briefly.
func fetchRuntimeSettings(ctx context.Context, conn clientFlags) *runtimeSettings {
	c, err := newClient(conn)
	if err != nil {
		return &runtimeSettings{err: err}
	}
	c.HTTP.Timeout = 3 * time.Second
	var v settings.View
	rt := &runtimeSettings{from: c.Base, values: map[string]string{}}
	if err := c.do(ctx, http.MethodGet, "/v1/settings", nil, &v); err != nil {
		rt.err = err
		return rt
	}
	add := func(prefix string, m settings.ModelView) {
		vals := map[string]string{"provider": m.Provider, "baseUrl": m.BaseURL, "model": m.Model, "timeout": m.Timeout, "apiKey": "********"}
		for name, f := range m.Fields {
			if f.Source == settings.SourceSettings {
				rt.values[prefix+name] = vals[name]
			}
		}
	}
	add("model.", v.Model)
	if v.Judge != nil {
		add("judge.model.", v.Judge.Model)
		vals := map[string]string{"engine": v.Judge.Engine, "systemPrompt": oneLine(v.Judge.SystemPrompt, 24), "jevBaseUrl": v.Judge.JevBaseURL, "jevModel": v.Judge.JevModel, "jevTimeout": v.Judge.JevTimeout}
		for name, f := range v.Judge.Fields {
			if f.Source == settings.SourceSettings {
				rt.values["judge."+name] = vals[name]
			}
		}
	}
	return rt
}

func printConfig(w io.Writer, cfg config.Config, markdown bool, rt *runtimeSettings) error {
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
	switch {
	case rt == nil || (rt.err == nil && rt.from == ""):
		fmt.Fprintln(w, "# run-time settings: not asked (--offline)")
	case rt.err != nil:
		fmt.Fprintf(w, "# run-time settings: not shown (%v)\n", rt.err)
	case len(rt.values) == 0:
		fmt.Fprintf(w, "# run-time settings: none saved on %s\n", rt.from)
	default:
		fmt.Fprintf(w, "# run-time settings: lines marked [run time] were saved on %s (Studio or pixie settings) and win over pixie.yaml\n", rt.from)
	}
	for _, s := range cfg.Settings() {
		if v, ok := rt.runtime(s.Key); ok {
			fmt.Fprintf(w, "%-28s = %-24s # %s [run time; pixie.yaml/env: %s]\n", s.Key, v, s.Env, orDash(s.Value))
			continue
		}
		fmt.Fprintf(w, "%-28s = %-24s # %s\n", s.Key, s.Value, s.Env)
	}
	return nil
}

func serve(ctx context.Context, cfg config.Config, out io.Writer) error {
	applyMemoryLimit(cfg.Server.MemoryLimit)
	a, err := app.New(ctx, app.Config{Config: cfg, Version: version})
	if err != nil {
		return err
	}
	defer func() { _ = a.Close(context.Background()) }()
	log := a.Logger()

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return listenError(cfg.Addr, err)
	}
	url := "http://" + ln.Addr().String()
	if err := a.Listening(ctx, url); err != nil {
		return err
	}
	token, fresh := a.Token()
	fmt.Fprintf(out, "Pixie %s is listening on %s (home %s)\n", version, url, cfg.Home)
	if fresh {
		fmt.Fprintf(out, "Admin token (shown once; it is also in %s):\n  %s\n", filepath.Join(cfg.Home, tokenFile), token)
	} else {
		fmt.Fprintf(out, "Admin token: in %s\n", filepath.Join(cfg.Home, tokenFile))
	}
	fmt.Fprintf(out, "Studio: %s/ (log in with the admin token)\n", url)
	printModelStatus(ctx, out, a.Settings())
	fmt.Fprintf(out, "Try: curl -H \"Authorization: Bearer $(cat %s)\" %s/v1/info\n", filepath.Join(cfg.Home, tokenFile), url)
	log.Info("serving", "addr", ln.Addr().String())
	err = a.Server().Serve(ctx, ln, cfg.Server.ShutdownTimeout)
	log.Info("stopped")
	return err
}

// printModelStatus says at start-up whether a Pixie model is configured, and if not, the one
// command that sets one.
func printModelStatus(ctx context.Context, out io.Writer, st *settings.Service) {
	if st == nil {
		return
	}
	v, err := st.Get(ctx)
	if err != nil {
		fmt.Fprintf(out, "Model: unknown (%v)\n", err)
		return
	}
	m := v.Model
	if m.Configured {
		fmt.Fprintf(out, "Model: %s %s at %s\n", m.Provider, m.Model, m.Endpoint)
		if m.Problem != "" {
			fmt.Fprintf(out, "  problem: %s\n", m.Problem)
		}
		return
	}
	fmt.Fprintln(out, "Model: none configured. Rules (WASM guests, scripts) work without one; gates whose task needs the model follow their error policy.")
	if m.Problem != "" {
		fmt.Fprintf(out, "  problem: %s\n", m.Problem)
	}
	fmt.Fprintln(out, "  Set one (used at once, kept across restarts):")
	fmt.Fprintln(out, "    pixie settings model set --provider openai --model gpt-4o-mini --api-key-env OPENAI_API_KEY")
	fmt.Fprintln(out, "  (or --provider anthropic; --base-url for vLLM, Ollama, LM Studio; or Studio's Settings page)")
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

func (rt *runtimeSettings) runtime(key string) (string, bool) {
	if rt == nil || rt.values == nil {
		return "", false
	}
	v, ok := rt.values[key]
	return v, ok
}

// applyMemoryLimit sets server.memoryLimit as the Go runtime's soft memory limit, unless
// GOMEMLIMIT is set (the runtime has read it then, and an operator's variable wins).
func applyMemoryLimit(limit int64) {
	if os.Getenv("GOMEMLIMIT") != "" || limit <= 0 {
		return
	}
	debug.SetMemoryLimit(limit)
}

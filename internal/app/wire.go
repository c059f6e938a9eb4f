package app

import (
	"context"
	"fmt"
	"maps"
	"os"

	"github.com/pixie-dev/pixie/internal/agentskill"
	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/credentials"
	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/helper"
	"github.com/pixie-dev/pixie/internal/hint"
	"github.com/pixie-dev/pixie/internal/hooks"
	"github.com/pixie-dev/pixie/internal/judge"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/proxy"
	"github.com/pixie-dev/pixie/internal/rewrite"
	"github.com/pixie-dev/pixie/internal/settings"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/bash"
	"github.com/pixie-dev/pixie/runtime/sandbox"
	"github.com/pixie-dev/pixie/server"
)

// wire builds the domain services over the App's store and node, and the server that serves
// them. Each component's release goes on a.closers as soon as it is made.
func (a *App) wire(ctx context.Context, version string) error {
	cfg, log, st, node, token := a.cfg, a.log, a.st, a.node, a.token
	// The Pixie model every service holds (gates, the judge, Pet, Lark) is a Swappable: the
	// settings service gives it its provider from pixie.yaml, the environment and the settings
	// saved at run time, and swaps it when the Studio settings page changes them.
	pixieModel := model.NewSwappable(nil)
	// The decision engine: the judge model (or the Pixie model), the Jev key from the
	// environment, a .env file (working directory or home), or the home's credentials file.
	wd, _ := os.Getwd()
	// The credentials file of the home, or, on a shared store, the store (every replica uses
	// the keys saved through any of them).
	creds, err := credentials.For(ctx, st, cfg.Home)
	if err != nil {
		return err
	}
	keys := judge.NewKeyStore(judge.KeyStoreOptions{DotenvDirs: []string{wd, cfg.Home}, Secrets: creds})
	judgeSvc, err := judge.New(ctx, judge.Config{Engine: cfg.Judge.Engine, SystemPrompt: cfg.Judge.SystemPrompt,
		Model: modelConfig(cfg.Judge.Model), Logger: log,
		Jev:        judge.JevConfig{BaseURL: cfg.Judge.JevBaseURL, Model: cfg.Judge.JevModel, Timeout: cfg.Judge.JevTimeout},
		PixieModel: pixieModel, Keys: keys})
	if err != nil {
		return fmt.Errorf("judge: %w", err)
	}
	a.closers = append(a.closers, judgeSvc.Close)
	settingsSvc, err := settings.New(ctx, settings.Config{Config: cfg, Store: st, Secrets: creds,
		Model: pixieModel, Judge: judgeSvc, Logger: log})
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	a.closers = append(a.closers, settingsSvc.Close)
	info := map[string]any{
		"home":     cfg.Home,
		"addr":     cfg.Addr,
		"instance": node.Self(),
		// Studio and the CLI warn when no preset has this name (hooks that name none use it).
		"hooks": map[string]any{"defaultPreset": cfg.Hooks.DefaultPreset},
	}
	a.info = info
	// Rules run through one dispatcher: legacy scripts under the Landlock sandbox, WASM modules
	// in wazero. A missing executor is not fatal: its rules fail under their gate's error policy.
	rules := runtime.Dispatcher{}
	bx, err := bash.New(ctx, bash.Config{Hidden: []string{cfg.Home}})
	if err != nil {
		log.Warn("hook scripts are unavailable", "err", err)
	} else {
		rules[runtime.KindScript] = bx
		a.closers = append(a.closers, bx.Close)
	}
	sandboxInfo := map[string]any{"landlockABI": sandbox.KernelABI()}
	if err := sandbox.Probe(); err != nil {
		sandboxInfo["error"] = err.Error()
	}
	if bx != nil {
		// How a run's processes are contained: namespaces, or the subreaper fallback and why.
		if iso := bx.Isolation(); iso.Namespaces {
			sandboxInfo["processes"] = "namespaces"
		} else {
			sandboxInfo["processes"], sandboxInfo["processesReason"] = "subreaper", iso.Reason
		}
		// What each run starts: the sandbox init beside pixie, or pixie itself (slower) and why.
		command, slow := bx.Sandbox()
		sandboxInfo["command"] = command
		if slow == "" {
			sandboxInfo["start"] = "init"
		} else {
			sandboxInfo["start"], sandboxInfo["startReason"] = "pixie", slow
		}
	}
	info["sandbox"] = sandboxInfo
	// WASM modules: the registry (<home>/blobs) and their executor (compile cache <home>/cache/wasm).
	mods, err := newModules(ctx, cfg, log, st, rules, info)
	if err != nil {
		return err
	}
	a.closers = append(a.closers, mods.Close)

	helperURL := cfg.PublicURL
	if helperURL == "" {
		helperURL = "http://" + cfg.Addr
	}
	// One helper for every run that gets one (gate rules, Pet's script and WASM Skills): its
	// run tokens (PIXIE_TOKEN) are minted there and answered by the server's helper routes.
	helpers, err := helper.New(ctx, helper.Config{Instance: st.Instance(), Model: pixieModel, Judge: judgeSvc, URL: helperURL})
	if err != nil {
		return fmt.Errorf("helper: %w", err)
	}
	a.closers = append(a.closers, helpers.Close)
	a.helpers = helpers
	gates, err := gate.New(ctx, gate.Config{Store: st, Exec: rules, Model: pixieModel, Helpers: helpers,
		Home: cfg.Home, ScriptDir: cfg.Gates.ScriptDir, DefaultTimeout: cfg.Gates.DefaultTimeout,
		Records: gate.RecordRetention{MaxBytes: cfg.Records.MaxBytes, MaxAge: cfg.Records.MaxAge},
		Logger:  log, Modules: mods.checker(),
	})
	if err != nil {
		return fmt.Errorf("gates: %w", err)
	}
	a.closers = append(a.closers, gates.Close) // writes queued run records
	mods.warm(ctx, gates)

	// Hints (hints.enabled): off means no queue at all, so the hint routes, the event stream and
	// the model-side tool routes are not mounted (404), /v1/info says so (pixie mcp then offers
	// no hint tools, Studio no hint bar), and neither the proxy nor the hooks deliver any.
	var hints *hint.Queue
	if cfg.Hints.Enabled {
		hints, err = hint.New(ctx, hint.Config{Store: st,
			MaxPerStep: cfg.Hints.MaxPerStep, MaxContentChars: cfg.Hints.MaxContentChars,
			MaxPendingPerSession: cfg.Hints.MaxPendingPerSession, KeepConsumed: cfg.Hints.KeepConsumed,
			HeartbeatInterval: cfg.Hints.Heartbeat, Lease: cfg.Hints.Lease, Locale: cfg.Hints.Locale, Logger: log,
		})
		if err != nil {
			return fmt.Errorf("hints: %w", err)
		}
		a.closers = append(a.closers, hints.Close)
	}
	// The model-API side channel (issue 19): hints injected into one model request, outside the
	// chat history, and the replacements the hooks cannot make. hints.delivery decides who
	// delivers hints: the proxy for the sessions it carries (and for every session whose hooks
	// say their host goes through it) and hooks for the others (auto), the proxy only, or the
	// hooks only.
	// The replacements hooks cannot make (a user's prompt, a built-in tool's structured result),
	// which the hooks of a host going through the proxy leave for the proxy to make.
	rws, err := rewrite.New(ctx, rewrite.Config{Store: st})
	if err != nil {
		return fmt.Errorf("rewrite: %w", err)
	}
	a.closers = append(a.closers, rws.Close)
	pcfg := proxy.Config{Store: st, Rewrites: rws, AnthropicURL: cfg.Proxy.AnthropicURL, OpenAIURL: cfg.Proxy.OpenAIURL,
		InjectLimit: cfg.Proxy.InjectLimit, NoInject: cfg.Hints.Delivery == "hooks", Lease: cfg.Hints.Lease, Logger: log}
	hcfg := hooks.Config{Store: st, Gates: gates, Rewrites: rws, DefaultPreset: cfg.Hooks.DefaultPreset, Logger: log}
	if hints != nil { // a nil *hint.Queue in an interface field would not be nil
		pcfg.Hints, hcfg.Hints = hints, hints
	}
	px, err := proxy.New(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	a.closers = append(a.closers, px.Close)
	switch cfg.Hints.Delivery {
	case "proxy":
		hcfg.HintsElsewhere = func(context.Context, string) bool { return true }
	case "auto":
		hcfg.HintsElsewhere = px.Carries
	}
	hcfg.ProxyDeliversHints = cfg.Hints.Delivery != "hooks"
	info["proxy"] = map[string]any{"anthropicUrl": px.Upstream(proxy.Anthropic), "openaiUrl": px.Upstream(proxy.OpenAI),
		"hintsDelivery": cfg.Hints.Delivery}
	petSvc, petClose, err := newPet(ctx, cfg, log, st, rules, pixieModel, helpers, node.Alive, mods.limits, AgentGates(gates))
	if err != nil {
		return fmt.Errorf("pet: %w", err)
	}
	a.closers = append(a.closers, petClose)
	larkCh, err := newLarkChannel(ctx, cfg, log, st, pixieModel, creds, gates, rules, hints)
	if err != nil {
		return fmt.Errorf("lark: %w", err)
	}
	a.closers = append(a.closers, larkCh.Close)
	if err := petSvc.RegisterBuiltin(larkCh.QAAction()); err != nil {
		return fmt.Errorf("lark: %w", err)
	}
	hooksSvc, err := hooks.New(ctx, hcfg)
	if err != nil {
		return fmt.Errorf("hooks: %w", err)
	}
	a.closers = append(a.closers, hooksSvc.Close)
	deps := server.Deps{
		Store: st,
		// model and judge are read at each request: the settings page changes them at run time.
		Info: func(ctx context.Context) map[string]any {
			out := maps.Clone(info)
			out["model"], out["judge"] = pixieModel.Info(), judgeSvc.Info()
			if u, err := gates.RecordsUsage(ctx); err == nil {
				out["records"] = u
			}
			if st.Shared() {
				// The live replicas of the cluster (instance, URL, start, last heartbeat).
				if ms, err := node.Members(ctx); err == nil {
					out["replicas"] = ms
				}
			}
			return out
		},
		Hints:   hints,
		Pet:     petSvc,
		Hooks:   hooksSvc,
		Proxy:   px,
		Gates:   gates,
		Helpers: helpers,
		Judge:   judgeSvc,

		Modules:     mods.reg,
		ModuleInUse: gates.ModuleInUse,
	}
	if st.Shared() {
		deps.Replicas = node
	}
	deps.Channel = larkCh
	a.lark = larkCh
	deps.Settings = settingsSvc
	a.settings = settingsSvc
	// Updating Pixie updates the agent skills `pixie init claude --write` installed (files the
	// user edited are kept).
	if reps, err := agentskill.UpdateRecorded(cfg.Home, version); err != nil {
		log.Warn("agent skill update failed", "err", err)
	} else {
		for _, r := range reps {
			if len(r.Written)+len(r.Updated) > 0 {
				log.Info("agent skill updated", "dir", r.Dir, "written", r.Written, "updated", r.Updated, "kept", r.Kept)
			}
		}
	}
	srv, err := server.New(ctx, server.Config{
		Addr:         cfg.Addr,
		AllowedHosts: cfg.AllowedHosts,
		Token:        token,
		BodyLimit:    cfg.Server.BodyLimit,
		ReadTimeout:  cfg.Server.ReadTimeout,
		WriteTimeout: cfg.Server.WriteTimeout,
		IdleTimeout:  cfg.Server.IdleTimeout,
		CookieTTL:    cfg.Server.CookieTTL,
		Pprof:        cfg.Server.Pprof,
		Version:      version,
		Logger:       log,
		Deps:         deps,
	})
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	a.srv = srv
	a.closers = append(a.closers, srv.Close)
	if err := larkCh.RegisterMetrics(a.srv.Registry()); err != nil {
		log.Warn("lark metrics are not exported", "err", err)
	}
	return nil
}

// modelConfig maps the file's model section to the provider configuration.
func modelConfig(c config.ModelConfig) model.Config {
	return model.Config{Provider: c.Provider, BaseURL: c.BaseURL, Model: c.Model, APIKey: c.APIKey, Timeout: c.Timeout}
}

package app

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"

	"github.com/pixie-dev/pixie/internal/agent"
	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/helper"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/pet"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/sandbox"
	"github.com/pixie-dev/pixie/runtime/wasm"
)

// probedBash lets Pet ask the bash executor whether it can run scripts here: the sandboxed
// policies need Landlock (runtime/sandbox), the full policy only bash.
type probedBash struct{ runtime.Executor }

var _ pet.Prober = probedBash{}

// Probe implements pet.Prober.
func (b probedBash) Probe(_ context.Context, policy runtime.Policy) error {
	if policy == runtime.PolicyFull {
		return nil
	}
	if err := sandbox.Probe(); err != nil {
		return errs.Wrap(errs.Unavailable, err, "scripts cannot be sandboxed here (%s policy): %v", policy, err)
	}
	return nil
}

var _ wasm.Source = (*pet.ModuleFiles)(nil)

// newPet builds the Pet service: scripts run on the rule dispatcher's bash executor (behind a
// Landlock probe), skill.wasm files on a WASM executor of Pet's own that loads modules by path
// (pet.ModuleFiles), instruction Skills on the built-in agent (the Pixie model with tools, its
// tool calls gated by gates) or on an external CLI. A missing executor is not fatal: its
// Skills show as unavailable, with the reason. helpers (the Service gate runs use) gives script
// and WASM Skills the helper gate rules get; nil leaves them without one. limits is the WASM
// admission control the rule executor uses (nil: the executor's own). The returned func
// closes the service and releases its WASM executor.
func newPet(ctx context.Context, cfg config.Config, log *slog.Logger, st *store.Store, rules runtime.Dispatcher, m model.Model, helpers *helper.Service, alive func(context.Context, string) (bool, error), limits *wasm.Limits, gates agent.Gates) (*pet.Service, func(context.Context) error, error) {
	exec := runtime.Dispatcher{}
	if bx, ok := rules[runtime.KindScript]; ok {
		exec[runtime.KindScript] = probedBash{bx}
	}
	closer := func(context.Context) error { return nil }
	wx, err := wasm.New(ctx, wasm.Config{
		CacheDir:      filepath.Join(cfg.Home, homeCache, "pet"),
		MaxModuleSize: pet.DefaultMaxSkillModule,
		MemoryPages:   uint32(cfg.WASM.MemoryPages),
		MaxInput:      cfg.WASM.MaxInput,
		MaxOutput:     cfg.WASM.MaxOutput,
		MaxHostCalls:  cfg.WASM.MaxHostCalls,
		PoolSize:      -1,     // a Skill runs now and then: no idle instances
		Limits:        limits, // the rule executor's run slots and memory budget
		Hidden:        []string{cfg.Home},
		Source:        &pet.ModuleFiles{},
	})
	if err != nil {
		log.Warn("WASM Skills are unavailable", "err", err)
	} else {
		exec[runtime.KindModule] = wx
		closer = wx.Close
	}
	// Instruction Skills may run on Claude Code or Codex instead (the Skill's executor): the CLI
	// runs under the sandbox verb of this binary, its hooks (`<this binary> hook …`) call this
	// server at the URL scripts get as PIXIE_URL, with the preset Pet's tool calls use.
	preset := cfg.Pet.Agent.Preset
	if preset == "" {
		preset = cfg.Hooks.DefaultPreset
	}
	ext := pet.ExternalConfig{
		Claude: pet.CLIConfig{Command: cfg.Pet.Claude.Command, BaseURL: cfg.Pet.Claude.BaseURL, APIKey: cfg.Pet.Claude.APIKey, Model: cfg.Pet.Claude.Model},
		Codex:  pet.CLIConfig{Command: cfg.Pet.Codex.Command, BaseURL: cfg.Pet.Codex.BaseURL, APIKey: cfg.Pet.Codex.APIKey, Model: cfg.Pet.Codex.Model},
		Preset: preset,
		Hidden: []string{cfg.Home},
	}
	if helpers != nil {
		ext.ServerURL = helpers.URL
	}
	svc, err := pet.New(ctx, pet.Config{Store: st, Exec: exec, Model: m,
		Home: cfg.Home, Workspace: cfg.Pet.Workspace, MaxSkillFiles: cfg.Pet.MaxSkillFiles,
		MaxSkillFileSize: cfg.Pet.MaxSkillFileSize, MaxSkillSize: cfg.Pet.MaxSkillSize, Logger: log,
		Helpers: helpers, Alive: alive, RunTimeout: cfg.Pet.RunTimeout, External: ext,
		Agent: pet.AgentConfig{MaxSteps: cfg.Pet.Agent.MaxSteps, MaxTokens: cfg.Pet.Agent.MaxTokens,
			ShellTimeout: cfg.Pet.Agent.ShellTimeout, Preset: preset, Gates: gates,
			Hidden: []string{cfg.Home}},
	})
	if err != nil {
		_ = closer(context.Background())
		return nil, nil, err
	}
	return svc, func(ctx context.Context) error { return errors.Join(svc.Close(ctx), closer(ctx)) }, nil
}

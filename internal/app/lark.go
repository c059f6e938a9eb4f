package app

import (
	"context"
	"log/slog"

	"github.com/pixie-dev/pixie/internal/channel/lark"
	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/hint"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/sandbox"
)

// newLarkChannel builds the Lark channel from the configuration. Its credentials live in the
// home's credentials file; a missing binding is not an error (the channel is then unavailable
// and its status says why). The built-in executor's agent gets the gates of lark.agent.preset
// (hooks.defaultPreset when empty) for its tool calls, as a child agent; the bash executor for
// the shell tier's shell tool when Landlock can sandbox it (the tool always runs read-only);
// and the hint queue to ask the main session.
func newLarkChannel(ctx context.Context, cfg config.Config, log *slog.Logger, st *store.Store, m model.Model, secrets lark.Secrets,
	gates *gate.Service, rules runtime.Dispatcher, hints *hint.Queue) (*lark.Channel, error) {
	ws := cfg.Lark.DefaultWorkspace
	if ws != "" {
		var err error
		if ws, err = config.ExpandPath(ws); err != nil {
			return nil, err
		}
	}
	ac := lark.AgentConfig{
		MaxSteps: cfg.Lark.Agent.MaxSteps, MaxTokens: cfg.Lark.Agent.MaxTokens,
		Timeout: cfg.Lark.Agent.Timeout, AskTimeout: cfg.Lark.Agent.AskTimeout,
	}
	if gates != nil {
		ac.Gates, ac.Preset = agentGates{svc: gates, agent: "child", host: "pixie-lark"}, cfg.Lark.Agent.Preset
		if ac.Preset == "" {
			ac.Preset = cfg.Hooks.DefaultPreset
		}
	}
	if bx := rules[runtime.KindScript]; bx != nil {
		if err := sandbox.Probe(); err != nil {
			log.Warn("lark: shell-tier entries get no shell tool: commands cannot be sandboxed here", "err", err)
		} else {
			ac.Shell = bx
		}
	}
	if hints != nil {
		ac.Hints = func(ctx context.Context, session, text string) (string, error) {
			r, err := hints.Put(ctx, session, text)
			return r.Hint.ID, err
		}
	}
	return lark.New(ctx, lark.Config{
		Store:            st,
		Enabled:          cfg.Lark.Enabled,
		BaseURL:          cfg.Lark.BaseURL,
		DefaultWorkspace: ws,
		ReplayWindow:     cfg.Lark.ReplayWindow,
		Home:             cfg.Home,
		Model:            m,
		Agent:            ac,
		Secrets:          secrets,
		Logger:           log.With("component", "lark"),
	})
}

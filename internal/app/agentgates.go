package app

import (
	"context"

	"github.com/pixie-dev/pixie/internal/agent"
	"github.com/pixie-dev/pixie/internal/gate"
)

// agentGates adapts the gate service to agent.Gates: a built-in agent's tool calls are
// evaluated at tool-before and tool-after like any agent host's, as agent kind "root" or
// "child", with host recorded among the missing presets when the preset does not exist.
type agentGates struct {
	svc   *gate.Service
	agent string // "root" or "child": the gates' target agents
	host  string // how the missing-preset list names the caller
}

var _ agent.Gates = agentGates{}

// Check implements agent.Gates.
func (g agentGates) Check(ctx context.Context, c agent.GateCheck) (agent.GateVerdict, error) {
	res, err := g.svc.Evaluate(ctx, gate.EvalRequest{
		Point:   c.Point,
		Session: gate.Session{ID: c.Session.ID, Preset: c.Session.Preset, Cwd: c.Session.Cwd, Policy: c.Session.Policy},
		Agent:   g.agent, Turn: c.Turn, Host: g.host,
		Tool:   &gate.Tool{Name: c.Tool, Args: c.Args, CallID: c.CallID},
		Target: c.Target,
	})
	if err != nil {
		return agent.GateVerdict{}, err
	}
	v := agent.GateVerdict{Text: res.Text, Addition: res.Addition, Reason: res.Reason, Notes: res.Notes, Gate: res.Gate}
	switch res.Action {
	case gate.ActionBlocked, gate.ActionRejected:
		v.Action = agent.ActionBlocked
	case gate.ActionReplaced:
		v.Action = agent.ActionReplaced
	case gate.ActionAppended:
		v.Action = agent.ActionAppended
	default:
		v.Action = agent.ActionNone
	}
	if res.Skipped != "" {
		v.Gate = ""
	}
	return v, nil
}

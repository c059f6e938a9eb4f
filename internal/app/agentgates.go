package app

import (
	"context"
	"strings"

	"github.com/pixie-dev/pixie/internal/agent"
	"github.com/pixie-dev/pixie/internal/clip"
	"github.com/pixie-dev/pixie/internal/gate"
)

// gateEvaluator is the gate pipeline as the built-in agents use it; *gate.Service implements it.
type gateEvaluator interface {
	Evaluate(ctx context.Context, req gate.EvalRequest) (gate.Result, error)
}

// agentGates adapts the gate pipeline to agent.Gates: each tool call of a built-in agent (Pet's
// executor, the Lark child) is a tool-before and a tool-after evaluation of its session, with its
// preset, like any agent host's: as agent kind "root" (Pet) or "child" (the Lark child: a gate
// applies only when it targets child or all), with host recorded among the missing presets when
// the preset does not exist. An empty preset runs no gate.
type agentGates struct {
	svc   gateEvaluator
	agent string // "root" or "child": the gates' target agents
	host  string // how the missing-preset list names the caller
}

var _ agent.Gates = agentGates{}

// agentHost names Pet's agent among the hosts (EvalRequest.Host).
const agentHost = "pixie-pet"

// AgentGates returns the gates of Pet's agent over g (nil: no gates).
func AgentGates(g gateEvaluator) agent.Gates {
	if g == nil {
		return nil
	}
	return agentGates{svc: g, agent: gate.AgentRoot, host: agentHost}
}

// Check implements agent.Gates.
func (g agentGates) Check(ctx context.Context, c agent.GateCheck) (agent.GateVerdict, error) {
	if c.Session.Preset == "" {
		return agent.GateVerdict{Action: agent.ActionNone}, nil
	}
	res, err := g.svc.Evaluate(ctx, gate.EvalRequest{
		Point:   c.Point,
		Session: gate.Session{ID: c.Session.ID, Preset: c.Session.Preset, Cwd: c.Session.Cwd, Policy: c.Session.Policy},
		Agent:   g.agent, Turn: c.Turn, Host: g.host,
		Tool:   &gate.Tool{Name: c.Tool, Args: c.Args, CallID: clipCallID(c.CallID)},
		Target: clip.Bytes(c.Target, gate.MaxTargetSize),
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
	if res.Error != "" {
		v.Notes = append(v.Notes, "gate error: "+res.Error)
	}
	return v, nil
}

// clipCallID keeps a model's call id within what an evaluation takes (256 bytes, no '/').
func clipCallID(id string) string {
	id = strings.ReplaceAll(id, "/", "_")
	return clip.Bytes(id, 256)
}

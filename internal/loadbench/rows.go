package loadbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"time"

	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/runtime"
)

// Rows is make bench's sustained-load table, in the order the rows run at each connection
// count. Add a row here (see GateRow for a gate on the shared server, or write a Row with its
// own Prepare for another server or route).
func Rows() []Row {
	vsOPA := &Versus{Row: "opa", Metric: ReqPerSec}
	return append([]Row{
		GateRow(GateSpec{Name: "wasm", What: "POST /v1/gates/evaluate, tool-before gate, block-risky-commands (Go guest) stops `rm -rf /` without the model",
			Module: "block-risky-commands", Check: true, Versus: vsOPA,
			// Issue 32: the WASM gate at least twice OPA on the same-rule twin, at 1 and 8 connections.
			Goals: []Goal{{Metric: Ratio, Min: 2}, {Conns: 1, Metric: P50, Max: 0.5}, {Conns: 8, Metric: P99, Max: 10}}}),
		OPARow(),
		GateRow(GateSpec{Name: "wasm-as", What: "the same gate with the AssemblyScript twin (block-risky-commands-as) as its rule",
			Module: "block-risky-commands-as", Check: true, Versus: vsOPA, Duration: 5 * time.Second}),
		GateRow(GateSpec{Name: "bash", What: "the same gate with the bash twin (block-risky-commands.sh) as its rule",
			Script: "guests/block-risky-commands/block-risky-commands.sh", Check: true, Versus: vsOPA,
			Goals: []Goal{{Conns: 1, Metric: P50, Max: 8}, {Conns: 1, Metric: ReqPerSec, Min: 120}, {Conns: 8, Metric: ReqPerSec, Min: 200}}}),
		GateRow(GateSpec{Name: "bash-floor", What: "the same gate with a bash rule that starts no program and concludes at once (the executor's floor)",
			Script: "internal/loadbench/testdata/floor.sh", Duration: 5 * time.Second}),
		GateRow(GateSpec{Name: "bash-jq", What: "the same gate with a legacy bash rule that reads the arguments with one jq",
			Script: "internal/loadbench/testdata/jq-rule.sh", Duration: 5 * time.Second}),
		HealthzRow(),
		GateRow(GateSpec{Name: "wasm-idle", What: "the WASM gate, one request every 30 ms (the idle case: each meets a server whose threads are asleep)",
			Module: "block-risky-commands", Conns: []int{1}, Pause: 30 * time.Millisecond, Duration: 6 * time.Second,
			Goals: []Goal{{Metric: P50, Max: 1}}}),
		StormRow(false),
		StormRow(true),
	}, HookRows()...)
}

// BenchArgs are the tool arguments every block-risky row sends (the guest stops them).
var BenchArgs = json.RawMessage(`{"command":"rm -rf /","description":"clean up"}`)

// MainPixie is the server the gate, healthz and idle rows share: `pixie serve` in a home of its
// own, default settings (no model).
func MainPixie(ctx context.Context, e *Env) (*Pixie, error) {
	return Shared(e, "pixie-main", func() (*Pixie, error) {
		return e.StartPixie(ctx, "main", PixieOptions{})
	})
}

// SessionCwd is the working directory of the bench's sessions (outside every home).
func SessionCwd(e *Env) (string, error) {
	return Shared(e, "cwd", func() (string, error) { return e.Dir("cwd") })
}

// GateSpec describes a gate row: POST /v1/gates/evaluate on the main server for a tool-before
// gate (its own gate and preset, named after the row) whose rule is a module or a script.
type GateSpec struct {
	Name, What string
	// Module is a guest folder under guests/ ("block-risky-commands-as"), uploaded as a module
	// named after the row; or Script, a file of the repository copied into the script folder.
	Module, Script string
	// Args are the tool arguments sent (Bash); nil means BenchArgs, which every answer must
	// stop. With other Args, Want lists what every answer must contain.
	Args json.RawMessage
	Want []string
	// Check runs TwinCases through the gate before measuring (a block-risky-commands twin).
	Check    bool
	Conns    []int
	Pause    time.Duration
	Duration time.Duration
	Versus   *Versus
	Goals    []Goal
}

// GateRow is the Row of a GateSpec.
func GateRow(s GateSpec) Row {
	return Row{Name: s.Name, What: s.What, Conns: s.Conns, Pause: s.Pause, Duration: s.Duration, Versus: s.Versus, Goals: s.Goals,
		Prepare: func(ctx context.Context, e *Env) (*Plan, error) {
			p, err := MainPixie(ctx, e)
			if err != nil {
				return nil, err
			}
			cwd, err := SessionCwd(e)
			if err != nil {
				return nil, err
			}
			rule, err := gateRule(ctx, e, p, s)
			if err != nil {
				return nil, err
			}
			if err := p.AddGates(ctx, onePreset(s.Name, toolGate(s.Name, rule, 60))); err != nil {
				return nil, err
			}
			if s.Check {
				if err := checkGate(ctx, p, s.Name, cwd); err != nil {
					return nil, err
				}
			}
			args, want := s.Args, s.Want
			if args == nil {
				args, want = BenchArgs, []string{`"action":"blocked"`, `"concludedBy":"hook-script"`}
			}
			return &Plan{Addrs: []string{p.Addr}, Alive: p.Alive, Request: func(conn int) Request {
				return EvaluateRequest(p, fmt.Sprintf("load-%s-%d", s.Name, conn), s.Name, cwd, args, want)
			}}, nil
		}}
}

// gateRule uploads the spec's module, or copies its script into the server's script folder,
// and returns the rule that names it.
func gateRule(ctx context.Context, e *Env, p *Pixie, s GateSpec) (gate.Rule, error) {
	switch {
	case s.Module != "":
		wasm, err := e.Guest(ctx, s.Module)
		if err != nil {
			return gate.Rule{}, err
		}
		if err := p.PushModule(ctx, s.Name, wasm); err != nil {
			return gate.Rule{}, err
		}
		return gate.Rule{Kind: runtime.KindModule, Name: s.Name}, nil
	case s.Script != "":
		if err := p.AddScript(e, s.Script); err != nil {
			return gate.Rule{}, err
		}
		return gate.Rule{Kind: runtime.KindScript, Name: path.Base(s.Script)}, nil
	}
	return gate.Rule{}, errors.New("a gate row needs a Module or a Script")
}

// checkGate runs TwinCases through preset's gate: it must decide as the guest is specified to.
func checkGate(ctx context.Context, p *Pixie, preset, cwd string) error {
	var bad []string
	for _, c := range TwinCases {
		got, err := GateDecision(ctx, p, preset, "twin-"+preset, cwd, c.Tool, json.RawMessage(c.Args))
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", c.Name, err))
		} else if got != c.Want {
			bad = append(bad, fmt.Sprintf("%s: decides %+v, want %+v", c.Name, got, c.Want))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("gate %s does not decide the twin table as specified: %v", preset, bad)
	}
	return nil
}

// EvaluateRequest is a POST /v1/gates/evaluate of a Bash tool call with args at tool-before,
// in session (preset, cwd, workspace-write), whose answer must contain want.
func EvaluateRequest(p *Pixie, session, preset, cwd string, args json.RawMessage, want []string) Request {
	body, _ := json.Marshal(gate.EvalRequest{Point: "tool-before", Turn: 1, Tool: &gate.Tool{Name: "Bash", Args: args}, Target: string(args),
		Session: gate.Session{ID: session, Preset: preset, Cwd: cwd, Policy: runtime.PolicyWorkspaceWrite}})
	return Request{Method: http.MethodPost, Path: "/v1/gates/evaluate", Header: p.Auth("application/json"), Body: body, Want: want}
}

// toolGate is a tool-before gate whose rule is rule, with the error policy continue.
func toolGate(name string, rule gate.Rule, timeout int) gate.Gate {
	return gate.Gate{Name: name, Enabled: true, Point: "tool-before", Task: "unused", Rule: &rule,
		Advanced: gate.Options{ShowInChat: true, OnError: gate.OnErrorContinue, Targets: gate.TargetsAll, TimeoutSeconds: timeout, RedoLimit: 1}}
}

// onePreset is a set of gates all attached to one preset called name.
func onePreset(name string, gates ...gate.Gate) gate.Set {
	pr := gate.Preset{Name: name}
	for _, g := range gates {
		pr.Gates = append(pr.Gates, gate.Attachment{Gate: g.Name, Enabled: true})
	}
	return gate.Set{Gates: gates, Presets: []gate.Preset{pr}}
}

// OPARow is OPA's REST API deciding the Rego twin for the bench's tool call, after the Rego
// twin was checked on TwinCases.
func OPARow() Row {
	return Row{Name: "opa", What: fmt.Sprintf("OPA %s REST API (opa run --server), POST %s: the Rego twin of block-risky-commands' clear cases stops the same call", OPAVersion, OPADecisionPath),
		Prepare: func(ctx context.Context, e *Env) (*Plan, error) {
			o, err := Shared(e, "opa", func() (*OPA, error) { return e.StartOPA(ctx) })
			if err != nil {
				return nil, err
			}
			if err := CheckRego(ctx, o); err != nil {
				return nil, err
			}
			req := Request{Method: http.MethodPost, Path: OPADecisionPath, Header: http.Header{"Content-Type": {"application/json"}},
				Body: OPABody("Bash", BenchArgs), Want: []string{`"verdict":"stop"`}}
			return &Plan{Addrs: []string{o.Addr}, Request: func(int) Request { return req },
				Alive: func(ctx context.Context) error { _, err := o.Decide(ctx, "Bash", BenchArgs); return err }}, nil
		}}
}

// CheckRego returns an error unless OPA decides every twin case as specified.
func CheckRego(ctx context.Context, o *OPA) error {
	var bad []string
	for _, c := range TwinCases {
		got, err := o.Decide(ctx, c.Tool, json.RawMessage(c.Args))
		if err != nil {
			return err
		}
		if got != c.Want {
			bad = append(bad, fmt.Sprintf("%s: decides %+v, want %+v", c.Name, got, c.Want))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("the Rego twin does not decide the twin table as the guest: %v", bad)
	}
	return nil
}

// HealthzRow is GET /healthz on the main server: the floor of any request.
func HealthzRow() Row {
	return Row{Name: "healthz", What: "GET /healthz on the same server (HTTP, routing, no auth): the floor of any request",
		Prepare: func(ctx context.Context, e *Env) (*Plan, error) {
			p, err := MainPixie(ctx, e)
			if err != nil {
				return nil, err
			}
			req := Request{Method: http.MethodGet, Path: "/healthz", Want: []string{`"ok"`}}
			return &Plan{Addrs: []string{p.Addr}, Alive: p.Alive, Request: func(int) Request { return req }}, nil
		}}
}

func moduleRule(name string) gate.Rule { return gate.Rule{Kind: runtime.KindModule, Name: name} }

package loadbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/pixie-dev/pixie/internal/hookcmd"
)

// hookPreset is the preset the hook rows name: a tool-before gate whose rule is the
// block-risky-commands guest, which stops `rm -rf /` without the model.
const hookPreset = "hook"

// hookDeny is what every hook answer must hold: Claude Code's deny of the tool call.
const hookDeny = `"permissionDecision":"deny"`

// HookRows are the command hook adapter's rows: the same PreToolUse hook call through the http
// hook (hook-http: POST /v1/hooks/claude-code on a kept-alive connection, as Claude Code's http
// hook sends it), and through the command adapter, a new process per call as a host runs a
// command hook: pixie-hook beside the pixie binary (hook-cmd) and `pixie hook` (hook-pixie, the
// whole binary). The adapter rows print what they add to hook-http's p50 and p99, at one
// connection (one agent's hooks run one at a time).
func HookRows() []Row {
	added := []Goal{{Metric: Diff, Max: 5}}
	return []Row{
		{Name: "hook-http", What: "POST /v1/hooks/claude-code?preset=hook, a PreToolUse that the WASM gate denies (`rm -rf /`), on a kept-alive connection: Claude Code's http hook",
			Conns: []int{1}, Prepare: func(ctx context.Context, e *Env) (*Plan, error) {
				p, input, err := hookServer(ctx, e)
				if err != nil {
					return nil, err
				}
				req := Request{Method: http.MethodPost, Path: "/v1/hooks/claude-code?preset=" + hookPreset, Header: p.Auth("application/json"), Body: input, Want: []string{hookDeny}}
				return &Plan{Addrs: []string{p.Addr}, Alive: p.Alive, Request: func(int) Request { return req }}, nil
			}},
		{Name: "hook-cmd", What: "the same hook through the command adapter pixie-hook (beside the pixie binary), a process per call: its p50 minus hook-http's is what the adapter adds",
			Conns: []int{1}, Versus: &Versus{Row: "hook-http", Metric: P50, Minus: true}, Goals: added,
			Prepare: func(ctx context.Context, e *Env) (*Plan, error) {
				adapter := filepath.Join(filepath.Dir(e.PixieBin), hookcmd.Name)
				if _, err := hookcmd.Find(e.PixieBin); err != nil {
					return nil, fmt.Errorf("%v (make build puts pixie-hook beside bin/pixie)", err)
				}
				return hookCommandPlan(ctx, e, []string{adapter})
			}},
		{Name: "hook-pixie", What: "the same hook through `pixie hook claude`, the whole pixie binary per call (what command hooks ran before pixie-hook)",
			Conns: []int{1}, Duration: 5 * time.Second, Versus: &Versus{Row: "hook-http", Metric: P50, Minus: true},
			Prepare: func(ctx context.Context, e *Env) (*Plan, error) {
				return hookCommandPlan(ctx, e, []string{e.PixieBin, "hook"})
			}},
	}
}

// hookServer is the main server with the hook rows' gate and preset, and the hook input every
// row sends (its session cwd outside every home).
func hookServer(ctx context.Context, e *Env) (*Pixie, []byte, error) {
	p, err := MainPixie(ctx, e)
	if err != nil {
		return nil, nil, err
	}
	cwd, err := SessionCwd(e)
	if err != nil {
		return nil, nil, err
	}
	if _, err := Shared(e, "hook-gate", func() (bool, error) {
		rule, err := gateRule(ctx, e, p, GateSpec{Name: hookPreset, Module: "block-risky-commands"})
		if err != nil {
			return false, err
		}
		return true, p.AddGates(ctx, onePreset(hookPreset, toolGate(hookPreset, rule, 60)))
	}); err != nil {
		return nil, nil, err
	}
	input, err := json.Marshal(map[string]any{"session_id": "load-hook", "cwd": cwd, "hook_event_name": "PreToolUse", "permission_mode": "default",
		"tool_name": "Bash", "tool_input": json.RawMessage(BenchArgs), "tool_use_id": "toolu_load"})
	return p, input, err
}

// hookCommandPlan runs argv claude --preset hook --url … --home … as a host runs the command
// hook pixie init writes: the input on stdin, the answer on stdout. The driver's own start of
// the process is part of each call, as it is for a host.
func hookCommandPlan(ctx context.Context, e *Env, argv []string) (*Plan, error) {
	p, input, err := hookServer(ctx, e)
	if err != nil {
		return nil, err
	}
	args := append(append([]string(nil), argv[1:]...), "claude", "--preset", hookPreset, "--url", p.URL, "--home", p.Home, "--timeout", "30s")
	env := serverEnv()
	call := func(ctx context.Context) error {
		cmd := exec.CommandContext(ctx, argv[0], args...)
		cmd.Env, cmd.Stdin = env, bytes.NewReader(input)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("%s: %v: %.300s", argv[0], err, stderr.String())
		}
		if !bytes.Contains(out, []byte(hookDeny)) {
			return fmt.Errorf("%s answered without %s: %.300s", argv[0], hookDeny, out)
		}
		return nil
	}
	if err := call(ctx); err != nil {
		return nil, err
	}
	if _, err := os.Stat(argv[0]); err != nil {
		return nil, err
	}
	return &Plan{Addrs: []string{p.Addr}, Alive: p.Alive, Do: func(ctx context.Context, _ *Conn, _ int) error { return call(ctx) }}, nil
}

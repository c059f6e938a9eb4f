// Package runtime runs one rule against one target under the run contract (see DESIGN.md and
// docs/abi.md): the target on stdin (WASM: the plug-in input), context as PIXIE_* variables
// (bash: environment; WASM: Extism config), and an answer made of an exit code and stdout.
//
// This package is the small public surface: the contract types, the Executor interface, and a
// Dispatcher that routes a rule to its executor. It imports no engine. The executors live in
// subpackages that the binary wires in: runtime/wasm (extism on wazero: compile cache, instance
// pool, limits) and runtime/bash (legacy scripts under a Landlock sandbox).
package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pixie-dev/pixie/sdk/abi"
)

// Kind is how a rule is implemented.
type Kind string

// Kinds.
const (
	KindScript Kind = "script" // a legacy bash script from the script folder
	KindModule Kind = "module" // a WASM module uploaded to the module registry
)

// Policy is a session's sandbox policy.
type Policy string

// Policies.
const (
	PolicyReadOnly       Policy = "read-only"
	PolicyWorkspaceWrite Policy = "workspace-write"
	PolicyFull           Policy = "full"
)

// Valid reports whether p is a known policy.
func (p Policy) Valid() bool {
	return p == PolicyReadOnly || p == PolicyWorkspaceWrite || p == PolicyFull
}

// Helper serves a run's `pixie ask` / `pixie judge` calls and its log lines. One Helper belongs
// to one run and enforces that run's budget (abi.MaxHelperCalls calls, abi.MaxHelperRequestSize
// bytes per request, the run's deadline); its errors carry errs codes (rate_limited,
// too_large, unauthorized, unavailable, timeout, …). WASM guests reach it through host
// functions; bash scripts reach the same budget over HTTP with the run's token.
type Helper interface {
	Ask(ctx context.Context, req abi.AskRequest) (abi.AskResponse, error)
	Judge(ctx context.Context, req abi.JudgeRequest) (abi.JudgeResponse, error)
	Log(level, message string)
}

// Request is one rule run.
type Request struct {
	Kind Kind
	// Ref names the rule: the script's absolute path (KindScript) or the module's name or
	// sha256 (KindModule).
	Ref string
	// Entry is the WASM entry point; empty means abi.EntryGate.
	Entry string
	// Target is the text on stdin / the plug-in input.
	Target string
	// Vars are the PIXIE_* (or DSH_PET_*) variables.
	Vars map[string]string
	// Cwd is the session's working directory; Policy its sandbox policy. Both are required for
	// scripts; for modules, a read-only mount of Cwd is granted only when MountCwd is set.
	Cwd      string
	Policy   Policy
	MountCwd bool
	// Timeout bounds the run (the gate's time limit, shared with helper and model calls); zero
	// means 60s.
	Timeout time.Duration
	// Helper serves host calls and the HTTP helper; nil makes ask/judge fail as unavailable.
	Helper Helper
	// HelperURL and HelperToken are given to bash scripts as PIXIE_URL / PIXIE_TOKEN.
	HelperURL   string
	HelperToken string
	// Extra host data for Pet skills: the JSON returned by pet_context.
	PetContext []byte
	// After, when set, holds the work the run leaves behind (the WASM executor's reset of an
	// instance and its return to the pool) until the caller's answer is sent; nil starts it at
	// once. It changes nothing the run answers, only when that work starts.
	After Later
}

// Later holds work until an answer is sent (internal/later's Queue is one).
type Later interface {
	// Do runs f once the answer is sent, or at once when nothing is held any more. f must not
	// block for long.
	Do(f func())
}

// Defer runs f through l (Request.After), or at once when l is nil.
func Defer(l Later, f func()) {
	if l == nil {
		f()
		return
	}
	l.Do(f)
}

// Result is a finished run.
type Result struct {
	ExitCode int
	// Stdout is the output, capped at abi.MaxOutputSize, with boundary newlines removed.
	Stdout   string
	Stderr   string
	Duration time.Duration
}

// Executor runs rules of one kind.
type Executor interface {
	Run(ctx context.Context, req Request) (Result, error)
}

// Errors. An executor's error wraps one of these; the gate applies its error policy to any of
// them, and records the message.
var (
	// ErrUnsupported: no executor can run this rule here (for example no Landlock for a
	// read-only session). Its message starts with "hook-script-unsupported".
	ErrUnsupported = errors.New("hook-script-unsupported")
	// ErrPolicyRequired: a script run without a session cwd and sandbox policy.
	//lint:ignore ST1005 the spec's exact message (pixie-gate.md, errors)
	ErrPolicyRequired = errors.New("Session sandbox policy and cwd are required")
	// ErrTimeout: the rule ran past its time limit and was killed/interrupted.
	ErrTimeout = errors.New("rule timed out")
	// ErrTrap: a WASM guest trapped (including running out of memory).
	ErrTrap = errors.New("rule trapped")
	// ErrOutputTooLarge: the rule wrote more than its output cap.
	ErrOutputTooLarge = errors.New("rule output over the cap")
	// ErrNotFound: the script or module does not exist.
	ErrNotFound = errors.New("rule not found")
)

// Dispatcher routes a request to the executor registered for its kind.
type Dispatcher map[Kind]Executor

// Run implements Executor.
func (d Dispatcher) Run(ctx context.Context, req Request) (Result, error) {
	ex, ok := d[req.Kind]
	if !ok || ex == nil {
		return Result{}, fmt.Errorf("%w: no executor for %s rules", ErrUnsupported, req.Kind)
	}
	return ex.Run(ctx, req)
}

var _ Executor = Dispatcher(nil)

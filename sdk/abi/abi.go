// Package abi is the vocabulary shared by every side of a rule run: the host-function namespace
// and names that WASM guests import, the run contract's exit codes and variable names, the wire
// structs that cross the guest boundary and the helper routes (gate output, ask, judge, log,
// errors), and the binary context block of pixie_context (context.go).
//
// It lives in the guest SDK's module (github.com/pixie-dev/pixie/sdk) and imports only the
// standard library, so that the SDK, the host functions (hostfuncs/), the decision engine
// (internal/judge) and the server all use one definition, and a guest author's module depends on
// nothing of the server's. The ABI is documented for guest authors in docs/abi.md.
package abi

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Namespace is the Wasm import module of Pixie's host functions.
const Namespace = "extism:host/user"

// Host function names, as imported by guests from Namespace.
const (
	FnAsk        = "pixie_ask"   // input: AskRequest JSON; output: AskResponse JSON
	FnJudge      = "pixie_judge" // input: JudgeRequest JSON; output: JudgeResponse JSON
	FnLog        = "pixie_log"   // input: LogRequest JSON; output: nothing
	FnPetContext = "pet_context" // input: nothing; output: the invocation's snapshot JSON (Pet skills)
	// FnContext takes nothing and returns the run's context block: the gate target and the
	// run's variables in the binary encoding of EncodeContext (see context.go).
	FnContext = "pixie_context"
)

// Guest entry points.
const (
	EntryGate = "gate" // gate rules: func gate() int32, the return value is the exit code
	EntryRun  = "run"  // Pet skills: func run() int32
	// EntryInit is an optional export (func pixie_init() int32, a no-op) that the host calls once
	// when it pre-initialises a pooled instance, so the guest runtime's initialisation runs
	// before the instance waits in the pool. The Go SDK exports it.
	EntryInit = "pixie_init"
)

// Exit codes of the run contract (bash exit status, or the WASM entry point's return value).
const (
	ExitContinue = 0  // the Pixie task runs; stdout is {{hooks.<name>.text}} (and .data if JSON)
	ExitSkip     = 10 // skip the gate: original flow, no model call
	ExitConclude = 11 // stdout is a GateOutput JSON; no model call
)

// Variable names of the run contract: environment variables for bash, Extism config keys for
// WASM.
const (
	VarPoint     = "PIXIE_POINT"
	VarToolName  = "PIXIE_TOOL_NAME"
	VarToolArgs  = "PIXIE_TOOL_ARGS"
	VarAgent     = "PIXIE_AGENT"
	VarSessionID = "PIXIE_SESSION_ID"
	VarTurn      = "PIXIE_TURN"
	VarGateName  = "PIXIE_GATE_NAME"
	VarURL       = "PIXIE_URL"   // bash only: the helper's server URL
	VarToken     = "PIXIE_TOKEN" // bash only: the run's helper token
)

// Points.
const (
	PointUserMessage  = "user-message"
	PointAgentMessage = "agent-message"
	PointToolBefore   = "tool-before"
	PointToolAfter    = "tool-after"
	PointTurnEnd      = "turn-end"
)

// Points lists every point in pipeline order.
var Points = []string{PointUserMessage, PointAgentMessage, PointToolBefore, PointToolAfter, PointTurnEnd}

// Limits shared by the HTTP helper and the host functions.
const (
	MaxHelperCalls       = 20         // ask + judge calls per run
	MaxHelperRequestSize = 256 * 1024 // bytes per ask/judge request
	MaxOutputSize        = 256 * 1024 // bytes of rule stdout

	// MaxLogLines is how many log lines one run keeps (pixie_log, the helper's log route);
	// one more line says that the rest were dropped.
	MaxLogLines = 100
	// MaxLogLine is the longest log message the host functions take from a guest, in bytes
	// (hostfuncs' default; longer ones are cut at a rune boundary and marked).
	MaxLogLine = 4 * 1024
	// MaxLogRecorded is the longest log message a gate's run record keeps, in bytes.
	MaxLogRecorded = 2048
)

// ErrTrailingData is the error of DecodeStrict when data follows the JSON value.
var ErrTrailingData = errors.New("trailing data after the JSON value")

// DecodeStrict decodes one JSON value of raw into v strictly: a field v does not know is an
// error, and so is anything after the value (ErrTrailingData). Pixie reads every JSON it is
// given this way: the requests that cross the guest boundary (ask, judge, log, over the host
// functions or the helper routes), a gate output, a judge definition and the server's request
// bodies; each caller words the errors for its users.
func DecodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return ErrTrailingData
	}
	return nil
}

// GateOutput is the five-field gate output, answered by the Pixie model or by a rule that exits
// 11. Every field is optional; without a verdict the gate passes.
type GateOutput struct {
	Verdict string `json:"verdict,omitempty"` // "pass" or "stop"
	Reason  string `json:"reason,omitempty"`
	Replace string `json:"replace,omitempty"`
	Append  string `json:"append,omitempty"`
	Note    string `json:"note,omitempty"`
}

// AskRequest is one `pixie ask`.
type AskRequest struct {
	Instruction string `json:"instruction"`
	// Input is the text the instruction applies to; empty means the gate target.
	Input string `json:"input,omitempty"`
	// UseTarget is true when no --input was given (the helper substitutes the gate target).
	UseTarget bool `json:"useTarget,omitempty"`
}

// AskResponse is the model's answer.
type AskResponse struct {
	Text string `json:"text"`
}

// Judge wire types, as in TypeSafe Jev's request shape.
const (
	JudgeBool   = "noul"   // yes/no ("bool" on the command line)
	JudgeSelect = "choice" // one of several options ("select")
	JudgeScore  = "score"  // a level on a 2–10 step scale ("score")
)

// Criteria are the type arguments of a question.
type Criteria struct {
	// Bool: what yes and no mean (optional).
	True  string `json:"true,omitempty"`
	False string `json:"false,omitempty"`
	// Select: two or more named options, in order.
	Options []Option `json:"options,omitempty"`
	// Score: 2–10 level descriptions, lowest first.
	Levels []string `json:"levels,omitempty"`
}

// Option is one select option.
type Option struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// Question is one judgment.
type Question struct {
	Type         string   `json:"type"` // JudgeBool, JudgeSelect or JudgeScore
	Instructions string   `json:"instructions"`
	Criteria     Criteria `json:"criteria"`
}

// JudgeRequest is the Jev request shape: the state (the text being judged) and the questions by
// id. Question ids are never sent to a model.
type JudgeRequest struct {
	State     string              `json:"state"`
	Questions map[string]Question `json:"questions"`
	// UseTarget is true when the helper should substitute the gate target for State.
	UseTarget bool `json:"useTarget,omitempty"`
}

// Answer is the answer to one question.
type Answer struct {
	Type string `json:"type"`
	// Label is "yes"/"no" for bool, the option name for select, the nearest level number (as
	// a decimal string) for score.
	Label string `json:"label"`
	// Probabilities maps each valid answer ("yes"/"no", option names, level numbers "0".."n-1")
	// to its renormalised probability.
	Probabilities map[string]float64 `json:"probabilities"`
	// Yes is the "yes" probability (bool only).
	Yes *float64 `json:"yes,omitempty"`
	// Score is the probability-weighted level, from 0 (score only).
	Score *float64 `json:"score,omitempty"`
	// Confidence is in [0,1]; see docs/judge.md for its definition.
	Confidence float64 `json:"confidence"`
}

// Usage is token usage.
type Usage struct {
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
}

// JudgeResponse is the answers by question id.
type JudgeResponse struct {
	Answers map[string]Answer `json:"answers"`
	Engine  string            `json:"engine"` // "llm" or "jev"
	Usage   Usage             `json:"usage"`
}

// LogRequest is one pixie_log line.
type LogRequest struct {
	Level   string `json:"level"` // debug, info, warn, error
	Message string `json:"message"`
}

// Error is the error shape returned by host functions (as the output of a failed call) and by
// the helper routes ({"error": Error}). Code matches the HTTP status family: "unauthorized",
// "rate_limited", "too_large", "unavailable", "timeout", "upstream", "invalid", "internal".
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// HostResult is what ask and judge host functions return to the guest: exactly one of Ok and
// Error is set. Ok holds AskResponse or JudgeResponse JSON.
type HostResult struct {
	Ok    json.RawMessage `json:"ok,omitempty"`
	Error *Error          `json:"error,omitempty"`
}

package sdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/pixie-dev/pixie/sdk/abi"
)

// Exit codes returned by the finishing functions.
const (
	ExitContinue = abi.ExitContinue // Continue, ContinueData
	ExitSkip     = abi.ExitSkip     // Skip
	ExitConclude = abi.ExitConclude // Conclude
	ExitError    = 1                // Fail: the gate's error policy applies
)

// Verdicts of a gate output.
const (
	Pass = "pass"
	Stop = "stop"
)

// Output is the gate output a rule concludes with (Conclude): every field is optional, and
// without a verdict the gate passes.
type Output = abi.GateOutput

// Option is one option of a select judgment.
type Option = abi.Option

// Answer is the decision engine's answer to one question: its label, the probability of every
// valid answer, and a confidence in [0,1].
type Answer = abi.Answer

// The requests a rule sends and the answers it receives, as a Fake sees them (the wire structs
// of package abi, docs/abi.md).
type (
	AskRequest    = abi.AskRequest
	JudgeRequest  = abi.JudgeRequest
	JudgeResponse = abi.JudgeResponse
	Question      = abi.Question
	Criteria      = abi.Criteria
	Usage         = abi.Usage
)

// host is what the package functions talk to: the WASM host (pdk) or a Fake.
type host interface {
	input() []byte
	config(key string) (string, bool)
	// call invokes the ask or judge host function with a JSON request and returns the
	// abi.HostResult JSON it answered.
	call(fn string, req []byte) []byte
	log(level, message string)
	petContext() []byte
	setOutput(b []byte)
	setError(message string)
}

// current returns the host the package functions use.
func current() host {
	if h := activeHost(); h != nil {
		return h
	}
	panic("sdk: not running inside a Pixie WASM host; run rules on the host through sdk.Fake")
}

// Target returns the gate target: the instruction, message, tool arguments JSON, tool result
// or final answer the gate checks.
func Target() string { return string(current().input()) }

// Config returns the Extism config value of key (the PIXIE_* variables) and whether it is set.
func Config(key string) (string, bool) { return current().config(key) }

func configString(key string) string {
	v, _ := Config(key)
	return v
}

// Point returns the gate point: user-message, agent-message, tool-before, tool-after or
// turn-end.
func Point() string { return configString(abi.VarPoint) }

// ToolName returns the tool name at tool points, and "" elsewhere.
func ToolName() string { return configString(abi.VarToolName) }

// ToolArgs returns the tool arguments JSON at tool points, and "" elsewhere.
func ToolArgs() string { return configString(abi.VarToolArgs) }

// Agent returns "root" or "child".
func Agent() string { return configString(abi.VarAgent) }

// SessionID returns the session id.
func SessionID() string { return configString(abi.VarSessionID) }

// GateName returns the name of the gate running the rule.
func GateName() string { return configString(abi.VarGateName) }

// Turn returns the turn number, or 0 when the host did not set one.
func Turn() int {
	n, err := strconv.Atoi(configString(abi.VarTurn))
	if err != nil {
		return 0
	}
	return n
}

// PetContext returns the invocation snapshot JSON of a Pet skill run, or nil in gate runs.
func PetContext() []byte { return current().petContext() }

// Log writes one line into the run record. Levels are debug, info, warn and error; the host
// caps lines (see docs/abi.md), dropping what is over.
func Log(level, message string) { current().log(level, message) }

// Logf is Log with a format.
func Logf(level, format string, args ...any) { Log(level, fmt.Sprintf(format, args...)) }

// Continue finishes the run with exit code 0: the gate's Pixie task runs, and text is
// {{hooks.<name>.text}}.
func Continue(text string) int32 {
	current().setOutput([]byte(text))
	return ExitContinue
}

// ContinueData is Continue with v rendered as JSON; when v is an object (a struct or a map) it
// is also {{hooks.<name>.data}}. An error encoding v finishes the run with Fail.
func ContinueData(v any) int32 {
	b, err := json.Marshal(v)
	if err != nil {
		return Fail(fmt.Errorf("sdk: encode continue data: %w", err))
	}
	current().setOutput(b)
	return ExitContinue
}

// Skip finishes the run with exit code 10: the gate is skipped and the original flow goes on
// without a model call.
func Skip() int32 {
	current().setOutput(nil)
	return ExitSkip
}

// Conclude finishes the run with exit code 11: out is the gate output and no model is called.
// A verdict other than "", Pass or Stop finishes the run with Fail instead.
func Conclude(out Output) int32 {
	if out.Verdict != "" && out.Verdict != Pass && out.Verdict != Stop {
		return Fail(fmt.Errorf("sdk: verdict %q is neither %q nor %q", out.Verdict, Pass, Stop))
	}
	current().setOutput(out.AppendJSON(nil)) // json.Marshal's bytes, without its reflection
	return ExitConclude
}

// Fail finishes the run as an error (exit code 1): the gate's error policy applies and err's
// message is recorded.
func Fail(err error) int32 {
	if err == nil {
		err = errors.New("rule failed")
	}
	current().setError(err.Error())
	return ExitError
}

// Run calls rule and returns its exit code. A panic inside rule finishes the run with Fail
// carrying the panic value, instead of aborting the guest.
func Run(rule func() int32) (code int32) {
	defer func() {
		if r := recover(); r != nil {
			code = Fail(fmt.Errorf("rule panicked: %v", r))
		}
	}()
	return rule()
}

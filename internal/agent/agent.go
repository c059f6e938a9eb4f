// Package agent owns Pixie's built-in agent: a tool loop on the Pixie model. A Run sends a
// system prompt, earlier turns and a user message to the model with a set of tools, executes
// the tool calls the model makes, feeds their results back, and repeats until the model ends
// its turn or a limit is reached: the step limit (model turns), the token limit (input and
// output summed over the run) or the run's deadline (its context). A limit reached ends the Run
// as a clear failure that keeps the transcript so far.
//
// Every tool call passes through the gates like any agent host's (Gates: a tool-before check
// that may deny the call, a tool-after check that may withhold, replace or add to the result),
// and is kept in the Run's record (order, step, tool, input, output, error flag, what a gate
// did, duration) with inputs and outputs capped.
//
// The tools are values (Tool: name, description, input schema, a Go function), so each caller
// chooses its set: FileTools gives list, read and search over a root directory that no path
// leaves (os.Root; "..", absolute paths outside, symbolic links and hidden directories such as
// the Pixie home refused as tool errors the model sees), and ShellTool a bash command run
// through the bash executor (runtime.KindScript) in the root, under a sandbox policy. Pet's
// instruction Skills run on it (internal/pet), and so does the Lark child.
//
// The package knows neither the gate service nor the store: it takes the gates through the
// small Gates interface, which internal/app adapts to internal/gate.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pixie-dev/pixie/internal/clip"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/model"
)

// Defaults and caps of a Run.
const (
	// DefaultMaxSteps is the step limit (model turns) of a Run whose Config.MaxSteps is zero.
	DefaultMaxSteps = 20
	// DefaultMaxTokens is the token limit (input and output of every model call, summed) of a
	// Run whose Config.MaxTokens is zero.
	DefaultMaxTokens = 200_000
	// DefaultMaxAnswerTokens caps one model answer when Config.MaxAnswerTokens is zero and the
	// provider needs a cap (Anthropic's Messages API requires max_tokens); an OpenAI-compatible
	// server then gets none and uses its own (a small local model's context may hold less).
	DefaultMaxAnswerTokens = 4096
	// MaxResultToModel caps the tool result the model gets; a longer one is cut and the model
	// is told so.
	MaxResultToModel = 64 << 10
	// MaxRecorded caps a tool call's input and output in the record.
	MaxRecorded = 16 << 10
	// MaxCallsPerStep caps the tool calls of one model turn; the rest are answered as refused.
	MaxCallsPerStep = 32
)

// Errors a failed Run wraps (errors.Is), besides the model's own and the context's.
var (
	ErrStepLimit  = errors.New("agent step limit reached")
	ErrTokenLimit = errors.New("agent token limit reached")
	ErrCutAnswer  = errors.New("agent answer cut at its token limit")
)

// Tool is a tool the model may call.
type Tool struct {
	// Name is how the model calls it (model.ValidToolName).
	Name string
	// Description tells the model what it does.
	Description string
	// Schema is the JSON Schema of its input (an object schema).
	Schema json.RawMessage
	// Run executes one call with the model's input (a JSON object). Its text is the result the
	// model gets; an error is a failed call whose message the model gets (it never ends the
	// Run). Run must honour ctx.
	Run func(ctx context.Context, input json.RawMessage) (string, error)
}

// Config is one Run.
type Config struct {
	// Model answers; required.
	Model model.Model
	// System is the system prompt.
	System string
	// History are earlier turns (user and assistant messages), oldest first.
	History []model.Message
	// User is the user message: its text, and parts (images) after it.
	User      string
	UserParts []model.Part
	// Tools are offered to the model; names must be unique.
	Tools []Tool
	// MaxSteps caps the model turns; zero means DefaultMaxSteps.
	MaxSteps int
	// MaxTokens caps the tokens of the whole Run (input + output of every model call); zero
	// means DefaultMaxTokens.
	MaxTokens int
	// MaxAnswerTokens caps one model answer; zero means DefaultMaxAnswerTokens for Anthropic and
	// the server's own limit for OpenAI-compatible providers.
	MaxAnswerTokens int
	// Gates checks every tool call and its result; nil means no gates.
	Gates Gates
	// Session is who the gates see: the executor session, its preset, cwd and policy. Turn is
	// the session's turn.
	Session GateSession
	Turn    int
	// Redact removes secrets (environment values) from every tool output before the model, a
	// gate or the record sees it, and from the inputs recorded; nil leaves text as is.
	Redact func(string) string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// OnCall, when set, gets each tool call's record as soon as it is made (from the Run's own
	// goroutine, before the next call runs), so a caller can keep the record of a Run that is
	// stopped before it returns.
	OnCall func(Record)
	// KeyPrefix names the configuration keys of the limits in a limit's error message
	// ("<prefix>.maxSteps"); empty means "pet.agent".
	KeyPrefix string
}

// Record is one tool call and its result, as kept in a Run's record.
type Record struct {
	// N counts the Run's tool calls from 1; Step is the model turn that made it, from 1.
	N    int `json:"n"`
	Step int `json:"step"`
	// CallID is the model's id of the call.
	CallID string `json:"callId"`
	Name   string `json:"name"`
	// Input is the call's arguments (a JSON object; a JSON string holding the cut text when
	// they were over MaxRecorded).
	Input json.RawMessage `json:"input"`
	// Output is what the tool produced (or why it did not run), at most MaxRecorded bytes.
	Output string `json:"output"`
	// IsError marks a failed or refused call.
	IsError bool `json:"isError,omitempty"`
	// Gate says what a gate did (denied the call, withheld, replaced or added to the result),
	// empty when no gate acted.
	Gate string `json:"gate,omitempty"`
	// Notes are the gates' notes (shown only to the person).
	Notes []string `json:"notes,omitempty"`
	// DurationMS is how long the call took, gates included.
	DurationMS int64 `json:"durationMs"`
}

// Result is what a Run did. A failed Run returns it too, with everything up to the failure.
type Result struct {
	// Text is the model's final answer (its last text, for a failed Run).
	Text string `json:"text"`
	// Steps is the number of model turns.
	Steps int `json:"steps"`
	// Usage sums the model calls' token usage.
	Usage model.Usage `json:"usage"`
	// Calls are the tool calls, in order.
	Calls []Record `json:"calls"`
	// Messages is the conversation after History: the user message, then each assistant turn
	// and the tool results it got.
	Messages []model.Message `json:"-"`
}

func (c Config) withDefaults() (Config, error) {
	if c.Model == nil {
		return c, errs.New(errs.Invalid, "agent: a model is required")
	}
	if c.MaxSteps < 0 || c.MaxTokens < 0 || c.MaxAnswerTokens < 0 {
		return c, errs.New(errs.Invalid, "agent: limits must not be negative")
	}
	if c.MaxSteps == 0 {
		c.MaxSteps = DefaultMaxSteps
	}
	if c.MaxTokens == 0 {
		c.MaxTokens = DefaultMaxTokens
	}
	if c.MaxAnswerTokens == 0 && c.Model.Info().Provider == model.ProviderAnthropic {
		c.MaxAnswerTokens = DefaultMaxAnswerTokens
	}
	if c.Redact == nil {
		c.Redact = func(s string) string { return s }
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = "pet.agent"
	}
	seen := map[string]bool{}
	for _, t := range c.Tools {
		if !model.ValidToolName(t.Name) || t.Run == nil {
			return c, errs.New(errs.Invalid, "agent: tool %q needs a valid name and a function", t.Name)
		}
		if seen[t.Name] {
			return c, errs.New(errs.Invalid, "agent: tool %q is given twice", t.Name)
		}
		seen[t.Name] = true
	}
	return c, nil
}

// Run runs the loop. It returns the Result and nil when the model ended its turn; on a failure
// (a limit, the model's error, the deadline) it returns the Result so far and the error.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Result{}, err
	}
	var res Result
	byName := map[string]Tool{}
	var offered []model.Tool
	for _, t := range cfg.Tools {
		byName[t.Name] = t
		offered = append(offered, model.Tool{Name: t.Name, Description: t.Description, Schema: t.Schema})
	}
	res.Messages = append(res.Messages, model.Message{Role: model.RoleUser, Content: cfg.User, Parts: cfg.UserParts})
	for step := 1; ; step++ {
		if step > cfg.MaxSteps {
			return res, errs.Wrap(errs.Unprocessable, ErrStepLimit,
				"the agent reached its step limit (%d model turns) before it finished; raise %s.maxSteps or simplify the task", cfg.MaxSteps, cfg.KeyPrefix)
		}
		if err := ctx.Err(); err != nil {
			return res, deadline(err)
		}
		msgs := append(append([]model.Message(nil), cfg.History...), res.Messages...)
		resp, err := cfg.Model.Complete(ctx, model.Request{System: cfg.System, Messages: msgs, Tools: offered, MaxTokens: cfg.MaxAnswerTokens})
		if err != nil {
			if ctx.Err() != nil && !errors.Is(err, context.Canceled) {
				return res, errors.Join(deadline(ctx.Err()), err)
			}
			return res, err
		}
		res.Steps = step
		res.Usage = res.Usage.Add(resp.Usage)
		if resp.Text != "" {
			res.Text = resp.Text
		}
		parts := []model.Part{}
		for _, c := range resp.ToolCalls {
			parts = append(parts, model.ToolCallPart(c))
		}
		res.Messages = append(res.Messages, model.Message{Role: model.RoleAssistant, Content: resp.Text, Parts: parts})
		if used := res.Usage.InputTokens + res.Usage.OutputTokens; used > cfg.MaxTokens {
			return res, errs.Wrap(errs.Unprocessable, ErrTokenLimit,
				"the agent used %d tokens in %d model turns; the limit is %d (%s.maxTokens)", used, step, cfg.MaxTokens, cfg.KeyPrefix)
		}
		if len(resp.ToolCalls) == 0 {
			if resp.Stop == model.StopMaxTokens {
				return res, errs.Wrap(errs.Unprocessable, ErrCutAnswer,
					"the model's answer was cut at its token limit (max_tokens %d; 0 = the server's own)", cfg.MaxAnswerTokens)
			}
			return res, nil
		}
		results := make([]model.Part, 0, len(resp.ToolCalls))
		for i, c := range resp.ToolCalls {
			rec, toModel := cfg.call(ctx, byName, c, step, len(res.Calls)+1, i)
			res.Calls = append(res.Calls, rec)
			if cfg.OnCall != nil {
				cfg.OnCall(rec)
			}
			results = append(results, model.ToolResultPart(toModel))
		}
		res.Messages = append(res.Messages, model.Message{Role: model.RoleUser, Parts: results})
	}
}

// deadline turns the run context's error into a coded one.
func deadline(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return errs.Wrap(errs.Timeout, err, "the agent ran out of time (the run's time limit)")
	}
	return errs.Wrap(errs.Timeout, err, "the agent run was cancelled")
}

// call runs one tool call through the gates and returns its record and the result the model
// gets.
func (cfg Config) call(ctx context.Context, tools map[string]Tool, c model.ToolCall, step, n, index int) (Record, model.ToolResult) {
	start := cfg.Now()
	rec := Record{N: n, Step: step, CallID: c.ID, Name: c.Name, Input: recordInput(cfg.Redact(string(c.Input)))}
	out := model.ToolResult{CallID: c.ID}
	gated := false // a tool-after gate set what the model gets
	done := func(text string, isErr bool) (Record, model.ToolResult) {
		text = cfg.Redact(text)
		rec.Output = clip.BytesMark(text, MaxRecorded, "\n[cut in the record]")
		rec.IsError = isErr
		rec.DurationMS = cfg.Now().Sub(start).Milliseconds()
		if !gated {
			out.Text, out.IsError = toModel(text), isErr
		}
		if out.Text == "" {
			out.Text = "(no output)"
		}
		return rec, out
	}
	if index >= MaxCallsPerStep {
		return done(fmt.Sprintf("refused: at most %d tool calls are run per turn; call it again in the next turn", MaxCallsPerStep), true)
	}
	tool, ok := tools[c.Name]
	if !ok {
		return done(fmt.Sprintf("no tool named %q", c.Name), true)
	}
	args := json.RawMessage(cfg.Redact(string(c.Input)))
	if !json.Valid(args) {
		args = c.Input
	}
	if cfg.Gates != nil {
		v, err := cfg.Gates.Check(ctx, cfg.check(PointToolBefore, c, args, string(args)))
		rec.Notes = append(rec.Notes, v.Notes...)
		switch {
		case err != nil:
			rec.Gate = "gate check failed: " + msgOf(err)
			return done("denied: the gate check failed, so the call was not run: "+msgOf(err), true)
		case v.Action == ActionBlocked:
			rec.Gate = gateLabel(v) + " denied the call: " + v.Reason
			return done("denied by a gate: "+v.Reason, true)
		}
	}
	text, runErr := tool.Run(ctx, c.Input)
	isErr := runErr != nil
	if isErr {
		// The flag says it failed (the chat completions provider also puts "error: " first).
		text = msgOf(runErr)
		if strings.TrimSpace(text) == "" {
			text = "the tool failed"
		}
	}
	text = cfg.Redact(text)
	sent := toModel(text)
	if cfg.Gates != nil {
		v, err := cfg.Gates.Check(ctx, cfg.check(PointToolAfter, c, args, sent))
		rec.Notes = append(rec.Notes, v.Notes...)
		gated = err != nil || v.Action == ActionBlocked || v.Action == ActionReplaced || v.Action == ActionAppended
		switch {
		case err != nil:
			rec.Gate = "gate check failed: " + msgOf(err)
			out.Text, out.IsError = "the result is withheld: the gate check failed: "+msgOf(err), true
		case v.Action == ActionBlocked:
			rec.Gate = gateLabel(v) + " withheld the result: " + v.Reason
			out.Text, out.IsError = "the result is withheld by a gate: "+v.Reason, true
		case v.Action == ActionReplaced:
			rec.Gate = gateLabel(v) + " replaced the result: " + clip.BytesMark(v.Text, 300, "…")
			out.Text, out.IsError = v.Text, isErr
		case v.Action == ActionAppended:
			rec.Gate = gateLabel(v) + " added to the result: " + clip.BytesMark(v.Addition, 300, "…")
			out.Text, out.IsError = v.Text, isErr
			if out.Text == "" {
				out.Text = sent + "\n\n" + v.Addition
			}
		}
	}
	return done(text, isErr)
}

// toModel cuts a result to what the model gets, telling it so.
func toModel(text string) string {
	if len(text) <= MaxResultToModel {
		return text
	}
	return clip.Bytes(text, MaxResultToModel) + fmt.Sprintf("\n[output cut: the first %d of %d bytes are shown; narrow the call (a path, offset/limit, a pattern) to see the rest]", MaxResultToModel, len(text))
}

// recordInput is the input as recorded: the JSON itself within MaxRecorded, else a JSON string
// of its cut text.
func recordInput(s string) json.RawMessage {
	if len(s) <= MaxRecorded && json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	raw, _ := json.Marshal(clip.BytesMark(s, MaxRecorded, "…[cut]"))
	return raw
}

func gateLabel(v GateVerdict) string {
	if v.Gate != "" {
		return "the gate " + v.Gate
	}
	return "a gate"
}

// msgOf is an error's client-safe message.
func msgOf(err error) string {
	var e *errs.Error
	if errors.As(err, &e) && e.Message != "" {
		return e.Message
	}
	return err.Error()
}

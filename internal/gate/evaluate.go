package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pixie-dev/pixie/internal/clip"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/helper"
	"github.com/pixie-dev/pixie/internal/later"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// MaxTargetSize caps the target of an evaluation.
const MaxTargetSize = 1 << 20

// Session is the session an evaluation belongs to.
type Session struct {
	// ID identifies the session (no "/", at most 128 bytes).
	ID string `json:"id"`
	// Preset is the preset the session's agents run with.
	Preset string `json:"preset"`
	// Cwd is the session's working directory (absolute); Policy its sandbox policy
	// (read-only, workspace-write or full). Scripts need both.
	Cwd    string         `json:"cwd,omitempty"`
	Policy runtime.Policy `json:"policy,omitempty"`
}

// Tool is the tool call at tool points.
type Tool struct {
	Name string `json:"name"`
	// Args is the tool arguments JSON.
	Args json.RawMessage `json:"args,omitempty"`
	// CallID identifies the call; the chat notes of one call are shown together.
	CallID string `json:"callId,omitempty"`
}

// EvalRequest is one evaluation: a point reached in a session.
type EvalRequest struct {
	Point   string  `json:"point"`
	Session Session `json:"session"`
	// Agent is "root" (the default) or "child".
	Agent string `json:"agent"`
	// Turn is the turn number.
	Turn int `json:"turn"`
	// Tool is the tool call at tool points.
	Tool *Tool `json:"tool,omitempty"`
	// MessageID optionally identifies the message at message points (chat-note places).
	MessageID string `json:"messageId,omitempty"`
	// Target is the text the gate checks: the instruction, the message, the tool arguments
	// JSON, the tool result or the final answer.
	Target string `json:"target"`
	// Structured is true when a tool result carries a structured value (it is not replaced,
	// unless ReplaceStructured).
	Structured bool `json:"structured,omitempty"`
	// ReplaceStructured is set when the caller's path can replace a structured tool result as a
	// whole (the model-API proxy makes the replacement in the request the model gets): a
	// replacement then applies to it as to a text result, where otherwise it is a note.
	ReplaceStructured bool `json:"replaceStructured,omitempty"`
	// Rejected is true when another hook already rejected the target (the gate does not run).
	Rejected bool `json:"rejected,omitempty"`
	// Host is the agent host the point was reached in (claude-code, codex), when known: at most
	// 32 letters, digits or '-'. It is kept only in the list of missing presets.
	Host string `json:"host,omitempty"`
	// After, when set, holds the work the evaluation sets off (starting the run-record writer;
	// through runtime.Request.After, a WASM instance's return to its pool) until the caller's
	// answer is sent (internal/later); nil starts it at once. It is not part of the wire
	// request.
	After *later.Queue `json:"-"`
}

// Why no gate ran.
const (
	SkipRejected    = "rejected"     // another hook already rejected the target
	SkipNoGate      = "no-gate"      // no enabled gate for this preset and point
	SkipNoPreset    = "no-preset"    // the session's preset does not exist
	SkipAgent       = "agent"        // the gate's target agents do not include this agent
	SkipSwitchedOff = "switched-off" // the gate is switched off for this session
)

// Result is the answer of an evaluation.
type Result struct {
	// Action is what was applied: replaced, appended, rejected, blocked, steered or none.
	Action string `json:"action"`
	// Text is the final text (the target when nothing replaced it).
	Text string `json:"text"`
	// Addition is the text sent along with the target (appended). For a structured tool
	// result it is only here: Text stays the original.
	Addition string `json:"addition,omitempty"`
	// Reason is why the target was rejected, blocked or sent back (steered).
	Reason string `json:"reason,omitempty"`
	// Suggestion is the replacement offered with a rejection.
	Suggestion string `json:"suggestion,omitempty"`
	// Notes are shown only to the person.
	Notes []string `json:"notes"`
	// ConcludedBy is pixie, hook-script or skipped-by-hook; empty when no gate ran.
	ConcludedBy string `json:"concludedBy,omitempty"`
	// RunID identifies the run record (empty when no gate ran, and for trials).
	RunID string `json:"runId,omitempty"`
	// Gate is the gate that ran (or was skipped).
	Gate string `json:"gate,omitempty"`
	// Skipped says why no gate ran: rejected, no-preset, no-gate, agent or switched-off.
	Skipped string `json:"skipped,omitempty"`
	// Error is the failure the error policy was applied to.
	Error string `json:"error,omitempty"`
	// ShowInChat is the "Show the result in the chat" setting of the gate that ran (false when
	// none ran). Off, no note of the run reaches the host (an adapter shows the user nothing of
	// its notes, error or suggestion); the run's record keeps them, and Studio shows them.
	ShowInChat bool `json:"showInChat,omitempty"`
	// Usage is the token usage of the model and helper calls.
	Usage abi.Usage `json:"usage"`
}

// validate checks an evaluation request.
func (r *EvalRequest) validate() error {
	var ps []Problem
	add := func(f, format string, args ...any) {
		ps = append(ps, Problem{Field: f, Message: fmt.Sprintf(format, args...)})
	}
	if !validPoint(r.Point) {
		add("point", "the point must be one of %s", strings.Join(abi.Points, ", "))
	}
	if err := checkSessionID(r.Session.ID); err != nil {
		add("session.id", "%s", err.Error())
	}
	if r.Session.Preset == "" {
		add("session.preset", "the session's preset is required")
	}
	if r.Session.Cwd != "" && !filepath.IsAbs(r.Session.Cwd) {
		add("session.cwd", "the working directory must be an absolute path")
	}
	if r.Session.Policy != "" && !r.Session.Policy.Valid() {
		add("session.policy", "the sandbox policy must be read-only, workspace-write or full")
	}
	if r.Agent == "" {
		r.Agent = AgentRoot
	}
	if r.Agent != AgentRoot && r.Agent != AgentChild {
		add("agent", "the agent must be %q or %q", AgentRoot, AgentChild)
	}
	if r.Turn < 0 {
		add("turn", "the turn must not be negative")
	}
	if r.Tool != nil {
		if len(r.Tool.Args) > 0 && !json.Valid(r.Tool.Args) {
			add("tool.args", "the tool arguments must be JSON")
		}
		if len(r.Tool.CallID) > 256 || strings.Contains(r.Tool.CallID, "/") {
			add("tool.callId", "a call id has at most 256 bytes and no '/'")
		}
	}
	if (r.Point == abi.PointToolBefore || r.Point == abi.PointToolAfter) && (r.Tool == nil || r.Tool.Name == "") {
		add("tool.name", "tool points need the tool name")
	}
	if len(r.MessageID) > 256 || strings.Contains(r.MessageID, "/") {
		add("messageId", "a message id has at most 256 bytes and no '/'")
	}
	if !validHost(r.Host) {
		add("host", "the host has at most 32 letters, digits or '-'")
	}
	if !utf8.ValidString(r.Target) {
		add("target", "the target must be UTF-8 text")
	}
	if len(ps) > 0 {
		return errs.New(errs.Invalid, "bad evaluation: %s: %s", ps[0].Field, ps[0].Message).WithDetails(ps)
	}
	if len(r.Target) > MaxTargetSize {
		return errs.New(errs.TooLarge, "the target is %d bytes; at most %d are evaluated", len(r.Target), MaxTargetSize)
	}
	return nil
}

// validHost reports whether h is empty or at most 32 letters, digits or '-' (EvalRequest.Host).
func validHost(h string) bool {
	if len(h) > 32 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// checkSessionID checks a session id.
func checkSessionID(id string) error {
	switch {
	case id == "":
		return errors.New("the session id is required")
	case len(id) > 128:
		return errors.New("a session id has at most 128 bytes")
	case strings.ContainsAny(id, "/\x00"):
		return errors.New("a session id has no '/'")
	}
	return nil
}

func agentMatches(targets, agent string) bool {
	return targets == TargetsAll || targets == agent
}

// Evaluate runs the one enabled gate of the session's preset at the point, and answers what
// to apply. A gate that is switched off for the session, whose target agents do not match, or
// whose target another hook rejected does not run and leaves no record.
func (s *Service) Evaluate(ctx context.Context, req EvalRequest) (Result, error) {
	if err := req.validate(); err != nil {
		return Result{}, err
	}
	res := Result{Action: ActionNone, Text: req.Target, Notes: []string{}}
	if req.Rejected {
		res.Skipped = SkipRejected
		return res, nil
	}
	sn, err := s.loadSnapshot(ctx)
	if err != nil {
		return Result{}, err
	}
	active, known := sn.active[req.Session.Preset]
	if !known {
		res.Skipped = SkipNoPreset
		s.missing.note(req.After, &req) // listed by MissingPresets, written after the answer
		return res, nil
	}
	name, ok := active[req.Point]
	if !ok {
		res.Skipped = SkipNoGate
		return res, nil
	}
	g := sn.gates[name]
	res.Gate = name
	if !agentMatches(g.targets(), req.Agent) {
		res.Skipped = SkipAgent
		return res, nil
	}
	off, err := s.switchedOff(ctx, req.Session.ID, name)
	if err != nil {
		return Result{}, err
	}
	if off {
		res.Skipped = SkipSwitchedOff
		return res, nil
	}
	st := s.execute(ctx, g, req, false)
	return s.finish(ctx, st)
}

// runState is one run in progress.
type runState struct {
	g       Gate
	req     EvalRequest
	trial   bool
	id      string
	start   time.Time
	timeout time.Duration

	out       abi.GateOutput
	by        string
	err       error
	errDetail string
	cancelled bool
	modelText string
	usage     abi.Usage
	rule      *RuleRun
	helper    *helper.Run
}

// fail records a pipeline failure; the error policy applies in finish.
func (st *runState) fail(ctx, parent context.Context, by string, err error) {
	st.by = by
	switch {
	case parent.Err() != nil:
		st.cancelled = true
		st.err = errors.New("the run was cancelled")
	case errors.Is(err, runtime.ErrTimeout) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		st.err = failf(nil, "The gate timed out after %s", st.timeout)
		st.errDetail = err.Error()
	default:
		st.err = err
	}
}

// execute runs the rule and the task, up to the gate output.
func (s *Service) execute(parent context.Context, g Gate, req EvalRequest, trial bool) *runState {
	start := s.cfg.Now()
	st := &runState{g: g, req: req, trial: trial, id: newRunID(start), start: start, timeout: g.timeout(s.cfg.DefaultTimeout)}
	ctx, cancel := context.WithTimeout(parent, st.timeout)
	defer cancel()

	// The task's template variables, made only when a task is rendered (a rule that concludes
	// needs none).
	var vars map[string]string
	taskVars := func() map[string]string {
		if vars == nil {
			vars = map[string]string{
				"target":     req.Target,
				"point":      req.Point,
				"agent":      req.Agent,
				"turn":       strconv.Itoa(req.Turn),
				"session.id": req.Session.ID,
				"gate.name":  g.Name,
			}
			if req.Tool != nil {
				vars["tool.name"] = req.Tool.Name
				vars["tool.args"] = string(req.Tool.Args)
			}
		}
		return vars
	}
	// A trial runs a module rule (a WASM guest needs no session policy: it gets no mount, as the
	// trial has no working directory) but not a script, which needs the session's sandbox policy.
	if g.Rule != nil && (!trial || g.Rule.Kind == runtime.KindModule) {
		res, err := s.runRule(ctx, st)
		st.rule = &RuleRun{Kind: g.Rule.Kind, Name: g.Rule.Name, ExitCode: -1}
		if err != nil {
			st.fail(ctx, parent, ByHookScript, err)
			return st
		}
		st.rule.ExitCode = res.ExitCode
		st.rule.Stdout = capText(res.Stdout, maxRecordedStdout)
		st.rule.DurationMs = res.Duration.Milliseconds()
		switch res.ExitCode {
		case abi.ExitContinue:
			h := "hooks." + g.Rule.HookName() + "."
			v := taskVars()
			v[h+"text"] = res.Stdout
			if t := strings.TrimSpace(res.Stdout); strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
				v[h+"data"] = t
			}
		case abi.ExitSkip:
			st.by = BySkippedByHook
			return st
		case abi.ExitConclude:
			o, err := ParseScriptOutput(res.Stdout)
			if err != nil {
				st.fail(ctx, parent, ByHookScript, ErrBadScriptOutput)
				st.errDetail = err.Error()
				return st
			}
			st.out, st.by = o, ByHookScript
			return st
		default:
			st.fail(ctx, parent, ByHookScript, failf(nil, "Hook script %s exited with status %d", g.Rule.Name, res.ExitCode))
			if tail := stderrTail(res.Stderr); tail != "" {
				st.errDetail = "stderr: " + tail
			}
			return st
		}
	}
	if strings.TrimSpace(g.Task) == "" {
		st.fail(ctx, parent, ByHookScript, failf(nil, "The gate has an empty task and its rule exited 0"))
		return st
	}
	st.by = ByPixie
	if s.model == nil {
		st.fail(ctx, parent, ByPixie, fmt.Errorf("%w", model.ErrNoModel))
		return st
	}
	resp, err := s.model.Complete(ctx, gateModelRequest(g, req, render(g.Task, taskVars())))
	st.usage = addUsage(st.usage, resp.Usage)
	if err != nil {
		st.fail(ctx, parent, ByPixie, failf(err, "Pixie model error: %v", err))
		return st
	}
	st.modelText = resp.Text
	o, err := ParseModelOutput(resp.Text)
	if err != nil {
		st.fail(ctx, parent, ByPixie, err)
		return st
	}
	st.out = o
	return st
}

// runRule runs the gate's script or module with a helper for its run.
func (s *Service) runRule(ctx context.Context, st *runState) (runtime.Result, error) {
	g, req := st.g, st.req
	if s.exec == nil {
		return runtime.Result{}, fmt.Errorf("%w: no rule executor is available", runtime.ErrUnsupported)
	}
	toolName, toolArgs := "", ""
	if req.Tool != nil {
		toolName, toolArgs = req.Tool.Name, string(req.Tool.Args)
	}
	rr := runtime.Request{
		Kind:   g.Rule.Kind,
		Target: req.Target,
		Vars: map[string]string{
			abi.VarPoint:     req.Point,
			abi.VarToolName:  toolName,
			abi.VarToolArgs:  toolArgs,
			abi.VarAgent:     req.Agent,
			abi.VarSessionID: req.Session.ID,
			abi.VarTurn:      strconv.Itoa(req.Turn),
			abi.VarGateName:  g.Name,
		},
		Cwd:    req.Session.Cwd,
		Policy: req.Session.Policy,
	}
	if req.After != nil {
		// The executor's own leftover work (a WASM instance's return to its pool) waits for
		// the answer too.
		rr.After = req.After
	}
	if dl, ok := ctx.Deadline(); ok {
		rr.Timeout = time.Until(dl)
		if rr.Timeout <= 0 {
			return runtime.Result{}, fmt.Errorf("%w: no time left", runtime.ErrTimeout)
		}
	}
	switch g.Rule.Kind {
	case runtime.KindScript:
		p, err := s.resolveScript(ctx, g.Rule.Name)
		if err != nil {
			return runtime.Result{}, fmt.Errorf("%w: %v", runtime.ErrNotFound, err)
		}
		rr.Ref = p
	default:
		rr.Ref = g.Rule.Name
		rr.MountCwd = req.Session.Cwd != "" && req.Session.Policy.Valid()
	}
	// A module calls its helper in-process; only a script needs a token to call back with.
	h := s.helpers.Open(ctx, helper.Options{Name: g.Name, Target: req.Target, InProcess: g.Rule.Kind != runtime.KindScript})
	st.helper = h
	defer h.Close()
	rr.Helper = h
	if g.Rule.Kind == runtime.KindScript {
		if u := h.URL(); u != "" {
			rr.HelperURL, rr.HelperToken = u, h.Token()
		}
	}
	return s.exec.Run(ctx, rr)
}

// gateModelRequest builds the model request of a gate task.
func gateModelRequest(g Gate, req EvalRequest, task string) model.Request {
	var b strings.Builder
	b.WriteString("Task:\n")
	b.WriteString(task)
	b.WriteString("\n\nPoint: ")
	b.WriteString(req.Point)
	b.WriteString(" (")
	b.WriteString(pointMeaning[req.Point])
	b.WriteString(")\n")
	if req.Tool != nil && req.Tool.Name != "" {
		b.WriteString("Tool: " + req.Tool.Name + "\n")
	}
	if !usesTarget(g.Task) {
		b.WriteString("\nTarget:\n<target>\n")
		b.WriteString(req.Target)
		b.WriteString("\n</target>\n")
	}
	zero := 0.0
	return model.Request{
		System:      gateSystemPrompt,
		Messages:    []model.Message{{Role: model.RoleUser, Content: b.String()}},
		Temperature: &zero,
	}
}

var pointMeaning = map[string]string{
	abi.PointUserMessage:  "the target is an instruction a person is sending to the agent",
	abi.PointAgentMessage: "the target is a message one agent is sending another",
	abi.PointToolBefore:   "the target is the arguments JSON of a tool call about to run",
	abi.PointToolAfter:    "the target is the result of a tool call, about to reach the agent",
	abi.PointTurnEnd:      "the target is the agent's final answer for this turn",
}

const gateSystemPrompt = `You are Pixie, a gate in a coding agent's workflow. You read the target text, follow the task, and decide what happens to the target.

Answer with exactly one JSON object and nothing else. Every field is optional and is a string:
- "verdict": "pass" or "stop". Without a verdict the target passes.
- "reason": with "stop", why it stopped and the correction to make; it is shown to whoever sent the target.
- "replace": text that replaces the target.
- "append": text sent along with the target.
- "note": a note shown only to the person, never to the agent.
Leave out the fields you do not need, and use no other fields.`

// finish applies the output (or the error policy) by the point table, records the run, and
// builds the result.
func (s *Service) finish(ctx context.Context, st *runState) (Result, error) {
	d, out := s.decide(st)
	res := Result{
		Action: d.Action, Text: d.Text, Addition: d.Addition, Reason: d.Reason, Suggestion: d.Suggestion,
		Notes: d.Notes, ConcludedBy: st.by, Gate: st.g.Name, Usage: st.usage, ShowInChat: st.g.Advanced.ShowInChat,
	}
	if st.err != nil {
		res.Error = st.err.Error()
	}
	if st.trial {
		if d.redo {
			res.Action = ActionSteered
		}
		return res, nil
	}
	rec, d, err := s.record(ctx, st, d, out)
	if err != nil {
		return Result{}, err
	}
	res.Action, res.Notes, res.Reason = d.Action, d.Notes, d.Reason
	res.RunID = rec.ID
	res.Usage = rec.Usage
	return res, nil
}

// decide turns a run's outcome into a decision, before the redo limit.
func (s *Service) decide(st *runState) (decision, abi.GateOutput) {
	in := applyInput{Point: st.req.Point, Target: st.req.Target, Structured: st.req.Structured,
		ReplaceStructured: st.req.ReplaceStructured, ConfirmReplace: st.g.Advanced.ConfirmReplace, GateName: st.g.Name}
	switch {
	case st.err != nil && !st.cancelled && st.g.Advanced.OnError == OnErrorStop:
		o := abi.GateOutput{Verdict: VerdictStop, Reason: fmt.Sprintf("The gate %q failed: %s", st.g.Name, st.err.Error())}
		d := apply(in, o)
		d.Notes = []string{}
		return d, abi.GateOutput{}
	case st.err != nil, st.by == BySkippedByHook:
		return decision{Action: ActionNone, Text: st.req.Target, Notes: []string{}}, abi.GateOutput{}
	}
	d := apply(in, st.out)
	if d.Notes == nil {
		d.Notes = []string{}
	}
	return d, st.out
}

// addUsage adds a model call's usage.
func addUsage(u abi.Usage, m model.Usage) abi.Usage {
	return abi.Usage{InputTokens: u.InputTokens + m.InputTokens, OutputTokens: u.OutputTokens + m.OutputTokens}
}

// maxStderrDetail is how much of a failed rule's stderr (its end) the record keeps.
const maxStderrDetail = 2048

// stderrTail is the end of a failed rule's stderr, where its error message is.
func stderrTail(stderr string) string {
	s := strings.TrimSpace(stderr)
	if len(s) <= maxStderrDetail {
		return s
	}
	return "…" + clip.Tail(s, maxStderrDetail)
}

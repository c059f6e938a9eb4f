package helper

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pixie-dev/pixie/internal/clip"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// Call is one `pixie ask` / `pixie judge` call of a run.
type Call struct {
	// Type is "ask" or "judge".
	Type string `json:"type"`
	// JudgeType is bool, select or score (judge only).
	JudgeType string `json:"judgeType,omitempty"`
	// Label is the chosen value: yes/no, the option name, or the nearest level (judge only).
	Label string `json:"label,omitempty"`
	// Engine is the decision engine that answered ("llm" or "jev").
	Engine string `json:"engine,omitempty"`
	// Confidence is the judgment's confidence (judge only).
	Confidence *float64  `json:"confidence,omitempty"`
	Usage      abi.Usage `json:"usage"`
	DurationMs int64     `json:"durationMs"`
	// Error is the failure, if the call failed.
	Error string `json:"error,omitempty"`
}

// LogLine is one pixie_log line of a module run.
type LogLine struct {
	Level   string `json:"level"`
	Message string `json:"message"`
}

// Report is what a run's helper did: its calls (type, judge type, label, engine, confidence,
// usage, duration, error; never a request's text), their summed usage, and its log lines (at
// most abi.MaxLogLines, each cut to abi.MaxLogRecorded bytes).
type Report struct {
	Calls []Call
	Usage abi.Usage
	Logs  []LogLine
}

// Run is one run's helper. It serves WASM host functions directly (it is a runtime.Helper);
// its URL and Token are what a script receives as PIXIE_URL and PIXIE_TOKEN, accepted by the
// Service's Ask and Judge until Close.
type Run struct {
	s      *Service
	name   string
	target string
	token  string
	hash   [32]byte
	url    string
	ctx    context.Context
	// redact and askSystem are the Options' (unset for gate runs).
	redact    func(string) string
	askSystem string

	mu    sync.Mutex
	ended bool
	used  int
	calls []Call
	usage abi.Usage
	logs  []LogLine
}

var _ runtime.Helper = (*Run)(nil)

// URL returns the server URL a script reaches the helper routes at (PIXIE_URL), or "" when
// the server has none: scripts then get no helper.
func (r *Run) URL() string { return r.url }

// Token returns the run's token (PIXIE_TOKEN). It is a secret: never log or record it.
func (r *Run) Token() string { return r.token }

// Close revokes the token (later calls, direct or over HTTP, fail as unauthorized; later log
// lines are dropped) and reports what the run did. It may be called more than once.
func (r *Run) Close() Report {
	r.mu.Lock()
	r.ended = true
	r.mu.Unlock()
	r.s.revoke(r)
	r.mu.Lock()
	defer r.mu.Unlock()
	return Report{Calls: append([]Call{}, r.calls...), Usage: r.usage, Logs: append([]LogLine(nil), r.logs...)}
}

// admit checks a call against the budget, in the order unauthorized, too large, invalid,
// rate limited, and counts it.
func (r *Run) admit(size int, validate func() error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return errUnauthorized()
	}
	if size > abi.MaxHelperRequestSize {
		return errs.New(errs.TooLarge, "the request is %d bytes; a helper request is at most %d bytes", size, abi.MaxHelperRequestSize)
	}
	if err := validate(); err != nil {
		return err
	}
	if r.used >= abi.MaxHelperCalls {
		return errs.New(errs.RateLimited, "the run has used its %d helper calls", abi.MaxHelperCalls)
	}
	r.used++
	return nil
}

// callContext bounds a call by the run's deadline and ends it with the run.
func (r *Run) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	var cancel context.CancelFunc
	if dl, ok := r.ctx.Deadline(); ok {
		ctx, cancel = context.WithDeadline(ctx, dl)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	stop := context.AfterFunc(r.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

func (r *Run) note(c Call, u abi.Usage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
	r.usage.InputTokens += u.InputTokens
	r.usage.OutputTokens += u.OutputTokens
}

// Ask implements runtime.Helper.
func (r *Run) Ask(ctx context.Context, req abi.AskRequest) (abi.AskResponse, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return abi.AskResponse{}, errs.Wrap(errs.Invalid, err, "bad ask request")
	}
	return r.ask(ctx, req, len(b))
}

// Judge implements runtime.Helper.
func (r *Run) Judge(ctx context.Context, req abi.JudgeRequest) (abi.JudgeResponse, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return abi.JudgeResponse{}, errs.Wrap(errs.Invalid, err, "bad judge request")
	}
	return r.judgeCall(ctx, req, len(b))
}

// Log implements runtime.Helper: lines are kept in the report (at most abi.MaxLogLines, each
// cut to abi.MaxLogRecorded bytes).
func (r *Run) Log(level, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended || len(r.logs) >= abi.MaxLogLines {
		return
	}
	r.logs = append(r.logs, LogLine{Level: level, Message: clip.BytesMark(message, abi.MaxLogRecorded, "\n[… truncated]")})
}

const askSystemPrompt = `You are Pixie, a helper called from a gate script in a coding agent's workflow. Follow the instruction exactly. Answer with the result only: no preamble, no explanation, no code fences unless the instruction asks for them.`

func (r *Run) ask(ctx context.Context, req abi.AskRequest, size int) (abi.AskResponse, error) {
	err := r.admit(size, func() error {
		if strings.TrimSpace(req.Instruction) == "" {
			return errs.New(errs.Invalid, "pixie ask needs an instruction")
		}
		return nil
	})
	if err != nil {
		return abi.AskResponse{}, err
	}
	ctx, done := r.callContext(ctx)
	defer done()
	start := time.Now()
	input := req.Input
	if req.UseTarget && input == "" {
		input = r.target
	}
	content := req.Instruction
	if input != "" {
		content += "\n\n<input>\n" + input + "\n</input>"
	}
	content = r.clean(content)
	call := Call{Type: "ask"}
	if r.s.model == nil {
		err = modelError(ctx, model.ErrNoModel)
		call.Error = err.Error()
		r.note(call, abi.Usage{})
		return abi.AskResponse{}, err
	}
	resp, err := r.s.model.Complete(ctx, model.Request{System: r.systemPrompt(),
		Messages: []model.Message{{Role: model.RoleUser, Content: content}}})
	u := abi.Usage{InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens}
	call.Usage, call.DurationMs = u, time.Since(start).Milliseconds()
	if err != nil {
		err = modelError(ctx, err)
		call.Error = err.Error()
		r.note(call, u)
		return abi.AskResponse{}, err
	}
	r.note(call, u)
	return abi.AskResponse{Text: resp.Text}, nil
}

// modelError codes a model failure for the helper.
func modelError(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, model.ErrNoModel):
		return errs.Wrap(errs.Unavailable, err, "no Pixie model is configured")
	case errors.Is(err, model.ErrTimeout), errors.Is(ctx.Err(), context.DeadlineExceeded):
		return errs.Wrap(errs.Timeout, err, "the helper call ran past the gate's time limit")
	case errors.Is(err, context.Canceled):
		return errs.Wrap(errs.Unavailable, err, "the run ended")
	default:
		return errs.Wrap(errs.Upstream, err, "Pixie model error: %v", err)
	}
}

var judgeTypeNames = map[string]string{abi.JudgeBool: "bool", abi.JudgeSelect: "select", abi.JudgeScore: "score"}

func (r *Run) judgeCall(ctx context.Context, req abi.JudgeRequest, size int) (abi.JudgeResponse, error) {
	err := r.admit(size, func() error {
		if len(req.Questions) == 0 {
			return errs.New(errs.Invalid, "pixie judge needs a question")
		}
		return nil
	})
	if err != nil {
		return abi.JudgeResponse{}, err
	}
	ctx, done := r.callContext(ctx)
	defer done()
	start := time.Now()
	if req.UseTarget && req.State == "" {
		req.State = r.target
	}
	req.UseTarget = false
	req = r.cleanJudge(req)
	ids := make([]string, 0, len(req.Questions))
	for id := range req.Questions {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	call := Call{Type: "judge", JudgeType: judgeTypeNames[req.Questions[ids[0]].Type]}
	if r.s.judge == nil {
		err := errs.New(errs.Unavailable, "the decision engine is not available")
		call.Error = err.Error()
		r.note(call, abi.Usage{})
		return abi.JudgeResponse{}, err
	}
	resp, err := r.s.judge.Judge(ctx, req)
	call.DurationMs = time.Since(start).Milliseconds()
	if err != nil {
		err = judgeError(ctx, err)
		call.Error = err.Error()
		r.note(call, resp.Usage)
		return abi.JudgeResponse{}, err
	}
	call.Engine, call.Usage = resp.Engine, resp.Usage
	if a, ok := resp.Answers[ids[0]]; ok {
		c := a.Confidence
		call.Label, call.Confidence = a.Label, &c
		if call.JudgeType == "" {
			call.JudgeType = judgeTypeNames[a.Type]
		}
	}
	r.note(call, resp.Usage)
	return resp, nil
}

// judgeError keeps a coded judgment error and codes the rest.
func judgeError(ctx context.Context, err error) error {
	var ce *errs.Error
	switch {
	case errors.As(err, &ce):
		return err
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return errs.Wrap(errs.Timeout, err, "the helper call ran past the gate's time limit")
	case errors.Is(err, model.ErrNoModel):
		return errs.Wrap(errs.Unavailable, err, "no judge model is configured")
	default:
		return errs.Wrap(errs.Upstream, err, "judgment failed: %v", err)
	}
}

// clean applies the run's redaction, if any.
func (r *Run) clean(s string) string {
	if r.redact == nil || s == "" {
		return s
	}
	return r.redact(s)
}

// systemPrompt is the system prompt of the run's ask calls.
func (r *Run) systemPrompt() string {
	if r.askSystem != "" {
		return r.askSystem
	}
	return askSystemPrompt
}

// cleanJudge returns req with the run's redaction applied to every text a model or Jev sees;
// the caller's maps and slices are not modified. Question ids are never sent out and are kept.
func (r *Run) cleanJudge(req abi.JudgeRequest) abi.JudgeRequest {
	if r.redact == nil {
		return req
	}
	out := abi.JudgeRequest{State: r.clean(req.State), UseTarget: req.UseTarget}
	if req.Questions != nil {
		out.Questions = make(map[string]abi.Question, len(req.Questions))
	}
	for id, q := range req.Questions {
		c := abi.Criteria{True: r.clean(q.Criteria.True), False: r.clean(q.Criteria.False)}
		if q.Criteria.Options != nil {
			c.Options = make([]abi.Option, len(q.Criteria.Options))
			for i, o := range q.Criteria.Options {
				c.Options[i] = abi.Option{Name: r.clean(o.Name), Description: r.clean(o.Description)}
			}
		}
		if q.Criteria.Levels != nil {
			c.Levels = make([]string, len(q.Criteria.Levels))
			for i, l := range q.Criteria.Levels {
				c.Levels[i] = r.clean(l)
			}
		}
		out.Questions[id] = abi.Question{Type: q.Type, Instructions: r.clean(q.Instructions), Criteria: c}
	}
	return out
}

package gate

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"

	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// tokenRegistry holds the helper tokens of the runs in progress. Tokens are looked up by
// their SHA-256, so a lookup's timing says nothing about how much of a guess matched; a hit is
// confirmed with a constant-time comparison.
//
// A token names the replica that issued it: "pxr_<instance>.<32 random bytes, base64url>".
// The run (its budget, its deadline, the model calls it makes, its record) lives in that
// replica's memory, so a helper call that a load balancer sends to another replica is
// forwarded to the issuer (server/helper.go, through TokenOwner), which answers it as if it
// had come directly. The instance part is not a secret and grants nothing: only the issuer
// holds the token's hash.
type tokenRegistry struct {
	instance string
	mu       sync.Mutex
	byHash   map[[32]byte]*helperRun
}

func newTokenRegistry(instance string) *tokenRegistry {
	return &tokenRegistry{instance: instance, byHash: map[[32]byte]*helperRun{}}
}

// TokenPrefix starts every helper token.
const TokenPrefix = "pxr_"

// TokenOwner returns the instance id of the replica that issued a helper token ("" for a
// token of no known shape).
func TokenOwner(token string) string {
	rest, ok := strings.CutPrefix(token, TokenPrefix)
	if !ok {
		return ""
	}
	inst, _, ok := strings.Cut(rest, ".")
	if !ok || len(inst) == 0 || len(inst) > 64 {
		return ""
	}
	for _, c := range inst {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return ""
		}
	}
	return inst
}

// Instance is the id of this replica, as its helper tokens carry it.
func (s *Service) Instance() string { return s.runs.instance }

// start issues a token for a run. ctx is the run's context: its deadline bounds every helper
// call, and its end cancels calls in flight.
func (r *tokenRegistry) start(ctx context.Context, s *Service, runID, gate, target string) *helperRun {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	tok := TokenPrefix + r.instance + "." + base64.RawURLEncoding.EncodeToString(b[:])
	h := &helperRun{s: s, reg: r, runID: runID, gate: gate, target: target, token: tok,
		hash: sha256.Sum256([]byte(tok)), ctx: ctx, calls: []HelperCall{}}
	r.mu.Lock()
	r.byHash[h.hash] = h
	r.mu.Unlock()
	return h
}

// lookup returns the live run that holds token, or nil.
func (r *tokenRegistry) lookup(token string) *helperRun {
	if token == "" {
		return nil
	}
	sum := sha256.Sum256([]byte(token))
	r.mu.Lock()
	h := r.byHash[sum]
	r.mu.Unlock()
	if h == nil || subtle.ConstantTimeCompare([]byte(h.token), []byte(token)) != 1 {
		return nil
	}
	return h
}

func (r *tokenRegistry) revoke(h *helperRun) {
	r.mu.Lock()
	if r.byHash[h.hash] == h {
		delete(r.byHash, h.hash)
	}
	r.mu.Unlock()
}

// helperRun is one run's helper: its token and its budget of abi.MaxHelperCalls calls of at
// most abi.MaxHelperRequestSize bytes each, within the run's time limit. WASM host functions
// call it directly (runtime.Helper); bash scripts reach it over HTTP with the token.
type helperRun struct {
	s      *Service
	reg    *tokenRegistry
	runID  string
	gate   string
	target string
	token  string
	hash   [32]byte
	ctx    context.Context

	// redact and askSystem are set by OpenHelperRun for callers outside the gate pipeline
	// (runhelper_export.go); both are unset for gate runs.
	redact    func(string) string
	askSystem string

	mu    sync.Mutex
	ended bool
	used  int
	calls []HelperCall
	usage abi.Usage
	logs  []LogLine
}

var _ runtime.Helper = (*helperRun)(nil)

// end revokes the token; later calls fail as unauthorized.
func (h *helperRun) end() {
	h.mu.Lock()
	h.ended = true
	h.mu.Unlock()
	h.reg.revoke(h)
}

// collect ends the run's helper and returns what it did.
func (h *helperRun) collect() ([]HelperCall, abi.Usage, []LogLine) {
	h.end()
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]HelperCall{}, h.calls...), h.usage, append([]LogLine(nil), h.logs...)
}

// admit checks a call against the budget, in the order unauthorized, too large, invalid,
// rate limited, and counts it.
func (h *helperRun) admit(size int, validate func() error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return errs.New(errs.Unauthorized, "the helper token is not valid, or its run has ended")
	}
	if size > abi.MaxHelperRequestSize {
		return errs.New(errs.TooLarge, "the request is %d bytes; a helper request is at most %d bytes", size, abi.MaxHelperRequestSize)
	}
	if err := validate(); err != nil {
		return err
	}
	if h.used >= abi.MaxHelperCalls {
		return errs.New(errs.RateLimited, "the run has used its %d helper calls", abi.MaxHelperCalls)
	}
	h.used++
	return nil
}

// callContext bounds a call by the run's deadline and ends it with the run.
func (h *helperRun) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	var cancel context.CancelFunc
	if dl, ok := h.ctx.Deadline(); ok {
		ctx, cancel = context.WithDeadline(ctx, dl)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	stop := context.AfterFunc(h.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

func (h *helperRun) note(c HelperCall, u abi.Usage) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, c)
	h.usage.InputTokens += u.InputTokens
	h.usage.OutputTokens += u.OutputTokens
}

// Ask implements runtime.Helper.
func (h *helperRun) Ask(ctx context.Context, req abi.AskRequest) (abi.AskResponse, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return abi.AskResponse{}, errs.Wrap(errs.Invalid, err, "bad ask request")
	}
	return h.ask(ctx, req, len(b))
}

// Judge implements runtime.Helper.
func (h *helperRun) Judge(ctx context.Context, req abi.JudgeRequest) (abi.JudgeResponse, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return abi.JudgeResponse{}, errs.Wrap(errs.Invalid, err, "bad judge request")
	}
	return h.judgeCall(ctx, req, len(b))
}

// Log implements runtime.Helper: lines are kept in the run record (at most 100).
func (h *helperRun) Log(level, message string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended || len(h.logs) >= abi.MaxLogLines {
		return
	}
	h.logs = append(h.logs, LogLine{Level: level, Message: capText(message, abi.MaxLogRecorded)})
}

const askSystemPrompt = `You are Pixie, a helper called from a gate script in a coding agent's workflow. Follow the instruction exactly. Answer with the result only: no preamble, no explanation, no code fences unless the instruction asks for them.`

func (h *helperRun) ask(ctx context.Context, req abi.AskRequest, size int) (abi.AskResponse, error) {
	err := h.admit(size, func() error {
		if strings.TrimSpace(req.Instruction) == "" {
			return errs.New(errs.Invalid, "pixie ask needs an instruction")
		}
		return nil
	})
	if err != nil {
		return abi.AskResponse{}, err
	}
	ctx, done := h.callContext(ctx)
	defer done()
	start := time.Now()
	input := req.Input
	if req.UseTarget && input == "" {
		input = h.target
	}
	content := req.Instruction
	if input != "" {
		content += "\n\n<input>\n" + input + "\n</input>"
	}
	content = h.clean(content)
	call := HelperCall{Type: "ask"}
	if h.s.model == nil {
		err = modelError(ctx, model.ErrNoModel)
		call.Error = err.Error()
		h.note(call, abi.Usage{})
		return abi.AskResponse{}, err
	}
	resp, err := h.s.model.Complete(ctx, model.Request{System: h.systemPrompt(),
		Messages: []model.Message{{Role: model.RoleUser, Content: content}}})
	u := addUsage(abi.Usage{}, resp.Usage)
	call.Usage, call.DurationMs = u, time.Since(start).Milliseconds()
	if err != nil {
		err = modelError(ctx, err)
		call.Error = err.Error()
		h.note(call, u)
		return abi.AskResponse{}, err
	}
	h.note(call, u)
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

func (h *helperRun) judgeCall(ctx context.Context, req abi.JudgeRequest, size int) (abi.JudgeResponse, error) {
	err := h.admit(size, func() error {
		if len(req.Questions) == 0 {
			return errs.New(errs.Invalid, "pixie judge needs a question")
		}
		return nil
	})
	if err != nil {
		return abi.JudgeResponse{}, err
	}
	ctx, done := h.callContext(ctx)
	defer done()
	start := time.Now()
	if req.UseTarget && req.State == "" {
		req.State = h.target
	}
	req.UseTarget = false
	req = h.cleanJudge(req)
	ids := make([]string, 0, len(req.Questions))
	for id := range req.Questions {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	call := HelperCall{Type: "judge", JudgeType: judgeTypeNames[req.Questions[ids[0]].Type]}
	if h.s.judge == nil {
		err := errs.New(errs.Unavailable, "the decision engine is not available")
		call.Error = err.Error()
		h.note(call, abi.Usage{})
		return abi.JudgeResponse{}, err
	}
	resp, err := h.s.judge.Judge(ctx, req)
	call.DurationMs = time.Since(start).Milliseconds()
	if err != nil {
		err = judgeError(ctx, err)
		call.Error = err.Error()
		h.note(call, resp.Usage)
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
	h.note(call, resp.Usage)
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

// helperFor returns the live run of a token, or an unauthorized error.
func (s *Service) helperFor(token string) (*helperRun, error) {
	h := s.runs.lookup(token)
	if h == nil {
		return nil, errs.New(errs.Unauthorized, "the helper token is not valid, or its run has ended")
	}
	return h, nil
}

// decodeStrict decodes a helper request as abi.DecodeStrict does, its errors coded invalid.
func decodeStrict(body []byte, v any) error {
	err := abi.DecodeStrict(body, v)
	switch {
	case errors.Is(err, abi.ErrTrailingData):
		return errs.New(errs.Invalid, "the request has data after its JSON object")
	case err != nil:
		return errs.Wrap(errs.Invalid, err, "the request is not valid JSON for this call: %v", err)
	}
	return nil
}

// HelperAsk serves one `pixie ask` over HTTP for the run that holds token. body is the raw
// request (an abi.AskRequest); its size counts against the per-request limit. Errors are
// coded: unauthorized (no such live run), too_large, invalid, rate_limited (past the call
// limit), unavailable (no model), timeout, upstream.
func (s *Service) HelperAsk(ctx context.Context, token string, body []byte) (abi.AskResponse, error) {
	h, err := s.helperFor(token)
	if err != nil {
		return abi.AskResponse{}, err
	}
	var req abi.AskRequest
	if len(body) <= abi.MaxHelperRequestSize {
		if err := decodeStrict(body, &req); err != nil {
			return abi.AskResponse{}, err
		}
	}
	return h.ask(ctx, req, len(body))
}

// HelperJudge serves one `pixie judge` over HTTP for the run that holds token, like
// HelperAsk.
func (s *Service) HelperJudge(ctx context.Context, token string, body []byte) (abi.JudgeResponse, error) {
	h, err := s.helperFor(token)
	if err != nil {
		return abi.JudgeResponse{}, err
	}
	var req abi.JudgeRequest
	if len(body) <= abi.MaxHelperRequestSize {
		if err := decodeStrict(body, &req); err != nil {
			return abi.JudgeResponse{}, err
		}
	}
	return h.judgeCall(ctx, req, len(body))
}

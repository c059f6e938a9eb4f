package gate

import (
	"context"

	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// HelperRunOptions configures a helper run opened by OpenHelperRun. The zero value works.
type HelperRunOptions struct {
	// Name names the caller (for example "pet:tidy"); it stands where a gate run keeps its
	// gate's name.
	Name string
	// Target is what a call that asks for the target works on: `pixie ask` without --input,
	// `pixie judge` without --input (useTarget in the request).
	Target string
	// Redact, when set, rewrites every text the run sends out before it leaves: the ask
	// instruction and input, and the judgment's state, instructions, criteria and option
	// names. Pet uses it to keep environment values out of prompts.
	Redact func(string) string
	// AskSystem replaces the system prompt of ask calls (which tells the model it serves a gate
	// script); empty keeps the gate's.
	AskSystem string
}

// HelperRun is one helper run opened for a caller outside the gate pipeline. Its Helper serves
// WASM host functions directly; its URL and Token are what a script receives as PIXIE_URL and
// PIXIE_TOKEN, accepted by the helper routes (HelperAsk, HelperJudge) until Close.
type HelperRun struct {
	h   *helperRun
	url string
}

// HelperReport is what a helper run did: its calls (type, judge type, label, engine,
// confidence, usage, duration, error; never a request's text) and their summed usage.
type HelperReport struct {
	Calls []HelperCall
	Usage abi.Usage
}

// OpenHelperRun opens the helper gate rules get, for a caller that is not a gate (Pet's
// Skills): abi.MaxHelperCalls calls of at most abi.MaxHelperRequestSize bytes each, asks
// through the Pixie model and judgments through the decision engine, every call bounded by
// ctx's deadline and ended with ctx, errors coded as for gate runs (unauthorized, too_large,
// invalid, rate_limited, unavailable, timeout, upstream). ctx is the run's context. The run's
// token is live until Close; the caller must call Close when the run ends.
func (s *Service) OpenHelperRun(ctx context.Context, opts HelperRunOptions) *HelperRun {
	h := s.runs.start(ctx, s, "", opts.Name, opts.Target)
	// Set before the token is handed out: no call can see the run before this returns.
	h.redact, h.askSystem = opts.Redact, opts.AskSystem
	return &HelperRun{h: h, url: s.getHelperURL()}
}

// Helper returns the run's helper for host functions (runtime.Request.Helper).
func (r *HelperRun) Helper() runtime.Helper { return r.h }

// URL returns the server URL a script reaches the helper routes at (PIXIE_URL), or "" when
// the server has none: scripts then get no helper.
func (r *HelperRun) URL() string { return r.url }

// Token returns the run's token (PIXIE_TOKEN). It is a secret: never log or record it.
func (r *HelperRun) Token() string { return r.h.token }

// Close revokes the token (later calls, direct or over HTTP, fail as unauthorized) and
// reports the run's calls. It may be called more than once.
func (r *HelperRun) Close() HelperReport {
	calls, usage, _ := r.h.collect()
	return HelperReport{Calls: calls, Usage: usage}
}

// clean applies the run's redaction, if any.
func (h *helperRun) clean(s string) string {
	if h.redact == nil || s == "" {
		return s
	}
	return h.redact(s)
}

// systemPrompt is the system prompt of the run's ask calls.
func (h *helperRun) systemPrompt() string {
	if h.askSystem != "" {
		return h.askSystem
	}
	return askSystemPrompt
}

// cleanJudge returns req with the run's redaction applied to every text a model or Jev sees;
// the caller's maps and slices are not modified. Question ids are never sent out and are kept.
func (h *helperRun) cleanJudge(req abi.JudgeRequest) abi.JudgeRequest {
	if h.redact == nil {
		return req
	}
	out := abi.JudgeRequest{State: h.clean(req.State), UseTarget: req.UseTarget}
	if req.Questions != nil {
		out.Questions = make(map[string]abi.Question, len(req.Questions))
	}
	for id, q := range req.Questions {
		c := abi.Criteria{True: h.clean(q.Criteria.True), False: h.clean(q.Criteria.False)}
		if q.Criteria.Options != nil {
			c.Options = make([]abi.Option, len(q.Criteria.Options))
			for i, o := range q.Criteria.Options {
				c.Options[i] = abi.Option{Name: h.clean(o.Name), Description: h.clean(o.Description)}
			}
		}
		if q.Criteria.Levels != nil {
			c.Levels = make([]string, len(q.Criteria.Levels))
			for i, l := range q.Criteria.Levels {
				c.Levels[i] = h.clean(l)
			}
		}
		out.Questions[id] = abi.Question{Type: q.Type, Instructions: h.clean(q.Instructions), Criteria: c}
	}
	return out
}

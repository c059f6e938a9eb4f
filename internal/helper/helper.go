// Package helper owns the per-run helper: the `pixie ask` / `pixie judge` calls and pixie_log
// lines of one script or module run, and the run token (PIXIE_TOKEN) that lets a bash script
// reach them over HTTP. Gate runs (internal/gate) and Pet's Skill runs (internal/pet) each
// open one through the same Service; the server's /v1/helper routes (server/helper.go) answer
// by token through Service.Ask and Service.Judge.
//
// A run's helper has a budget of abi.MaxHelperCalls calls of at most abi.MaxHelperRequestSize
// bytes each, within the run's time limit; asks go to the Pixie model, judgments to the
// decision engine. Errors are coded (internal/errs): unauthorized (no such live run),
// too_large, invalid, rate_limited (past the call limit), unavailable (no model or engine),
// timeout, upstream. What a run did (its calls, never a request's text, their usage, its log
// lines) is reported by Run.Close.
package helper

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"strings"
	"sync"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// Judge is the decision engine as the helper sees it (internal/judge's Service satisfies it).
type Judge interface {
	Judge(ctx context.Context, req abi.JudgeRequest) (abi.JudgeResponse, error)
}

// Config configures a Service. The zero value works.
type Config struct {
	// Instance is the replica's id (the store's Instance; it must be lowercase hex, as
	// TokenOwner reads it), carried by the helper tokens.
	Instance string
	// Model is the Pixie model that answers asks; nil means asks fail as unavailable.
	Model model.Model
	// Judge is the decision engine that answers judgments; nil means judgments fail as
	// unavailable.
	Judge Judge
	// URL is the server URL given to scripts as PIXIE_URL (see also SetURL). Empty means
	// scripts get no helper ("pixie: helper is not available").
	URL string
}

// Service opens run helpers and answers helper calls by token. It is safe for concurrent use.
//
// Tokens are looked up by their SHA-256, so a lookup's timing says nothing about how much of a
// guess matched; a hit is confirmed with a constant-time comparison.
//
// A token names the replica that issued it: "pxr_<instance>.<32 random bytes, base64url>".
// The run (its budget, its deadline, the model calls it makes, its record) lives in that
// replica's memory, so a helper call that a load balancer sends to another replica is
// forwarded to the issuer (server/helper.go, through TokenOwner), which answers it as if it
// had come directly. The instance part is not a secret and grants nothing: only the issuer
// holds the token's hash.
type Service struct {
	instance string
	model    model.Model
	judge    Judge

	mu     sync.Mutex
	url    string
	byHash map[[32]byte]*Run
}

// New returns a Service for the replica cfg.Instance. It returns no error.
func New(_ context.Context, cfg Config) (*Service, error) {
	return &Service{instance: cfg.Instance, model: cfg.Model, judge: cfg.Judge, url: cfg.URL, byHash: map[[32]byte]*Run{}}, nil
}

// Close releases nothing (runs are closed one by one, by whoever opened them); it is there so
// that every component closes alike.
func (s *Service) Close(context.Context) error { return nil }

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
func (s *Service) Instance() string { return s.instance }

// SetURL sets the URL given to scripts as PIXIE_URL, for servers that learn their address
// only after listening. Runs opened before keep the URL they were opened with.
func (s *Service) SetURL(url string) {
	s.mu.Lock()
	s.url = url
	s.mu.Unlock()
}

// URL returns the URL given to scripts as PIXIE_URL ("" when there is none).
func (s *Service) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// Options configures a run opened by Open. The zero value works.
type Options struct {
	// Name names the run's owner: a gate's name, or for example "pet:tidy".
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
	// InProcess opens a run only its caller reaches, through its methods (a WASM guest's host
	// functions call them directly): no token is minted and no HTTP call can find the run. The
	// token is for scripts, which call back over HTTP; not minting one keeps a module rule's
	// run from paying for it (random bytes, a hash, a registration).
	InProcess bool
}

// Open opens a run's helper and mints its token. ctx is the run's context: its deadline bounds
// every call, and its end cancels calls in flight. The token is live until Close; the caller
// must call Close when the run ends.
func (s *Service) Open(ctx context.Context, opts Options) *Run {
	r := &Run{s: s, name: opts.Name, target: opts.Target, redact: opts.Redact, askSystem: opts.AskSystem,
		url: s.URL(), ctx: ctx, calls: []Call{}}
	if opts.InProcess {
		return r
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	// Every field is set before the token is registered: no call can see the run before Open
	// returns it.
	r.token = TokenPrefix + s.instance + "." + base64.RawURLEncoding.EncodeToString(b[:])
	r.hash = sha256.Sum256([]byte(r.token))
	s.mu.Lock()
	s.byHash[r.hash] = r
	s.mu.Unlock()
	return r
}

// lookup returns the live run that holds token, or nil.
func (s *Service) lookup(token string) *Run {
	if token == "" {
		return nil
	}
	sum := sha256.Sum256([]byte(token))
	s.mu.Lock()
	r := s.byHash[sum]
	s.mu.Unlock()
	if r == nil || subtle.ConstantTimeCompare([]byte(r.token), []byte(token)) != 1 {
		return nil
	}
	return r
}

func (s *Service) revoke(r *Run) {
	if r.token == "" { // an in-process run: never registered
		return
	}
	s.mu.Lock()
	if s.byHash[r.hash] == r {
		delete(s.byHash, r.hash)
	}
	s.mu.Unlock()
}

// runFor returns the live run of a token, or an unauthorized error.
func (s *Service) runFor(token string) (*Run, error) {
	r := s.lookup(token)
	if r == nil {
		return nil, errUnauthorized()
	}
	return r, nil
}

func errUnauthorized() error {
	return errs.New(errs.Unauthorized, "the helper token is not valid, or its run has ended")
}

// Ask serves one `pixie ask` over HTTP for the run that holds token. body is the raw request
// (an abi.AskRequest); its size counts against the per-request limit. Errors are coded as the
// package says.
func (s *Service) Ask(ctx context.Context, token string, body []byte) (abi.AskResponse, error) {
	r, err := s.runFor(token)
	if err != nil {
		return abi.AskResponse{}, err
	}
	var req abi.AskRequest
	if len(body) <= abi.MaxHelperRequestSize {
		if err := decodeStrict(body, &req); err != nil {
			return abi.AskResponse{}, err
		}
	}
	return r.ask(ctx, req, len(body))
}

// Judge serves one `pixie judge` over HTTP for the run that holds token, like Ask.
func (s *Service) Judge(ctx context.Context, token string, body []byte) (abi.JudgeResponse, error) {
	r, err := s.runFor(token)
	if err != nil {
		return abi.JudgeResponse{}, err
	}
	var req abi.JudgeRequest
	if len(body) <= abi.MaxHelperRequestSize {
		if err := decodeStrict(body, &req); err != nil {
			return abi.JudgeResponse{}, err
		}
	}
	return r.judgeCall(ctx, req, len(body))
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

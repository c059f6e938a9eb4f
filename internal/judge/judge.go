// Package judge owns the decision engine behind `pixie judge`, the `judge` agent tool and the
// pixie_judge host function: it turns typed questions (bool "noul", select "choice", score)
// about a piece of text into probabilities, a label and a confidence.
//
// Two engines answer:
//
//   - llm (the default) asks the judge model (the Pixie model when no judge model is set). With
//     an OpenAI-compatible provider that returns log-probabilities it asks for a one-token answer
//     (yes/no, an option letter, a level digit) and reads the probabilities of the valid answers
//     from the first answer token, renormalised over them; a score is the probability-weighted
//     mean of the levels, as in G-Eval. Without log-probabilities (Anthropic, or servers that
//     omit them) the model answers a JSON object of probabilities, which is validated and
//     renormalised.
//   - jev sends the request to TypeSafe Jev's System One API with the key from the KeyStore.
//
// A judgment error stays an error: it never becomes a "no" or a low score. Errors are coded
// (internal/errs). The package is a plain Go API: the server routes, the gate helper and the
// WASM host functions all call Service.Judge. Confidence and the engines are documented in
// docs/judge.md.
package judge

import (
	"context"
	_ "embed"
	"log/slog"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pixie-dev/pixie/internal/abi"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/model"
)

// Engine names.
const (
	EngineLLM = "llm"
	EngineJev = "jev"
)

// DefaultSystemPrompt is the judge system prompt used when Config.SystemPrompt is empty. It
// lives in prompt.md beside this file.
//
//go:embed prompt.md
var DefaultSystemPrompt string

// Config configures a Service. The zero value works: the llm engine with the Pixie model and
// the built-in system prompt.
type Config struct {
	// Engine is "llm" (default) or "jev".
	Engine string
	// SystemPrompt replaces the built-in judge system prompt (llm engine). The answer-format
	// instructions are part of each question's message, so a custom prompt cannot break them.
	SystemPrompt string
	// Model is the judge model (llm engine); an empty Provider means the Pixie model.
	Model model.Config
	// Jev configures the jev engine.
	Jev JevConfig
	// Logger receives one debug line per judgment and a warning per failure (never a key or
	// the judged text); nil discards them.
	Logger *slog.Logger
}

// JevConfig configures the Jev engine. The zero value works.
type JevConfig struct {
	// BaseURL is the System One API's base; empty means https://api.typesafe.ai. Requests go
	// to <BaseURL>/v1/systemone.
	BaseURL string
	// Model is the Jev model; empty means "jev-latest". Pin a version (such as "jev-1.13.0")
	// once thresholds are tuned.
	Model string
	// Timeout bounds one request; zero means 30s.
	Timeout time.Duration
}

// Jev defaults.
const (
	DefaultJevBaseURL = "https://api.typesafe.ai"
	DefaultJevModel   = "jev-latest"
	DefaultJevTimeout = 30 * time.Second
)

// Info describes the engine without secrets.
type Info struct {
	// Engine is "llm" or "jev".
	Engine string `json:"engine"`
	// Model is the model the llm engine uses.
	Model model.Info `json:"model"`
	// UsesPixieModel is true when no judge model is set and the Pixie model answers.
	UsesPixieModel bool `json:"usesPixieModel"`
	// CustomSystemPrompt is true when Config.SystemPrompt replaced the built-in prompt.
	CustomSystemPrompt bool `json:"customSystemPrompt"`
	// Jev describes the Jev engine (also when it is not the chosen one, for the settings page).
	Jev JevInfo `json:"jev"`
	// Problem is set when the configuration cannot work (for example a bad judge model).
	Problem string `json:"problem,omitempty"`
}

// JevInfo describes the Jev engine without its key.
type JevInfo struct {
	BaseURL string    `json:"baseUrl"`
	Model   string    `json:"model"`
	Timeout string    `json:"timeout"`
	Key     KeyStatus `json:"key"`
}

// Service is the decision engine. It is safe for concurrent use.
type Service struct {
	cfg        Config
	prompt     string
	model      model.Model
	pixieModel bool
	modelErr   error // a judge model that could not be built
	keys       *KeyStore
	jev        *jevClient
	log        *slog.Logger
	// noLogprobs is set once the judge model showed it gives no log-probabilities; later
	// judgments go straight to the JSON answer.
	noLogprobs atomic.Bool
}

// New returns the decision engine. pixieModel answers when cfg.Model sets no provider (nil
// means none). keys holds the Jev key (nil: the jev engine has no key). New never fails: a bad
// configuration (unknown engine, invalid judge model) makes every Judge call fail with a
// coded error and shows in Info().Problem.
func New(cfg Config, pixieModel model.Model, keys *KeyStore) *Service {
	s := &Service{cfg: cfg, keys: keys, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.cfg.Engine = strings.ToLower(strings.TrimSpace(cfg.Engine))
	if s.cfg.Engine == "" {
		s.cfg.Engine = EngineLLM
	}
	s.prompt = cfg.SystemPrompt
	if strings.TrimSpace(s.prompt) == "" {
		s.prompt = DefaultSystemPrompt
	}
	if strings.TrimSpace(cfg.Model.Provider) != "" {
		m, err := model.New(cfg.Model)
		if err != nil {
			s.modelErr = err
		}
		s.model = m
	} else {
		s.model, s.pixieModel = pixieModel, true
	}
	s.jev = newJevClient(cfg.Jev, keys)
	return s
}

// Keys returns the Jev key store (nil when none was given).
func (s *Service) Keys() *KeyStore { return s.keys }

// Info describes the engine.
func (s *Service) Info() Info {
	ctx := context.Background()
	in := Info{
		Engine:             s.cfg.Engine,
		UsesPixieModel:     s.pixieModel,
		CustomSystemPrompt: s.prompt != DefaultSystemPrompt,
		Jev:                JevInfo{BaseURL: s.jev.baseURL, Model: s.jev.model, Timeout: s.jev.timeout.String()},
	}
	if s.model != nil {
		in.Model = s.model.Info()
	}
	if s.keys != nil {
		st, err := s.keys.Status(ctx)
		in.Jev.Key = st
		if err != nil && s.cfg.Engine == EngineJev {
			in.Problem = err.Error()
		}
	}
	if p := s.configProblem(); p != nil {
		in.Problem = p.Error()
	}
	return in
}

// configProblem reports a configuration that cannot judge at all.
func (s *Service) configProblem() error {
	switch s.cfg.Engine {
	case EngineLLM, EngineJev:
	default:
		return errs.New(errs.Unavailable, "unknown decision engine %q: use %q or %q", s.cfg.Engine, EngineLLM, EngineJev)
	}
	if s.cfg.Engine == EngineLLM && s.modelErr != nil {
		return errs.Wrap(errs.Unavailable, s.modelErr, "the judge model is misconfigured: %v", s.modelErr)
	}
	return nil
}

// Judge answers every question of req with the configured engine. req.State is the judged
// text (the caller substitutes the gate target for UseTarget). Errors are coded: invalid (the
// request), unavailable (no model, no Jev key), timeout, upstream (the model or Jev failed or
// answered badly). A failed judgment returns no answers, only the engine and the usage spent.
func (s *Service) Judge(ctx context.Context, req abi.JudgeRequest) (abi.JudgeResponse, error) {
	if err := Validate(req); err != nil {
		return abi.JudgeResponse{}, err
	}
	if err := s.configProblem(); err != nil {
		return abi.JudgeResponse{}, err
	}
	start := time.Now()
	var (
		resp abi.JudgeResponse
		err  error
	)
	if s.cfg.Engine == EngineJev {
		resp, err = s.jev.judge(ctx, req)
	} else {
		resp, err = s.judgeLLM(ctx, req)
	}
	attrs := []any{"engine", s.cfg.Engine, "questions", len(req.Questions), "ms", time.Since(start).Milliseconds(),
		"inputTokens", resp.Usage.InputTokens, "outputTokens", resp.Usage.OutputTokens}
	if err != nil {
		s.log.Warn("judge: judgment failed", append(attrs, "code", string(errs.CodeOf(err)), "err", err.Error())...)
		return abi.JudgeResponse{Engine: s.cfg.Engine, Usage: resp.Usage}, err
	}
	s.log.Debug("judge: judged", attrs...)
	resp.Engine = s.cfg.Engine
	return resp, nil
}

// sortedIDs returns the question ids in a stable order.
func sortedIDs(qs map[string]abi.Question) []string {
	ids := make([]string, 0, len(qs))
	for id := range qs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// JudgeJSON serves the `judge` tool and POST /v1/judge: body is the Jev request shape (see
// DecodeRequest), answered with Judge. Errors are coded like Judge's; invalid for a request
// that does not decode or validate.
func (s *Service) JudgeJSON(ctx context.Context, body []byte) (abi.JudgeResponse, error) {
	req, err := DecodeRequest(body)
	if err != nil {
		return abi.JudgeResponse{}, err
	}
	return s.Judge(ctx, req)
}

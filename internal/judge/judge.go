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
	"errors"
	"log/slog"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/sdk/abi"
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
	// PixieModel answers when Model sets no provider; nil means none.
	PixieModel model.Model
	// Keys holds the Jev key; nil means the jev engine has no key.
	Keys *KeyStore
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

// Service is the decision engine. It is safe for concurrent use; Reconfigure replaces its
// configuration while judgments run (each judgment uses the configuration it started with).
type Service struct {
	pixie model.Model // the Pixie model given to New: the llm engine's model when no judge model is set
	keys  *KeyStore
	log   *slog.Logger
	eng   atomic.Pointer[engine]
	// noLogprobs names the model (see modelIdentity) that showed it gives no log-probabilities;
	// later judgments with that model go straight to the JSON answer. A different model (after
	// Reconfigure, or a swapped Pixie model) is asked for log-probabilities again.
	noLogprobs atomic.Pointer[string]
}

// engine is one immutable configuration of the Service.
type engine struct {
	cfg        Config
	prompt     string
	model      model.Model
	pixieModel bool
	modelErr   error // a judge model that could not be built
	jev        *jevClient
}

// New returns the decision engine. It returns no error: a bad configuration (unknown engine,
// invalid judge model) makes every Judge call fail with a coded error and shows in
// Info().Problem.
func New(_ context.Context, cfg Config) (*Service, error) {
	s := &Service{pixie: cfg.PixieModel, keys: cfg.Keys, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.eng.Store(s.build(cfg))
	return s, nil
}

// Close releases nothing (the Service holds no goroutine, file or connection of its own: the
// Jev client uses the default transport); it is there so that every component closes alike.
func (s *Service) Close(context.Context) error { return nil }

// build turns cfg into an engine; it never fails (a bad judge model is kept as modelErr).
func (s *Service) build(cfg Config) *engine {
	e := &engine{cfg: cfg}
	e.cfg.Engine = strings.ToLower(strings.TrimSpace(cfg.Engine))
	if e.cfg.Engine == "" {
		e.cfg.Engine = EngineLLM
	}
	e.prompt = cfg.SystemPrompt
	if strings.TrimSpace(e.prompt) == "" {
		e.prompt = DefaultSystemPrompt
	}
	if strings.TrimSpace(cfg.Model.Provider) != "" {
		m, err := model.New(cfg.Model)
		if err != nil {
			e.modelErr = err
		}
		e.model = m
	} else {
		e.model, e.pixieModel = s.pixie, true
	}
	e.jev = newJevClient(cfg.Jev, s.keys)
	return e
}

// Reconfigure replaces the engine, the system prompt, the judge model and the Jev settings at
// run time, keeping the key store, the Pixie model and the logger given to New (cfg.Logger,
// cfg.PixieModel and cfg.Keys are ignored). cfg is checked with CheckConfig first: on an error
// nothing changes. Judgments already running finish with the configuration they started with.
func (s *Service) Reconfigure(cfg Config) error {
	if err := CheckConfig(cfg); err != nil {
		return err
	}
	s.eng.Store(s.build(cfg))
	return nil
}

// MaxSystemPromptLength caps Config.SystemPrompt in bytes.
const MaxSystemPromptLength = 64 << 10

// CheckConfig validates cfg without contacting anything: the engine name, the system prompt's
// size, the judge model (built as model.New would), and the Jev base URL, model and timeout.
// Errors are errs.Invalid and name the setting (judge.engine, judge.model, judge.jevBaseUrl,
// …).
func CheckConfig(cfg Config) error {
	switch strings.ToLower(strings.TrimSpace(cfg.Engine)) {
	case "", EngineLLM, EngineJev:
	default:
		return errs.New(errs.Invalid, "judge.engine: unknown decision engine %q: use %q or %q", cfg.Engine, EngineLLM, EngineJev)
	}
	if len(cfg.SystemPrompt) > MaxSystemPromptLength {
		return errs.New(errs.Invalid, "judge.systemPrompt: the system prompt is over %d bytes", MaxSystemPromptLength)
	}
	if strings.TrimSpace(cfg.Model.Provider) != "" {
		if _, err := model.New(cfg.Model); err != nil {
			return errs.Wrap(errs.Invalid, err, "judge.model: %s", errMessage(err))
		}
	}
	if cfg.Jev.BaseURL != "" {
		u, err := url.Parse(cfg.Jev.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errs.New(errs.Invalid, "judge.jevBaseUrl: %q is not an absolute http(s) URL", cfg.Jev.BaseURL)
		}
		if u.User != nil {
			return errs.New(errs.Invalid, "judge.jevBaseUrl: the URL must not carry credentials; save the Jev key instead")
		}
	}
	if m := strings.TrimSpace(cfg.Jev.Model); len(m) > 128 || strings.IndexFunc(m, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return errs.New(errs.Invalid, "judge.jevModel: a Jev model name is at most 128 characters without spaces")
	}
	if cfg.Jev.Timeout < 0 {
		return errs.New(errs.Invalid, "judge.jevTimeout: the Jev timeout must not be negative")
	}
	return nil
}

// errMessage is the client-safe message of err (the coded message when there is one).
func errMessage(err error) string {
	var ce *errs.Error
	if errors.As(err, &ce) && ce.Message != "" {
		return ce.Message
	}
	return err.Error()
}

// Keys returns the Jev key store (nil when none was given).
func (s *Service) Keys() *KeyStore { return s.keys }

// Info describes the engine.
func (s *Service) Info() Info {
	ctx := context.Background()
	e := s.eng.Load()
	in := Info{
		Engine:             e.cfg.Engine,
		UsesPixieModel:     e.pixieModel,
		CustomSystemPrompt: e.prompt != DefaultSystemPrompt,
		Jev:                JevInfo{BaseURL: e.jev.baseURL, Model: e.jev.model, Timeout: e.jev.timeout.String()},
	}
	if e.model != nil {
		in.Model = e.model.Info()
	}
	if s.keys != nil {
		st, err := s.keys.Status(ctx)
		in.Jev.Key = st
		if err != nil && e.cfg.Engine == EngineJev {
			in.Problem = err.Error()
		}
	}
	if p := e.configProblem(); p != nil {
		in.Problem = p.Error()
	}
	return in
}

// configProblem reports a configuration that cannot judge at all.
func (e *engine) configProblem() error {
	switch e.cfg.Engine {
	case EngineLLM, EngineJev:
	default:
		return errs.New(errs.Unavailable, "unknown decision engine %q: use %q or %q", e.cfg.Engine, EngineLLM, EngineJev)
	}
	if e.cfg.Engine == EngineLLM && e.modelErr != nil {
		return errs.Wrap(errs.Unavailable, e.modelErr, "the judge model is misconfigured: %v", e.modelErr)
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
	e := s.eng.Load()
	if err := e.configProblem(); err != nil {
		return abi.JudgeResponse{}, err
	}
	start := time.Now()
	var (
		resp abi.JudgeResponse
		err  error
	)
	if e.cfg.Engine == EngineJev {
		resp, err = e.jev.judge(ctx, req)
	} else {
		resp, err = s.judgeLLM(ctx, e, req)
	}
	attrs := []any{"engine", e.cfg.Engine, "questions", len(req.Questions), "ms", time.Since(start).Milliseconds(),
		"inputTokens", resp.Usage.InputTokens, "outputTokens", resp.Usage.OutputTokens}
	if err != nil {
		s.log.Warn("judge: judgment failed", append(attrs, "code", string(errs.CodeOf(err)), "err", err.Error())...)
		return abi.JudgeResponse{Engine: e.cfg.Engine, Usage: resp.Usage}, err
	}
	s.log.Debug("judge: judged", attrs...)
	resp.Engine = e.cfg.Engine
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

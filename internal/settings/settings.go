// Package settings owns the run-time settings of the Pixie model and the decision engine: the
// values the Studio settings page saves on top of the file and environment configuration
// (internal/config), their validation, their persistence, and applying them to the running
// services without a restart.
//
// # Layers
//
// Each field has one source, reported with it:
//
//   - "env": a PIXIE_* environment variable is set for it (even to an empty value). It wins and
//     is read-only here: a change is refused with errs.Conflict naming the variable.
//   - "settings": a value saved through this package (store collection settings/, API keys in
//     the home's credentials file). It wins over the file.
//   - "file": pixie.yaml, a --set flag, or the built-in default.
//
// Saved values are per field: a field the last save did not carry follows the file. An API key
// is never returned by any method: views say only whether a key is set and where it comes from
// ("env", "settings", "file", or "env" for the provider's OPENAI_API_KEY / ANTHROPIC_API_KEY
// fallback).
//
// # Applying a change
//
// A change is validated (errs.Invalid with details [{field, message}]), the new provider or
// engine is built, the change is persisted (key first, then the store document, the key restored
// if the store write fails), and only then swapped in: the Pixie model through model.Swappable,
// the decision engine through judge.Service.Reconfigure. A refused change leaves everything as it
// was. On start, New applies what was saved; a saved value that no longer works is reported as
// the section's problem and the file configuration is used instead.
package settings

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/judge"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/store"
)

// Sources of a field's value.
const (
	SourceEnv      = "env"
	SourceSettings = "settings"
	SourceFile     = "file"
)

// Limits on saved values.
const (
	MaxModelNameLength = 256
	MaxBaseURLLength   = 2048
	MaxAPIKeyLength    = 4096
	MaxTimeout         = 10 * time.Minute
	// TestTimeout bounds one connection test, whatever the model's own timeout.
	TestTimeout = 30 * time.Second
	// TestPrompt is the one message a connection test sends.
	TestPrompt = "Reply with OK"
)

// Secrets is where saved API keys live: internal/credentials' File in production.
type Secrets interface {
	Get(ctx context.Context, name string) (value string, ok bool, err error)
	Set(ctx context.Context, name, value string) error
	Delete(ctx context.Context, name string) error
}

// Options configures New.
type Options struct {
	// Config is the effective file + environment + flags configuration (config.Load).
	Config config.Config
	// Store keeps the saved settings (collection settings/).
	Store *store.Store
	// Secrets keeps saved API keys; nil means keys cannot be saved.
	Secrets Secrets
	// Model is the Pixie model every service holds; New sets its provider. Required.
	Model *model.Swappable
	// Judge is the decision engine; nil leaves the judge settings out.
	Judge *judge.Service
	// LookupEnv tells which PIXIE_* variables are set; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Logger receives one line per change (never a key); nil discards.
	Logger *slog.Logger
}

// FieldError is one refused field, returned as an error's details.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Field describes where a field's value comes from.
type Field struct {
	// Source is "env", "settings" or "file".
	Source string `json:"source"`
	// ReadOnly is true when an environment variable sets the field.
	ReadOnly bool `json:"readOnly"`
	// Env is the variable that sets (or would set) the field.
	Env string `json:"env"`
}

// ModelInput is a model section to save or test. A nil field is not saved: it follows the file
// (or the environment). APIKey is write-only; nil or "" keeps the saved key.
type ModelInput struct {
	Provider *string `json:"provider,omitempty"`
	BaseURL  *string `json:"baseUrl,omitempty"`
	Model    *string `json:"model,omitempty"`
	// Timeout is a Go duration ("45s", "2m"); "" or "0" means the default (60s).
	Timeout *string `json:"timeout,omitempty"`
	APIKey  *string `json:"apiKey,omitempty"`
}

// JudgeInput is a decision-engine section to save. Nil fields follow the file; Model nil means
// the judge model follows the file.
type JudgeInput struct {
	// Engine is "llm" or "jev".
	Engine *string `json:"engine,omitempty"`
	// SystemPrompt replaces the built-in judge prompt; "" means the built-in one.
	SystemPrompt *string `json:"systemPrompt,omitempty"`
	// Model is the judge model; a provider of "" means the Pixie model answers.
	Model      *ModelInput `json:"model,omitempty"`
	JevBaseURL *string     `json:"jevBaseUrl,omitempty"`
	JevModel   *string     `json:"jevModel,omitempty"`
	// JevTimeout is a Go duration; "" or "0" means the default (30s).
	JevTimeout *string `json:"jevTimeout,omitempty"`
}

// ModelView is a model section as shown: effective values, never the key.
type ModelView struct {
	Provider string `json:"provider"`
	// BaseURL is the configured endpoint; "" means the provider's default.
	BaseURL string `json:"baseUrl"`
	// Endpoint is the URL calls go to (BaseURL or the provider's default); "" without a model.
	Endpoint string `json:"endpoint"`
	Model    string `json:"model"`
	// Timeout is a Go duration; "" means the default.
	Timeout      string `json:"timeout"`
	HasAPIKey    bool   `json:"hasApiKey"`
	APIKeySource string `json:"apiKeySource"`
	Configured   bool   `json:"configured"`
	// Overridden is true when saved settings change any field of this section.
	Overridden bool `json:"overridden"`
	// Fields has provider, baseUrl, model, timeout and apiKey.
	Fields map[string]Field `json:"fields"`
	// Problem is set when saved settings could not be applied (the file's are used).
	Problem string `json:"problem,omitempty"`
}

// JudgeView is the decision-engine section as shown.
type JudgeView struct {
	Engine string `json:"engine"`
	// SystemPrompt is the custom prompt; "" means the built-in one, DefaultSystemPrompt.
	SystemPrompt        string `json:"systemPrompt"`
	DefaultSystemPrompt string `json:"defaultSystemPrompt"`
	// Model is the judge model section (its fields say PIXIE_JUDGE_MODEL_*).
	Model ModelView `json:"model"`
	// UsesPixieModel is true when no judge model is set.
	UsesPixieModel bool   `json:"usesPixieModel"`
	JevBaseURL     string `json:"jevBaseUrl"`
	JevModel       string `json:"jevModel"`
	JevTimeout     string `json:"jevTimeout"`
	// JevKey is the Jev key's status (set with PUT /v1/judge/key).
	JevKey     judge.KeyStatus `json:"jevKey"`
	Overridden bool            `json:"overridden"`
	// Fields has engine, systemPrompt, jevBaseUrl, jevModel and jevTimeout.
	Fields map[string]Field `json:"fields"`
	// Problem is why saved settings were not applied, or why the engine cannot judge.
	Problem string `json:"problem,omitempty"`
}

// View is every run-time setting.
type View struct {
	Model ModelView `json:"model"`
	// Judge is nil when the service has no decision engine.
	Judge *JudgeView `json:"judge,omitempty"`
}

// TestError is a failed connection test's error.
type TestError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// TestResult is the answer of a connection test.
type TestResult struct {
	OK        bool   `json:"ok"`
	LatencyMs int64  `json:"latencyMs"`
	Provider  string `json:"provider"`
	// Model is the model that answered (the provider's name for it when it gives one).
	Model string `json:"model"`
	// Reply is the start of the model's answer.
	Reply string     `json:"reply,omitempty"`
	Error *TestError `json:"error,omitempty"`
}

// modelFields are the saved fields of a model section; nil means "not saved".
type modelFields struct {
	Provider *string        `json:"provider,omitempty"`
	BaseURL  *string        `json:"baseUrl,omitempty"`
	Model    *string        `json:"model,omitempty"`
	Timeout  *time.Duration `json:"timeout,omitempty"`
}

func (f modelFields) empty() bool {
	return f.Provider == nil && f.BaseURL == nil && f.Model == nil && f.Timeout == nil
}

// modelDoc is settings/model.
type modelDoc struct {
	modelFields
	UpdatedAt time.Time `json:"updatedAt"`
}

// judgeDoc is settings/judge.
type judgeDoc struct {
	Engine       *string        `json:"engine,omitempty"`
	SystemPrompt *string        `json:"systemPrompt,omitempty"`
	JevBaseURL   *string        `json:"jevBaseUrl,omitempty"`
	JevModel     *string        `json:"jevModel,omitempty"`
	JevTimeout   *time.Duration `json:"jevTimeout,omitempty"`
	Model        modelFields    `json:"model"`
	UpdatedAt    time.Time      `json:"updatedAt"`
}

func (d judgeDoc) empty() bool {
	return d.Engine == nil && d.SystemPrompt == nil && d.JevBaseURL == nil && d.JevModel == nil &&
		d.JevTimeout == nil && d.Model.empty()
}

var (
	modelDocs = store.NewCollection[modelDoc]("settings")
	judgeDocs = store.NewCollection[judgeDoc]("settings")
)

// Document ids in the settings collection.
const (
	idModel = "model"
	idJudge = "judge"
)

// section names the configuration keys of one model section ("model" or "judge.model").
type section struct {
	prefix string            // YAML path prefix
	env    map[string]string // field → variable
	cred   string            // credentials entry of the saved key
}

// Service holds the run-time settings. It is safe for concurrent use; changes are serialised.
type Service struct {
	cfg       config.Config
	st        *store.Store
	secrets   Secrets
	model     *model.Swappable
	judge     *judge.Service
	lookupEnv func(string) (string, bool)
	log       *slog.Logger

	pixieSec section
	judgeSec section
	judgeEnv map[string]string // engine, systemPrompt, jevBaseUrl, jevModel, jevTimeout → variable

	mu           sync.Mutex
	modelDoc     modelDoc
	judgeDoc     judgeDoc
	modelProblem string
	judgeProblem string
}

// New loads the saved settings and applies them: it sets opts.Model's provider and, with a
// decision engine, reconfigures it. A saved value that does not work any more is reported in
// the section's Problem and the file configuration is used; New fails only when the file
// configuration itself cannot build the Pixie model.
func New(ctx context.Context, opts Options) (*Service, error) {
	if opts.Model == nil {
		return nil, errs.New(errs.Internal, "settings: no Pixie model to configure")
	}
	if opts.Store == nil {
		return nil, errs.New(errs.Internal, "settings: no store")
	}
	s := &Service{cfg: opts.Config, st: opts.Store, secrets: opts.Secrets, model: opts.Model, judge: opts.Judge,
		lookupEnv: opts.LookupEnv, log: opts.Logger}
	if s.lookupEnv == nil {
		s.lookupEnv = os.LookupEnv
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	envOf := map[string]string{}
	for _, st := range (config.Config{}).Settings() {
		envOf[st.Key] = st.Env
	}
	mk := func(prefix string) section {
		sec := section{prefix: prefix, env: map[string]string{}}
		for _, f := range []string{"provider", "baseUrl", "model", "timeout", "apiKey"} {
			sec.env[f] = envOf[prefix+"."+f]
		}
		sec.cred = sec.env["apiKey"]
		return sec
	}
	s.pixieSec, s.judgeSec = mk("model"), mk("judge.model")
	s.judgeEnv = map[string]string{}
	for _, f := range []string{"engine", "systemPrompt", "jevBaseUrl", "jevModel", "jevTimeout"} {
		s.judgeEnv[f] = envOf["judge."+f]
	}

	err := s.st.View(ctx, func(tx *store.Tx) error {
		md, err := modelDocs.Get(tx, idModel)
		switch {
		case err == nil:
			s.modelDoc = md
		case !errors.Is(err, store.ErrNotFound):
			s.modelProblem = "the saved model settings cannot be read; pixie.yaml and the environment are used"
			s.log.Warn("settings: saved model settings unreadable", "err", err)
		}
		jd, err := judgeDocs.Get(tx, idJudge)
		switch {
		case err == nil:
			s.judgeDoc = jd
		case !errors.Is(err, store.ErrNotFound):
			s.judgeProblem = "the saved decision engine settings cannot be read; pixie.yaml and the environment are used"
			s.log.Warn("settings: saved judge settings unreadable", "err", err)
		}
		return nil
	})
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "settings: the store cannot be read")
	}

	// The Pixie model: saved settings, else the file alone.
	r, err := s.resolveModel(ctx, s.pixieSec, s.cfg.Model, s.modelDoc.modelFields, nil)
	var m model.Model
	if err == nil {
		m, err = buildModel(r, s.pixieSec, "")
	}
	if err != nil {
		if s.modelDoc.empty() && !s.hasSavedKey(ctx, s.pixieSec) {
			return nil, err
		}
		s.modelProblem = "the saved model settings were not applied: " + errMessage(err)
		s.log.Warn("settings: saved model settings not applied; using pixie.yaml and the environment", "problem", errMessage(err))
		none := ""
		fr, ferr := s.resolveModel(ctx, s.pixieSec, s.cfg.Model, modelFields{}, &none)
		if ferr == nil {
			m, ferr = buildModel(fr, s.pixieSec, "")
		}
		if ferr != nil {
			return nil, ferr
		}
	}
	s.model.Set(m)

	if s.judge != nil {
		jc, err := s.judgeConfig(ctx, s.judgeDoc, nil)
		if err == nil {
			err = s.judge.Reconfigure(jc)
		}
		if err != nil {
			s.judgeProblem = "the saved decision engine settings were not applied: " + errMessage(err)
			s.log.Warn("settings: saved judge settings not applied; using pixie.yaml and the environment", "problem", errMessage(err))
			if fc, ferr := s.judgeConfig(ctx, judgeDoc{}, nil); ferr == nil {
				_ = s.judge.Reconfigure(fc) // a bad file configuration stays as judge.New built it
			}
		}
	}
	return s, nil
}

// Get returns every setting, masked.
func (s *Service) Get(ctx context.Context) (View, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := View{}
	mv, err := s.modelView(ctx)
	if err != nil {
		return View{}, err
	}
	v.Model = mv
	if s.judge != nil {
		jv, err := s.judgeView(ctx)
		if err != nil {
			return View{}, err
		}
		v.Judge = &jv
	}
	return v, nil
}

// SetModel saves the Pixie model section (replacing what was saved before) and swaps the new
// provider in. Errors: errs.Conflict for a field an environment variable sets, errs.Invalid
// with []FieldError details for bad values, errs.Unavailable when a key is given but there is
// no credentials file.
func (s *Service) SetModel(ctx context.Context, in ModelInput) (ModelView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fields, err := s.modelInput(s.pixieSec, s.cfg.Model, in, "")
	if err != nil {
		return ModelView{}, err
	}
	newKey := ""
	if in.APIKey != nil {
		newKey = strings.TrimSpace(*in.APIKey)
	}
	r, err := s.resolveModel(ctx, s.pixieSec, s.cfg.Model, fields, keyOverride(newKey))
	if err != nil {
		return ModelView{}, err
	}
	m, err := buildModel(r, s.pixieSec, "")
	if err != nil {
		return ModelView{}, err
	}
	doc := modelDoc{modelFields: fields, UpdatedAt: time.Now().UTC()}
	if err := s.persist(ctx, s.pixieSec, newKey, func(tx *store.Tx) error {
		if fields.empty() {
			return modelDocs.Delete(tx, idModel)
		}
		return modelDocs.Put(tx, idModel, doc)
	}); err != nil {
		return ModelView{}, err
	}
	s.model.Set(m)
	s.modelDoc, s.modelProblem = doc, ""
	s.logModel("settings: Pixie model changed", r, newKey != "")
	return s.modelView(ctx)
}

// ResetModel removes the saved Pixie model fields, so pixie.yaml and the environment apply
// again. A saved API key is kept (DeleteModelKey removes it).
func (s *Service) ResetModel(ctx context.Context) (ModelView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.resolveModel(ctx, s.pixieSec, s.cfg.Model, modelFields{}, nil)
	if err != nil {
		return ModelView{}, err
	}
	m, err := buildModel(r, s.pixieSec, "")
	if err != nil {
		return ModelView{}, errs.Wrap(errs.Invalid, err, "pixie.yaml's model settings cannot be used: %s", errMessage(err))
	}
	if err := s.st.Update(ctx, func(tx *store.Tx) error { return modelDocs.Delete(tx, idModel) }); err != nil {
		return ModelView{}, errs.Wrap(errs.Internal, err, "the model settings could not be reset")
	}
	s.model.Set(m)
	s.modelDoc, s.modelProblem = modelDoc{}, ""
	s.logModel("settings: Pixie model reset to the file", r, false)
	return s.modelView(ctx)
}

// DeleteModelKey removes the saved Pixie model API key: the file's or the environment's key
// applies again. It is refused (errs.Invalid) when the model would then have no key it needs,
// and (errs.Conflict) when PIXIE_MODEL_API_KEY sets the key.
func (s *Service) DeleteModelKey(ctx context.Context) (ModelView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.deleteKey(ctx, s.pixieSec, s.cfg.Model, s.modelDoc.modelFields, true); err != nil {
		return ModelView{}, err
	}
	return s.modelView(ctx)
}

// SetJudge saves the decision-engine section (replacing what was saved before) and
// reconfigures the engine. Errors as SetModel's.
func (s *Service) SetJudge(ctx context.Context, in JudgeInput) (JudgeView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.judge == nil {
		return JudgeView{}, errs.New(errs.Unavailable, "this server has no decision engine")
	}
	doc, err := s.judgeInput(in)
	if err != nil {
		return JudgeView{}, err
	}
	newKey := ""
	if in.Model != nil && in.Model.APIKey != nil {
		newKey = strings.TrimSpace(*in.Model.APIKey)
	}
	jc, err := s.judgeConfig(ctx, doc, keyOverride(newKey))
	if err != nil {
		return JudgeView{}, err
	}
	if err := judge.CheckConfig(jc); err != nil {
		return JudgeView{}, judgeFieldError(err)
	}
	doc.UpdatedAt = time.Now().UTC()
	if err := s.persist(ctx, s.judgeSec, newKey, func(tx *store.Tx) error {
		if doc.empty() {
			return judgeDocs.Delete(tx, idJudge)
		}
		return judgeDocs.Put(tx, idJudge, doc)
	}); err != nil {
		return JudgeView{}, err
	}
	if err := s.judge.Reconfigure(jc); err != nil {
		// CheckConfig passed a moment ago, so this does not happen; say so rather than hide it.
		return JudgeView{}, errs.Wrap(errs.Internal, err, "the decision engine was saved but could not be applied: %s", errMessage(err))
	}
	s.judgeDoc, s.judgeProblem = doc, ""
	s.log.Info("settings: decision engine changed", "engine", jc.Engine, "customPrompt", jc.SystemPrompt != "",
		"judgeModel", jc.Model.Provider != "", "judgeProvider", jc.Model.Provider, "judgeModelName", jc.Model.Model,
		"jevBaseUrl", jc.Jev.BaseURL, "jevModel", jc.Jev.Model, "apiKey", keyNote(newKey != ""))
	return s.judgeView(ctx)
}

// ResetJudge removes the saved decision-engine fields (a saved judge model key is kept).
func (s *Service) ResetJudge(ctx context.Context) (JudgeView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.judge == nil {
		return JudgeView{}, errs.New(errs.Unavailable, "this server has no decision engine")
	}
	jc, err := s.judgeConfig(ctx, judgeDoc{}, nil)
	if err != nil {
		return JudgeView{}, err
	}
	if err := judge.CheckConfig(jc); err != nil {
		return JudgeView{}, errs.Wrap(errs.Invalid, err, "pixie.yaml's decision engine settings cannot be used: %s", errMessage(err))
	}
	if err := s.st.Update(ctx, func(tx *store.Tx) error { return judgeDocs.Delete(tx, idJudge) }); err != nil {
		return JudgeView{}, errs.Wrap(errs.Internal, err, "the decision engine settings could not be reset")
	}
	if err := s.judge.Reconfigure(jc); err != nil {
		return JudgeView{}, errs.Wrap(errs.Internal, err, "the decision engine was reset but could not be applied: %s", errMessage(err))
	}
	s.judgeDoc, s.judgeProblem = judgeDoc{}, ""
	s.log.Info("settings: decision engine reset to the file", "engine", jc.Engine)
	return s.judgeView(ctx)
}

// DeleteJudgeModelKey removes the saved judge model API key, like DeleteModelKey.
func (s *Service) DeleteJudgeModelKey(ctx context.Context) (JudgeView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.judge == nil {
		return JudgeView{}, errs.New(errs.Unavailable, "this server has no decision engine")
	}
	if err := s.deleteKey(ctx, s.judgeSec, s.cfg.Judge.Model, s.judgeDoc.Model, false); err != nil {
		return JudgeView{}, err
	}
	return s.judgeView(ctx)
}

// TestModel makes one tiny real completion ("Reply with OK") with draft, or with the current
// Pixie model when draft is nil. A draft is resolved as SetModel would (its omitted fields
// follow the file, an omitted key is the current one) but nothing is saved. A model that
// fails answers ok=false with the error's code and message; only a draft that cannot be built
// is an error (errs.Invalid or errs.Conflict).
func (s *Service) TestModel(ctx context.Context, draft *ModelInput) (TestResult, error) {
	var m model.Model
	var key string
	if draft == nil {
		m = s.model.Current()
	} else {
		s.mu.Lock()
		fields, err := s.modelInput(s.pixieSec, s.cfg.Model, *draft, "")
		var r resolved
		if err == nil {
			newKey := ""
			if draft.APIKey != nil {
				newKey = strings.TrimSpace(*draft.APIKey)
			}
			r, err = s.resolveModel(ctx, s.pixieSec, s.cfg.Model, fields, keyOverride(newKey))
		}
		if err == nil {
			m, err = buildModel(r, s.pixieSec, "")
		}
		s.mu.Unlock()
		if err != nil {
			return TestResult{}, err
		}
		key = r.cfg.APIKey
	}
	info := m.Info()
	res := TestResult{Provider: info.Provider, Model: info.Model}
	ctx, cancel := context.WithTimeout(ctx, TestTimeout)
	defer cancel()
	zero := 0.0
	start := time.Now()
	resp, err := m.Complete(ctx, model.Request{
		Messages:    []model.Message{{Role: model.RoleUser, Content: TestPrompt}},
		MaxTokens:   16,
		Temperature: &zero,
	})
	res.LatencyMs = time.Since(start).Milliseconds()
	if err != nil {
		msg := errMessage(err)
		if key != "" {
			msg = strings.ReplaceAll(msg, key, "[redacted]")
		}
		res.Error = &TestError{Code: string(errs.CodeOf(err)), Message: msg}
		s.log.Info("settings: model connection test failed", "provider", info.Provider, "model", info.Model,
			"ms", res.LatencyMs, "code", res.Error.Code)
		return res, nil
	}
	res.OK = true
	if resp.Model != "" {
		res.Model = resp.Model
	}
	res.Reply = clip(strings.TrimSpace(resp.Text), 200)
	s.log.Info("settings: model connection test", "provider", info.Provider, "model", res.Model, "ms", res.LatencyMs)
	return res, nil
}

// resolved is one model section's effective configuration and where each field comes from.
type resolved struct {
	cfg       model.Config
	fields    map[string]Field
	keySource string
	hasKey    bool
	saved     bool // any field comes from saved settings
}

// keyOverride is a key given with a change: nil means "the saved key stays".
func keyOverride(k string) *string {
	if k == "" {
		return nil
	}
	return &k
}

// resolveModel layers env > saved fields > file for one model section. newKey, when non-nil, is
// a key being saved with this change.
func (s *Service) resolveModel(ctx context.Context, sec section, file config.ModelConfig, saved modelFields, newKey *string) (resolved, error) {
	r := resolved{fields: map[string]Field{}}
	pick := func(name string, savedSet bool) string {
		env := sec.env[name]
		if isSet(s.lookupEnv, env) {
			r.fields[name] = Field{Source: SourceEnv, ReadOnly: true, Env: env}
			return SourceEnv
		}
		if savedSet {
			r.fields[name] = Field{Source: SourceSettings, Env: env}
			r.saved = true
			return SourceSettings
		}
		r.fields[name] = Field{Source: SourceFile, Env: env}
		return SourceFile
	}
	r.cfg.Provider = file.Provider
	if pick("provider", saved.Provider != nil) == SourceSettings {
		r.cfg.Provider = *saved.Provider
	}
	r.cfg.BaseURL = file.BaseURL
	if pick("baseUrl", saved.BaseURL != nil) == SourceSettings {
		r.cfg.BaseURL = *saved.BaseURL
	}
	r.cfg.Model = file.Model
	if pick("model", saved.Model != nil) == SourceSettings {
		r.cfg.Model = *saved.Model
	}
	r.cfg.Timeout = file.Timeout
	if pick("timeout", saved.Timeout != nil) == SourceSettings {
		r.cfg.Timeout = *saved.Timeout
	}
	r.cfg.Provider = strings.ToLower(strings.TrimSpace(r.cfg.Provider))

	// The key: env > saved > file > the provider's own variable.
	keyEnv := sec.env["apiKey"]
	r.fields["apiKey"] = Field{Source: SourceFile, Env: keyEnv}
	switch {
	case isSet(s.lookupEnv, keyEnv):
		r.cfg.APIKey, r.keySource = file.APIKey, SourceEnv
		r.fields["apiKey"] = Field{Source: SourceEnv, ReadOnly: true, Env: keyEnv}
	default:
		savedKey := ""
		if newKey != nil {
			savedKey = *newKey
		} else {
			k, err := s.savedKey(ctx, sec)
			if err != nil {
				return resolved{}, err
			}
			savedKey = k
		}
		switch {
		case savedKey != "":
			r.cfg.APIKey, r.keySource = savedKey, SourceSettings
			r.fields["apiKey"] = Field{Source: SourceSettings, Env: keyEnv}
		case file.APIKey != "":
			r.cfg.APIKey, r.keySource = file.APIKey, SourceFile
		}
	}
	if r.cfg.APIKey == "" {
		// The provider's usual variable (OPENAI_API_KEY, ANTHROPIC_API_KEY), as model.New
		// would read it; resolved here so the report and the call agree.
		if pv := providerKeyEnv(r.cfg.Provider); pv != "" {
			if v, ok := s.lookupEnv(pv); ok && strings.TrimSpace(v) != "" {
				r.cfg.APIKey = strings.TrimSpace(v)
				if r.keySource == "" {
					r.keySource = SourceEnv
					r.fields["apiKey"] = Field{Source: SourceEnv, Env: pv}
				}
			}
		}
	}
	r.hasKey = r.cfg.APIKey != ""
	return r, nil
}

// providerKeyEnv is the provider's usual API key variable.
func providerKeyEnv(provider string) string {
	switch provider {
	case model.ProviderOpenAI:
		return model.EnvOpenAIAPIKey
	case model.ProviderAnthropic:
		return model.EnvAnthropicAPIKey
	}
	return ""
}

// buildModel validates r field by field (details name fieldPrefix+field) and builds the
// provider.
func buildModel(r resolved, sec section, fieldPrefix string) (model.Model, error) {
	var bad []FieldError
	add := func(f, format string, args ...any) {
		bad = append(bad, FieldError{Field: fieldPrefix + f, Message: fmt.Sprintf(format, args...)})
	}
	c := r.cfg
	switch c.Provider {
	case "", model.ProviderOpenAI, model.ProviderAnthropic:
	default:
		add("provider", "unknown provider %q: use %q (any OpenAI-compatible endpoint) or %q", c.Provider, model.ProviderOpenAI, model.ProviderAnthropic)
	}
	if c.Provider != "" && strings.TrimSpace(c.Model) == "" {
		add("model", "the model name is required when a provider is set")
	}
	if len(c.Model) > MaxModelNameLength {
		add("model", "the model name is longer than %d characters", MaxModelNameLength)
	} else if strings.IndexFunc(c.Model, unicode.IsControl) >= 0 {
		add("model", "the model name contains control characters")
	}
	if c.BaseURL != "" {
		if msg := checkURL(c.BaseURL); msg != "" {
			add("baseUrl", "%s", msg)
		}
	}
	if c.Timeout < 0 || c.Timeout > MaxTimeout {
		add("timeout", "the timeout must be between 0 (the default, 60s) and %s", MaxTimeout)
	}
	if len(bad) > 0 {
		return nil, invalid(bad)
	}
	m, err := model.New(c)
	if err != nil {
		// Field checks passed, so what is left is a missing key (or a rule model.New added).
		field := "provider"
		if strings.Contains(errMessage(err), "API key") {
			field = "apiKey"
		}
		return nil, invalidCause([]FieldError{{Field: fieldPrefix + field, Message: errMessage(err)}}, err)
	}
	return m, nil
}

// checkURL returns why u is not an acceptable endpoint, or "".
func checkURL(u string) string {
	if len(u) > MaxBaseURLLength {
		return fmt.Sprintf("the URL is longer than %d characters", MaxBaseURLLength)
	}
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return fmt.Sprintf("%q is not an absolute http(s) URL", u)
	}
	if p.User != nil {
		return "the URL must not carry credentials; use the API key setting"
	}
	return ""
}

// modelInput turns an input into saved fields: env-set fields must be left out or equal the
// environment's value (errs.Conflict otherwise); values are trimmed and parsed.
func (s *Service) modelInput(sec section, file config.ModelConfig, in ModelInput, fieldPrefix string) (modelFields, error) {
	var out modelFields
	var conflicts, bad []FieldError
	envValue := map[string]string{"provider": file.Provider, "baseUrl": file.BaseURL, "model": file.Model}
	str := func(name string, v *string, norm func(string) string) *string {
		if v == nil {
			return nil
		}
		val := norm(*v)
		if isSet(s.lookupEnv, sec.env[name]) {
			if val != norm(envValue[name]) {
				conflicts = append(conflicts, readOnly(fieldPrefix+name, sec.env[name]))
			}
			return nil
		}
		return &val
	}
	out.Provider = str("provider", in.Provider, func(v string) string { return strings.ToLower(strings.TrimSpace(v)) })
	out.BaseURL = str("baseUrl", in.BaseURL, func(v string) string { return strings.TrimRight(strings.TrimSpace(v), "/") })
	out.Model = str("model", in.Model, strings.TrimSpace)
	if in.Timeout != nil {
		d, err := parseDuration(*in.Timeout)
		switch {
		case err != nil:
			bad = append(bad, FieldError{Field: fieldPrefix + "timeout", Message: err.Error()})
		default:
			if isSet(s.lookupEnv, sec.env["timeout"]) {
				if d != file.Timeout {
					conflicts = append(conflicts, readOnly(fieldPrefix+"timeout", sec.env["timeout"]))
				}
			} else {
				out.Timeout = &d
			}
		}
	}
	if in.APIKey != nil && strings.TrimSpace(*in.APIKey) != "" {
		key := strings.TrimSpace(*in.APIKey)
		switch {
		case isSet(s.lookupEnv, sec.env["apiKey"]):
			conflicts = append(conflicts, readOnly(fieldPrefix+"apiKey", sec.env["apiKey"]))
		case len(key) > MaxAPIKeyLength:
			bad = append(bad, FieldError{Field: fieldPrefix + "apiKey", Message: fmt.Sprintf("the API key is longer than %d bytes", MaxAPIKeyLength)})
		case strings.IndexFunc(key, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
			bad = append(bad, FieldError{Field: fieldPrefix + "apiKey", Message: "the API key contains spaces or control characters"})
		case s.secrets == nil:
			return modelFields{}, errs.New(errs.Unavailable, "there is no credentials file to save the API key in")
		}
	}
	if len(conflicts) > 0 {
		return modelFields{}, conflict(conflicts)
	}
	if len(bad) > 0 {
		return modelFields{}, invalid(bad)
	}
	return out, nil
}

// judgeInput turns a decision-engine input into a saved document (the model's key is handled
// by the caller).
func (s *Service) judgeInput(in JudgeInput) (judgeDoc, error) {
	var doc judgeDoc
	var conflicts, bad []FieldError
	file := s.cfg.Judge
	envValue := map[string]string{"engine": file.Engine, "systemPrompt": file.SystemPrompt, "jevBaseUrl": file.JevBaseURL, "jevModel": file.JevModel}
	str := func(name string, v *string, norm func(string) string) *string {
		if v == nil {
			return nil
		}
		val := norm(*v)
		if isSet(s.lookupEnv, s.judgeEnv[name]) {
			if val != norm(envValue[name]) {
				conflicts = append(conflicts, readOnly(name, s.judgeEnv[name]))
			}
			return nil
		}
		return &val
	}
	doc.Engine = str("engine", in.Engine, func(v string) string { return strings.ToLower(strings.TrimSpace(v)) })
	doc.SystemPrompt = str("systemPrompt", in.SystemPrompt, func(v string) string {
		if strings.TrimSpace(v) == "" {
			return ""
		}
		return v
	})
	doc.JevBaseURL = str("jevBaseUrl", in.JevBaseURL, func(v string) string { return strings.TrimRight(strings.TrimSpace(v), "/") })
	doc.JevModel = str("jevModel", in.JevModel, strings.TrimSpace)
	if in.JevTimeout != nil {
		d, err := parseDuration(*in.JevTimeout)
		switch {
		case err != nil:
			bad = append(bad, FieldError{Field: "jevTimeout", Message: err.Error()})
		case isSet(s.lookupEnv, s.judgeEnv["jevTimeout"]):
			if d != file.JevTimeout {
				conflicts = append(conflicts, readOnly("jevTimeout", s.judgeEnv["jevTimeout"]))
			}
		default:
			doc.JevTimeout = &d
		}
	}
	if doc.Engine != nil {
		switch *doc.Engine {
		case judge.EngineLLM, judge.EngineJev:
		case "":
			doc.Engine = nil // "" follows the file
		default:
			bad = append(bad, FieldError{Field: "engine", Message: fmt.Sprintf("unknown decision engine %q: use %q or %q", *doc.Engine, judge.EngineLLM, judge.EngineJev)})
		}
	}
	if doc.SystemPrompt != nil && len(*doc.SystemPrompt) > judge.MaxSystemPromptLength {
		bad = append(bad, FieldError{Field: "systemPrompt", Message: fmt.Sprintf("the system prompt is over %d bytes", judge.MaxSystemPromptLength)})
	}
	if doc.JevBaseURL != nil && *doc.JevBaseURL != "" {
		if msg := checkURL(*doc.JevBaseURL); msg != "" {
			bad = append(bad, FieldError{Field: "jevBaseUrl", Message: msg})
		}
	}
	if doc.JevTimeout != nil && *doc.JevTimeout > MaxTimeout {
		bad = append(bad, FieldError{Field: "jevTimeout", Message: fmt.Sprintf("the Jev timeout must be at most %s", MaxTimeout)})
	}
	if in.Model != nil {
		mf, err := s.modelInput(s.judgeSec, file.Model, *in.Model, "model.")
		var ce *errs.Error
		switch {
		case err == nil:
			doc.Model = mf
		case errors.As(err, &ce) && ce.Code == errs.Conflict:
			conflicts = append(conflicts, ce.Details.([]FieldError)...)
		case errors.As(err, &ce) && ce.Code == errs.Invalid:
			bad = append(bad, ce.Details.([]FieldError)...)
		default:
			return judgeDoc{}, err
		}
	}
	if len(conflicts) > 0 {
		return judgeDoc{}, conflict(conflicts)
	}
	if len(bad) > 0 {
		return judgeDoc{}, invalid(bad)
	}
	return doc, nil
}

// judgeConfig layers env > saved > file for the decision engine and builds its Config; the
// judge model is checked field by field (details name model.<field>).
func (s *Service) judgeConfig(ctx context.Context, doc judgeDoc, newKey *string) (judge.Config, error) {
	file := s.cfg.Judge
	jc := judge.Config{Engine: file.Engine, SystemPrompt: file.SystemPrompt,
		Jev: judge.JevConfig{BaseURL: file.JevBaseURL, Model: file.JevModel, Timeout: file.JevTimeout}}
	over := func(name string, v *string, dst *string) {
		if v != nil && !isSet(s.lookupEnv, s.judgeEnv[name]) {
			*dst = *v
		}
	}
	over("engine", doc.Engine, &jc.Engine)
	over("systemPrompt", doc.SystemPrompt, &jc.SystemPrompt)
	over("jevBaseUrl", doc.JevBaseURL, &jc.Jev.BaseURL)
	over("jevModel", doc.JevModel, &jc.Jev.Model)
	if doc.JevTimeout != nil && !isSet(s.lookupEnv, s.judgeEnv["jevTimeout"]) {
		jc.Jev.Timeout = *doc.JevTimeout
	}
	r, err := s.resolveModel(ctx, s.judgeSec, file.Model, doc.Model, newKey)
	if err != nil {
		return judge.Config{}, err
	}
	if _, err := buildModel(r, s.judgeSec, "model."); err != nil {
		return judge.Config{}, err
	}
	jc.Model = r.cfg
	return jc, nil
}

// persist saves a new key (when given) and then runs the store write; the key is put back as
// it was when the store write fails.
func (s *Service) persist(ctx context.Context, sec section, newKey string, write func(tx *store.Tx) error) error {
	restore := func() {}
	if newKey != "" {
		if s.secrets == nil {
			return errs.New(errs.Unavailable, "there is no credentials file to save the API key in")
		}
		old, had, err := s.secrets.Get(ctx, sec.cred)
		if err != nil {
			return errs.Wrap(errs.Internal, err, "the credentials file cannot be read")
		}
		if err := s.secrets.Set(ctx, sec.cred, newKey); err != nil {
			return errs.Wrap(errs.Internal, err, "the API key could not be saved")
		}
		restore = func() {
			// Background: the caller's context may be what failed the store write.
			bg := context.WithoutCancel(ctx)
			var rerr error
			if had {
				rerr = s.secrets.Set(bg, sec.cred, old)
			} else {
				rerr = s.secrets.Delete(bg, sec.cred)
			}
			if rerr != nil {
				s.log.Error("settings: the previous API key could not be restored after a failed save", "credential", sec.cred, "err", rerr)
			}
		}
	}
	if err := s.st.Update(ctx, write); err != nil {
		restore()
		return errs.Wrap(errs.Internal, err, "the settings could not be saved")
	}
	return nil
}

// deleteKey removes a section's saved key after checking the section still works without it:
// the Pixie model section when pixie is true, else the judge model.
func (s *Service) deleteKey(ctx context.Context, sec section, file config.ModelConfig, saved modelFields, pixie bool) error {
	field := "apiKey"
	if !pixie {
		field = "model.apiKey"
	}
	if isSet(s.lookupEnv, sec.env["apiKey"]) {
		return conflict([]FieldError{readOnly(field, sec.env["apiKey"])})
	}
	if s.secrets == nil {
		return errs.New(errs.Unavailable, "there is no credentials file holding an API key")
	}
	none := "" // resolve as if no key were saved
	var m model.Model
	var jc judge.Config
	if pixie {
		r, err := s.resolveModel(ctx, sec, file, saved, &none)
		if err == nil {
			m, err = buildModel(r, sec, "")
		}
		if err != nil {
			return errs.Wrap(errs.Invalid, err, "without the saved API key the Pixie model cannot be used: %s; save another key or change the provider first", errMessage(err)).WithDetails(detailsOf(err))
		}
	} else {
		var err error
		jc, err = s.judgeConfig(ctx, s.judgeDoc, &none)
		if err == nil {
			err = judge.CheckConfig(jc)
		}
		if err != nil {
			return errs.Wrap(errs.Invalid, err, "without the saved API key the judge model cannot be used: %s; save another key or change the judge model first", errMessage(err)).WithDetails(detailsOf(err))
		}
	}
	if err := s.secrets.Delete(ctx, sec.cred); err != nil {
		return errs.Wrap(errs.Internal, err, "the API key could not be removed")
	}
	if pixie {
		s.model.Set(m)
	} else if err := s.judge.Reconfigure(jc); err != nil {
		return errs.Wrap(errs.Internal, err, "the key was removed but the decision engine could not be reconfigured: %s", errMessage(err))
	}
	s.log.Info("settings: saved API key removed", "setting", sec.prefix+".apiKey")
	return nil
}

// detailsOf returns a coded error's details (nil when it has none).
func detailsOf(err error) any {
	var ce *errs.Error
	if errors.As(err, &ce) {
		return ce.Details
	}
	return nil
}

// savedKey reads a section's saved key ("" when none or no credentials file).
func (s *Service) savedKey(ctx context.Context, sec section) (string, error) {
	if s.secrets == nil {
		return "", nil
	}
	v, ok, err := s.secrets.Get(ctx, sec.cred)
	if err != nil {
		return "", errs.Wrap(errs.Internal, err, "the saved API key cannot be read from the credentials file")
	}
	if !ok {
		return "", nil
	}
	return strings.TrimSpace(v), nil
}

func (s *Service) hasSavedKey(ctx context.Context, sec section) bool {
	k, err := s.savedKey(ctx, sec)
	return err == nil && k != ""
}

// modelView describes the Pixie model section.
func (s *Service) modelView(ctx context.Context) (ModelView, error) {
	r, err := s.resolveModel(ctx, s.pixieSec, s.cfg.Model, s.modelDoc.modelFields, nil)
	if err != nil {
		return ModelView{}, err
	}
	v := viewOf(r)
	in := s.model.Info()
	v.Configured, v.Endpoint = in.Configured, in.BaseURL
	v.Problem = s.modelProblem
	return v, nil
}

// judgeView describes the decision-engine section.
func (s *Service) judgeView(ctx context.Context) (JudgeView, error) {
	file := s.cfg.Judge
	doc := s.judgeDoc
	v := JudgeView{DefaultSystemPrompt: judge.DefaultSystemPrompt, Fields: map[string]Field{}, Overridden: !doc.empty()}
	pick := func(name string, saved *string, fileVal string) string {
		env := s.judgeEnv[name]
		switch {
		case isSet(s.lookupEnv, env):
			v.Fields[name] = Field{Source: SourceEnv, ReadOnly: true, Env: env}
			return fileVal
		case saved != nil:
			v.Fields[name] = Field{Source: SourceSettings, Env: env}
			return *saved
		}
		v.Fields[name] = Field{Source: SourceFile, Env: env}
		return fileVal
	}
	v.Engine = strings.ToLower(strings.TrimSpace(pick("engine", doc.Engine, file.Engine)))
	if v.Engine == "" {
		v.Engine = judge.EngineLLM
	}
	v.SystemPrompt = pick("systemPrompt", doc.SystemPrompt, file.SystemPrompt)
	v.JevBaseURL = pick("jevBaseUrl", doc.JevBaseURL, file.JevBaseURL)
	v.JevModel = pick("jevModel", doc.JevModel, file.JevModel)
	var jt *string
	if doc.JevTimeout != nil {
		t := fmtDuration(*doc.JevTimeout)
		jt = &t
	}
	v.JevTimeout = pick("jevTimeout", jt, fmtDuration(file.JevTimeout))

	r, err := s.resolveModel(ctx, s.judgeSec, file.Model, doc.Model, nil)
	if err != nil {
		return JudgeView{}, err
	}
	v.Model = viewOf(r)
	v.UsesPixieModel = r.cfg.Provider == ""
	info := s.judge.Info()
	if !v.UsesPixieModel {
		v.Model.Configured, v.Model.Endpoint = info.Model.Configured, info.Model.BaseURL
	}
	v.JevKey = info.Jev.Key
	v.Problem = s.judgeProblem
	if v.Problem == "" {
		v.Problem = info.Problem
	}
	return v, nil
}

// viewOf turns a resolved section into its view.
func viewOf(r resolved) ModelView {
	v := ModelView{Provider: r.cfg.Provider, BaseURL: r.cfg.BaseURL, Model: r.cfg.Model, Timeout: fmtDuration(r.cfg.Timeout),
		HasAPIKey: r.hasKey, Fields: r.fields, Overridden: r.saved || r.keySource == SourceSettings}
	if r.hasKey {
		v.APIKeySource = r.keySource
	}
	return v
}

// logModel writes one line about a model change, never the key.
func (s *Service) logModel(msg string, r resolved, keySaved bool) {
	s.log.Info(msg, "provider", r.cfg.Provider, "baseUrl", r.cfg.BaseURL, "model", r.cfg.Model,
		"timeout", fmtDuration(r.cfg.Timeout), "apiKey", keyNote(keySaved))
}

func keyNote(saved bool) string {
	if saved {
		return "saved"
	}
	return "unchanged"
}

// isSet reports whether the environment variable name is set (even to "").
func isSet(lookup func(string) (string, bool), name string) bool {
	if name == "" {
		return false
	}
	_, ok := lookup(name)
	return ok
}

func readOnly(field, env string) FieldError {
	return FieldError{Field: field, Message: fmt.Sprintf("set by the environment variable %s; change or unset it there (it wins over the settings page)", env)}
}

// invalid is an errs.Invalid error listing bad fields in its details.
func invalid(bad []FieldError) *errs.Error {
	return errs.New(errs.Invalid, "%s", joinFields(bad)).WithDetails(bad)
}

// invalidCause is invalid with a cause kept for errors.Is (never shown).
func invalidCause(bad []FieldError, cause error) *errs.Error {
	e := invalid(bad)
	e.Err = cause
	return e
}

func conflict(bad []FieldError) error {
	return errs.New(errs.Conflict, "%s", joinFields(bad)).WithDetails(bad)
}

func joinFields(bad []FieldError) string {
	parts := make([]string, len(bad))
	for i, b := range bad {
		parts[i] = b.Field + ": " + b.Message
	}
	return strings.Join(parts, "; ")
}

// judgeFieldError turns a judge.CheckConfig error ("judge.<field>: …") into field details.
func judgeFieldError(err error) error {
	msg := errMessage(err)
	field := ""
	if rest, ok := strings.CutPrefix(msg, "judge."); ok {
		if f, m, ok := strings.Cut(rest, ": "); ok {
			field, msg = f, m
		}
	}
	return invalidCause([]FieldError{{Field: field, Message: msg}}, err)
}

// errMessage is err's client-safe message.
func errMessage(err error) string {
	var ce *errs.Error
	if errors.As(err, &ce) && ce.Message != "" {
		return ce.Message
	}
	return err.Error()
}

// parseDuration reads a Go duration; "" and "0" mean zero (the default).
func parseDuration(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "" || v == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (use e.g. 30s, 2m)", v)
	}
	if d < 0 {
		return 0, fmt.Errorf("the duration must not be negative")
	}
	return d, nil
}

// fmtDuration shows whole seconds as "60s"; zero as "".
func fmtDuration(d time.Duration) string {
	switch {
	case d == 0:
		return ""
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}

// clip shortens s to at most n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n] + "…"
}

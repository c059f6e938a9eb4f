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
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/pixie-dev/pixie/internal/clip"
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

// Config configures New. Store and Model are required.
type Config struct {
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

	unlisten  func()
	closeOnce sync.Once

	mu           sync.Mutex
	modelDoc     modelDoc
	judgeDoc     judgeDoc
	modelProblem string
	judgeProblem string
}

// New loads the saved settings and applies them: it sets cfg.Model's provider and, with a
// decision engine, reconfigures it. A saved value that does not work any more is reported in
// the section's Problem and the file configuration is used; New fails only when the file
// configuration itself cannot build the Pixie model.
func New(ctx context.Context, opts Config) (*Service, error) {
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

	if err := s.apply(ctx); err != nil {
		return nil, err
	}
	if s.st.Shared() {
		// Another replica saved settings: read and apply them here too.
		s.unlisten = s.st.Listen(topic, func(n store.Note) {
			if n.Lost || n.Payload != s.st.Instance() {
				go s.reload()
			}
		})
	}
	return s, nil
}

// Close stops hearing other replicas' changes. It may be called more than once.
func (s *Service) Close(context.Context) error {
	s.closeOnce.Do(func() {
		if s.unlisten != nil {
			s.unlisten()
		}
	})
	return nil
}

// topic is the notification of a settings change; its payload is the writer's instance.
const topic = "settings"

// note tells the other replicas (over a shared store), when tx commits, that the settings
// changed.
func (s *Service) note(tx *store.Tx) error {
	if !s.st.Shared() {
		return nil
	}
	return tx.Notify(topic, s.st.Instance())
}

// announce tells the other replicas (over a shared store) that the settings changed.
func (s *Service) announce(ctx context.Context) {
	if !s.st.Shared() {
		return
	}
	if err := s.st.Update(context.WithoutCancel(ctx), func(tx *store.Tx) error {
		return tx.Notify(topic, s.st.Instance())
	}); err != nil {
		s.log.Warn("settings: the other replicas were not told of a change", "err", err)
	}
}

// reload reads the saved settings again and applies them (another replica changed them).
func (s *Service) reload() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.apply(ctx); err != nil {
		s.log.Warn("settings: another replica's settings could not be applied", "err", err)
	}
}

// apply loads the saved settings and applies them over the file configuration (New, reload).
// The caller holds mu, or has not shared s yet.
func (s *Service) apply(ctx context.Context) error {
	err := s.st.View(ctx, func(tx *store.Tx) error {
		s.modelDoc, s.judgeDoc, s.modelProblem, s.judgeProblem = modelDoc{}, judgeDoc{}, "", ""
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
		return errs.Wrap(errs.Internal, err, "settings: the store cannot be read")
	}

	// The Pixie model: saved settings, else the file alone.
	r, err := s.resolveModel(ctx, s.pixieSec, s.cfg.Model, s.modelDoc.modelFields, nil)
	var m model.Model
	if err == nil {
		m, err = buildModel(r, "")
	}
	if err != nil {
		if s.modelDoc.empty() && !s.hasSavedKey(ctx, s.pixieSec) {
			return err
		}
		s.modelProblem = "the saved model settings were not applied: " + errMessage(err)
		s.log.Warn("settings: saved model settings not applied; using pixie.yaml and the environment", "problem", errMessage(err))
		none := ""
		fr, ferr := s.resolveModel(ctx, s.pixieSec, s.cfg.Model, modelFields{}, &none)
		if ferr == nil {
			m, ferr = buildModel(fr, "")
		}
		if ferr != nil {
			return ferr
		}
	}
	s.model.Set(m)

	if s.judge != nil {
		jc, err := s.judgeConfig(ctx, s.judgeDoc, nil)
		if err == nil {
			err = s.judge.Reconfigure(jc)
		}
		if err != nil && (!s.judgeDoc.empty() || s.hasSavedKey(ctx, s.judgeSec)) {
			// A bad file configuration alone stays as judge.New built it and shows in its
			// Info().Problem.
			s.judgeProblem = "the saved decision engine settings were not applied: " + errMessage(err)
			s.log.Warn("settings: saved judge settings not applied; using pixie.yaml and the environment", "problem", errMessage(err))
			if fc, ferr := s.judgeConfig(ctx, judgeDoc{}, nil); ferr == nil {
				_ = s.judge.Reconfigure(fc)
			}
		}
	}
	return nil
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
	m, err := buildModel(r, "")
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
	m, err := buildModel(r, "")
	if err != nil {
		return ModelView{}, errs.Wrap(errs.Invalid, err, "pixie.yaml's model settings cannot be used: %s", errMessage(err))
	}
	if err := s.st.Update(ctx, func(tx *store.Tx) error {
		if err := s.note(tx); err != nil {
			return err
		}
		return modelDocs.Delete(tx, idModel)
	}); err != nil {
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
	s.announce(ctx)
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
	if err := s.st.Update(ctx, func(tx *store.Tx) error {
		if err := s.note(tx); err != nil {
			return err
		}
		return judgeDocs.Delete(tx, idJudge)
	}); err != nil {
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
	s.announce(ctx)
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
			m, err = buildModel(r, "")
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
	res.Reply = clip.BytesMark(strings.TrimSpace(resp.Text), 200, "…")
	s.log.Info("settings: model connection test", "provider", info.Provider, "model", res.Model, "ms", res.LatencyMs)
	return res, nil
}

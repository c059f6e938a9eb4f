package settings

// The layering (env > saved > file), validation and persistence behind the Service methods.

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/judge"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/store"
)

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
func buildModel(r resolved, fieldPrefix string) (model.Model, error) {
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
	if _, err := buildModel(r, "model."); err != nil {
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
	if err := s.st.Update(ctx, func(tx *store.Tx) error {
		if err := s.note(tx); err != nil {
			return err
		}
		return write(tx)
	}); err != nil {
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
			m, err = buildModel(r, "")
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

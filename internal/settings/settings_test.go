package settings

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/judge"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/sdk/abi"
)

func judgeReq() abi.JudgeRequest {
	return abi.JudgeRequest{State: "All tests passed.", Questions: map[string]abi.Question{
		"ok": {Type: abi.JudgeBool, Instructions: "Did the tests pass?"}}}
}

// fieldsOf returns the details of a coded error.
func fieldsOf(t *testing.T, err error) []FieldError {
	t.Helper()
	var ce *errs.Error
	if !errors.As(err, &ce) {
		t.Fatalf("err %v is not coded", err)
	}
	d, ok := ce.Details.([]FieldError)
	if !ok || len(d) == 0 {
		t.Fatalf("err %v has no field details (%T)", err, ce.Details)
	}
	return d
}

// TestSetModelAppliesAtOnce: a saved model answers the next call of the services that hold the
// Pixie model (a plain call and a judgment) without a restart, and survives a restart.
func TestSetModelAppliesAtOnce(t *testing.T) {
	a := newFake(t, false, keyA, `{"yes": 0.9, "no": 0.1}`)
	b := newFake(t, true, keyB, `{"yes": 0.2, "no": 0.8}`)
	r := newRig(t, baseConfig(config.ModelConfig{}), env{})
	ctx := context.Background()

	if _, err := r.ask(t); !errors.Is(err, model.ErrNoModel) {
		t.Fatalf("before any setting: err = %v, want ErrNoModel", err)
	}
	v, err := r.svc.SetModel(ctx, ModelInput{Provider: ptr("OpenAI"), BaseURL: ptr(a.baseURL() + "/"), Model: ptr(" gpt-a "), APIKey: ptr(keyA)})
	if err != nil {
		t.Fatal(err)
	}
	if v.Provider != "openai" || v.BaseURL != a.baseURL() || v.Model != "gpt-a" || !v.HasAPIKey || v.APIKeySource != SourceSettings ||
		!v.Configured || !v.Overridden || v.Fields["provider"].Source != SourceSettings || v.Fields["timeout"].Source != SourceFile {
		t.Errorf("view = %+v", v)
	}
	resp, err := r.ask(t)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Model != "gpt-a-answered" {
		t.Errorf("answered by %q", resp.Model)
	}
	if _, err := r.judge.Judge(ctx, judgeReq()); err != nil {
		t.Fatalf("judge after the change: %v", err)
	}
	calls := a.requests()
	if len(calls) < 2 || calls[0].Auth != keyA || calls[len(calls)-1].Model != "gpt-a" {
		t.Fatalf("calls to A = %+v", len(calls))
	}

	// Switch to Anthropic: the judge follows too.
	if _, err := r.svc.SetModel(ctx, ModelInput{Provider: ptr("anthropic"), BaseURL: ptr(b.baseURL()), Model: ptr("claude-b"), APIKey: ptr(keyB)}); err != nil {
		t.Fatal(err)
	}
	resp2, err := r.judge.Judge(ctx, judgeReq())
	if err != nil {
		t.Fatal(err)
	}
	if y := *resp2.Answers["ok"].Yes; y < 0.19 || y > 0.21 {
		t.Errorf("judgment = %v, want B's 0.2", y)
	}
	if n := len(b.requests()); n != 1 || b.requests()[0].Auth != keyB {
		t.Errorf("calls to B = %d", n)
	}

	// A restart on the same home keeps it.
	r.restart()
	if in := r.model.Info(); in.Provider != "anthropic" || in.Model != "claude-b" || in.BaseURL != b.baseURL() || !in.HasAPIKey {
		t.Fatalf("after restart: %+v", in)
	}
	if _, err := r.ask(t); err != nil {
		t.Fatalf("call after restart: %v", err)
	}
	if got := b.requests(); got[len(got)-1].Auth != keyB {
		t.Error("the saved key was not used after the restart")
	}
	view, err := r.svc.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if view.Model.APIKeySource != SourceSettings || view.Model.Problem != "" {
		t.Errorf("view after restart = %+v", view.Model)
	}
	noSecret(t, "view", jsonOf(t, view))
	noSecret(t, "logs", r.logs.String())
	// The key lives in the credentials file (0600), not the store.
	raw, err := os.ReadFile(filepath.Join(r.home, "credentials.json"))
	if err != nil || !strings.Contains(string(raw), "PIXIE_MODEL_API_KEY") || !strings.Contains(string(raw), keyB) {
		t.Fatalf("credentials file: %v", err)
	}
	if fi, _ := os.Stat(filepath.Join(r.home, "credentials.json")); fi.Mode().Perm() != 0o600 {
		t.Errorf("credentials mode %v", fi.Mode().Perm())
	}
}

// TestFieldsFollowTheFile: a field the save did not carry follows pixie.yaml; DELETE of the
// section goes back to the file.
func TestFieldsFollowTheFile(t *testing.T) {
	a := newFake(t, false, keyFile, "OK")
	r := newRig(t, baseConfig(config.ModelConfig{Provider: "openai", BaseURL: a.baseURL(), Model: "file-model", APIKey: keyFile}), env{})
	ctx := context.Background()
	v, err := r.svc.SetModel(ctx, ModelInput{Model: ptr("page-model"), Timeout: ptr("45s")})
	if err != nil {
		t.Fatal(err)
	}
	if v.Model != "page-model" || v.Timeout != "45s" || v.BaseURL != a.baseURL() || v.APIKeySource != SourceFile ||
		v.Fields["model"].Source != SourceSettings || v.Fields["baseUrl"].Source != SourceFile {
		t.Errorf("view = %+v", v)
	}
	if _, err := r.ask(t); err != nil {
		t.Fatal(err)
	}
	if c := a.requests(); c[0].Model != "page-model" || c[0].Auth != keyFile {
		t.Errorf("call = %+v", c[0].Model)
	}
	v, err = r.svc.ResetModel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v.Model != "file-model" || v.Overridden || v.Fields["model"].Source != SourceFile || v.Timeout != "60s" {
		t.Errorf("after reset = %+v", v)
	}
	if r.model.Info().Model != "file-model" {
		t.Error("reset not applied to the running model")
	}
	r.restart()
	if r.model.Info().Model != "file-model" {
		t.Error("reset not kept over a restart")
	}
}

// TestEnvironmentWinsAndIsReadOnly: fields set by PIXIE_* variables are reported read-only and
// a change to them is refused naming the variable; repeating their value is accepted.
func TestEnvironmentWinsAndIsReadOnly(t *testing.T) {
	a := newFake(t, false, keyEnv, "OK")
	e := env{"PIXIE_MODEL_PROVIDER": "openai", "PIXIE_MODEL_BASE_URL": a.baseURL(), "PIXIE_MODEL_API_KEY": keyEnv,
		"PIXIE_JUDGE_ENGINE": "llm", "PIXIE_JUDGE_MODEL_PROVIDER": ""}
	cfg := baseConfig(config.ModelConfig{Provider: "openai", BaseURL: a.baseURL(), Model: "file-model", APIKey: keyEnv})
	r := newRig(t, cfg, e)
	ctx := context.Background()
	view, err := r.svc.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := view.Model
	for _, f := range []string{"provider", "baseUrl", "apiKey"} {
		if !m.Fields[f].ReadOnly || m.Fields[f].Source != SourceEnv {
			t.Errorf("field %s = %+v, want read-only from env", f, m.Fields[f])
		}
	}
	if m.Fields["model"].ReadOnly || m.Fields["model"].Env != "PIXIE_MODEL_MODEL" || m.APIKeySource != SourceEnv {
		t.Errorf("model view = %+v", m)
	}
	if f := view.Judge.Fields["engine"]; !f.ReadOnly || f.Env != "PIXIE_JUDGE_ENGINE" {
		t.Errorf("judge engine field = %+v", f)
	}
	if f := view.Judge.Model.Fields["provider"]; !f.ReadOnly || f.Env != "PIXIE_JUDGE_MODEL_PROVIDER" {
		t.Errorf("judge model provider field = %+v", f)
	}

	refused := []struct {
		name  string
		run   func() error
		field string
		env   string
	}{
		{"provider", func() error {
			_, err := r.svc.SetModel(ctx, ModelInput{Provider: ptr("anthropic"), Model: ptr("x")})
			return err
		}, "provider", "PIXIE_MODEL_PROVIDER"},
		{"base URL", func() error {
			_, err := r.svc.SetModel(ctx, ModelInput{BaseURL: ptr("http://127.0.0.1:1/v1")})
			return err
		}, "baseUrl", "PIXIE_MODEL_BASE_URL"},
		{"API key", func() error {
			_, err := r.svc.SetModel(ctx, ModelInput{APIKey: ptr(keyA)})
			return err
		}, "apiKey", "PIXIE_MODEL_API_KEY"},
		{"API key delete", func() error {
			_, err := r.svc.DeleteModelKey(ctx)
			return err
		}, "apiKey", "PIXIE_MODEL_API_KEY"},
		{"engine", func() error {
			_, err := r.svc.SetJudge(ctx, JudgeInput{Engine: ptr("jev")})
			return err
		}, "engine", "PIXIE_JUDGE_ENGINE"},
		{"judge model provider", func() error {
			_, err := r.svc.SetJudge(ctx, JudgeInput{Model: &ModelInput{Provider: ptr("openai"), Model: ptr("j")}})
			return err
		}, "model.provider", "PIXIE_JUDGE_MODEL_PROVIDER"},
		{"connection test draft", func() error {
			_, err := r.svc.TestModel(ctx, &ModelInput{Provider: ptr("anthropic")})
			return err
		}, "provider", "PIXIE_MODEL_PROVIDER"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run()
			if !errs.Is(err, errs.Conflict) {
				t.Fatalf("err = %v, want conflict", err)
			}
			d := fieldsOf(t, err)
			if d[0].Field != tt.field || !strings.Contains(d[0].Message, tt.env) || !strings.Contains(err.Error(), tt.env) {
				t.Errorf("details = %+v", d)
			}
			noSecret(t, "error", err.Error()+jsonOf(t, d))
		})
	}
	if _, err := os.Stat(filepath.Join(r.home, "credentials.json")); !os.IsNotExist(err) {
		t.Error("a refused key was written to the credentials file")
	}
	// Repeating the environment's values while changing another field is fine.
	v, err := r.svc.SetModel(ctx, ModelInput{Provider: ptr("openai"), BaseURL: ptr(a.baseURL()), Model: ptr("page-model")})
	if err != nil {
		t.Fatal(err)
	}
	if v.Model != "page-model" || v.Fields["provider"].Source != SourceEnv || v.Fields["model"].Source != SourceSettings {
		t.Errorf("view = %+v", v)
	}
	if _, err := r.ask(t); err != nil {
		t.Fatal(err)
	}
	if c := a.requests(); c[0].Auth != keyEnv || c[0].Model != "page-model" {
		t.Errorf("call used %q", c[0].Model)
	}
	noSecret(t, "logs", r.logs.String())
}

// TestInvalidInput: every bad field is refused with errs.Invalid and field details, at the
// limits' edges, and a refused change leaves the running model and the saved settings as they
// were.
func TestInvalidInput(t *testing.T) {
	a := newFake(t, false, "", "OK")
	r := newRig(t, baseConfig(config.ModelConfig{}), env{})
	ctx := context.Background()
	good := func() ModelInput {
		return ModelInput{Provider: ptr("openai"), BaseURL: ptr(a.baseURL()), Model: ptr("good")}
	}
	if _, err := r.svc.SetModel(ctx, good()); err != nil {
		t.Fatal(err)
	}
	with := func(f func(*ModelInput)) ModelInput { in := good(); f(&in); return in }
	tests := []struct {
		name  string
		in    ModelInput
		field string // "" = accepted
	}{
		{"unknown provider", with(func(in *ModelInput) { in.Provider = ptr("gemini") }), "provider"},
		{"provider without a model", with(func(in *ModelInput) { in.Model = ptr(" ") }), "model"},
		{"model name at the limit", with(func(in *ModelInput) { in.Model = ptr(strings.Repeat("m", MaxModelNameLength)) }), ""},
		{"model name over the limit", with(func(in *ModelInput) { in.Model = ptr(strings.Repeat("m", MaxModelNameLength+1)) }), "model"},
		{"relative base URL", with(func(in *ModelInput) { in.BaseURL = ptr("localhost:8000/v1") }), "baseUrl"},
		{"ftp base URL", with(func(in *ModelInput) { in.BaseURL = ptr("ftp://127.0.0.1/v1") }), "baseUrl"},
		{"base URL with credentials", with(func(in *ModelInput) { in.BaseURL = ptr("http://u:p@127.0.0.1/v1") }), "baseUrl"},
		{"base URL over the limit", with(func(in *ModelInput) { in.BaseURL = ptr("http://h/" + strings.Repeat("p", MaxBaseURLLength)) }), "baseUrl"},
		{"timeout not a duration", with(func(in *ModelInput) { in.Timeout = ptr("soon") }), "timeout"},
		{"negative timeout", with(func(in *ModelInput) { in.Timeout = ptr("-1s") }), "timeout"},
		{"timeout at the limit", with(func(in *ModelInput) { in.Timeout = ptr("10m") }), ""},
		{"timeout over the limit", with(func(in *ModelInput) { in.Timeout = ptr("10m1s") }), "timeout"},
		{"real OpenAI endpoint without a key", ModelInput{Provider: ptr("openai"), Model: ptr("gpt-4o-mini")}, "apiKey"},
		{"key with a space", with(func(in *ModelInput) { in.APIKey = ptr("sk-a b") }), "apiKey"},
		{"key at the limit", with(func(in *ModelInput) { in.APIKey = ptr(strings.Repeat("k", MaxAPIKeyLength)) }), ""},
		{"key over the limit", with(func(in *ModelInput) { in.APIKey = ptr(strings.Repeat("k", MaxAPIKeyLength+1)) }), "apiKey"},
		{"two bad fields", with(func(in *ModelInput) { in.Provider = ptr("x"); in.Timeout = ptr("-5s") }), "timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := r.model.Current()
			_, err := r.svc.SetModel(ctx, tt.in)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if _, err := r.svc.SetModel(ctx, good()); err != nil { // back to the good one
					t.Fatal(err)
				}
				return
			}
			if !errs.Is(err, errs.Invalid) {
				t.Fatalf("err = %v, want invalid", err)
			}
			found := false
			for _, d := range fieldsOf(t, err) {
				found = found || d.Field == tt.field
			}
			if !found {
				t.Errorf("details %+v do not name %s", fieldsOf(t, err), tt.field)
			}
			if r.model.Current() != before {
				t.Error("a refused change swapped the model")
			}
			r.restart()
			if in := r.model.Info(); in.Model != "good" {
				t.Errorf("a refused change was saved: %+v", in)
			}
		})
	}
	if k, _, _ := r.creds.Get(ctx, "PIXIE_MODEL_API_KEY"); k != strings.Repeat("k", MaxAPIKeyLength) {
		t.Error("the accepted long key was not kept (a refused one replaced it?)")
	}
}

// TestConnectionTest: one tiny real completion through the real provider.
func TestConnectionTest(t *testing.T) {
	oa := newFake(t, false, keyA, "OK")
	an := newFake(t, true, keyB, "OK")
	r := newRig(t, baseConfig(config.ModelConfig{}), env{})
	ctx := context.Background()

	res, err := r.svc.TestModel(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.Error == nil || res.Error.Code != string(errs.Unavailable) || !strings.Contains(res.Error.Message, "no Pixie model") {
		t.Errorf("no model: %+v", res)
	}
	if _, err := r.svc.SetModel(ctx, ModelInput{Provider: ptr("openai"), BaseURL: ptr(oa.baseURL()), Model: ptr("gpt-t"), APIKey: ptr(keyA)}); err != nil {
		t.Fatal(err)
	}
	res, err = r.svc.TestModel(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK || res.Model != "gpt-t-answered" || res.Provider != "openai" || res.Reply != "OK" || res.Error != nil || res.LatencyMs < 0 {
		t.Errorf("current model: %+v", res)
	}
	if c := oa.requests(); len(c) != 1 || c[0].User != TestPrompt {
		t.Errorf("test call = %+v", c)
	}

	tests := []struct {
		name    string
		draft   ModelInput
		ok      bool
		code    string
		message string
	}{
		{"Anthropic draft", ModelInput{Provider: ptr("anthropic"), BaseURL: ptr(an.baseURL()), Model: ptr("claude-t"), APIKey: ptr(keyB)}, true, "", ""},
		{"wrong key", ModelInput{Provider: ptr("openai"), BaseURL: ptr(oa.baseURL()), Model: ptr("gpt-t"), APIKey: ptr(keyB)}, false,
			string(errs.Upstream), "model authentication failed (HTTP 401"},
		{"Anthropic without the key", ModelInput{Provider: ptr("anthropic"), BaseURL: ptr(an.baseURL()), Model: ptr("claude-t"), APIKey: ptr(keyA)}, false,
			string(errs.Upstream), "model authentication failed (HTTP 401"},
		{"unreachable", ModelInput{Provider: ptr("openai"), BaseURL: ptr("http://127.0.0.1:1/v1"), Model: ptr("gpt-t")}, false,
			string(errs.Unavailable), "model endpoint unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := r.svc.TestModel(ctx, &tt.draft)
			if err != nil {
				t.Fatal(err)
			}
			if res.OK != tt.ok {
				t.Fatalf("result = %+v", res)
			}
			if !tt.ok && (res.Error == nil || res.Error.Code != tt.code || !strings.Contains(res.Error.Message, tt.message)) {
				t.Errorf("error = %+v, want %s %q", res.Error, tt.code, tt.message)
			}
			if tt.ok && res.Model != "claude-answered" {
				t.Errorf("model = %q", res.Model)
			}
			noSecret(t, "result", jsonOf(t, res))
		})
	}
	// A draft is not saved: the running model is still the OpenAI one.
	if r.model.Info().Model != "gpt-t" {
		t.Error("a connection test changed the model")
	}
	if k, _, _ := r.creds.Get(ctx, "PIXIE_MODEL_API_KEY"); k != keyA {
		t.Error("a connection test changed the saved key")
	}
	if _, err := r.svc.TestModel(ctx, &ModelInput{Provider: ptr("gemini")}); !errs.Is(err, errs.Invalid) {
		t.Errorf("invalid draft: err = %v", err)
	}
	noSecret(t, "logs", r.logs.String())
}

// TestDeleteKey: removing the saved key brings back the file's key; it is refused when the
// model would have none it needs.
func TestDeleteKey(t *testing.T) {
	a := newFake(t, false, "", "OK")
	r := newRig(t, baseConfig(config.ModelConfig{Provider: "openai", BaseURL: a.baseURL(), Model: "m", APIKey: keyFile}), env{})
	ctx := context.Background()
	if _, err := r.svc.SetModel(ctx, ModelInput{APIKey: ptr(keyA)}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ask(t); err != nil {
		t.Fatal(err)
	}
	v, err := r.svc.DeleteModelKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v.APIKeySource != SourceFile || !v.HasAPIKey {
		t.Errorf("view = %+v", v)
	}
	if _, err := r.ask(t); err != nil {
		t.Fatal(err)
	}
	c := a.requests()
	if c[0].Auth != keyA || c[1].Auth != keyFile {
		t.Errorf("keys used: %q then %q", c[0].Auth[:8], c[1].Auth[:8])
	}

	// Anthropic's real endpoint needs a key: without the saved one there is none.
	r2 := newRig(t, baseConfig(config.ModelConfig{}), env{})
	if _, err := r2.svc.SetModel(ctx, ModelInput{Provider: ptr("anthropic"), Model: ptr("claude"), APIKey: ptr(keyB)}); err != nil {
		t.Fatal(err)
	}
	_, err = r2.svc.DeleteModelKey(ctx)
	if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "without the saved API key") {
		t.Fatalf("err = %v", err)
	}
	if k, ok, _ := r2.creds.Get(ctx, "PIXIE_MODEL_API_KEY"); !ok || k != keyB {
		t.Error("a refused delete removed the key")
	}
	if !r2.model.Info().HasAPIKey {
		t.Error("a refused delete changed the model")
	}
}

// TestJudgeSettings: engine, system prompt and judge model apply to the next judgment.
func TestJudgeSettings(t *testing.T) {
	pixie := newFake(t, false, "", `{"yes": 0.9, "no": 0.1}`)
	jm := newFake(t, true, keyJudge, `{"yes": 0.3, "no": 0.7}`)
	r := newRig(t, baseConfig(config.ModelConfig{Provider: "openai", BaseURL: pixie.baseURL(), Model: "pixie"}), env{})
	ctx := context.Background()
	view, err := r.svc.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	j := view.Judge
	if j.Engine != "llm" || !j.UsesPixieModel || j.SystemPrompt != "" || j.DefaultSystemPrompt != judge.DefaultSystemPrompt || j.JevModel != "jev-latest" || j.JevTimeout != "30s" {
		t.Errorf("judge view = %+v", j)
	}

	jv, err := r.svc.SetJudge(ctx, JudgeInput{SystemPrompt: ptr("Judge strictly."),
		Model: &ModelInput{Provider: ptr("anthropic"), BaseURL: ptr(jm.baseURL()), Model: ptr("claude-judge"), APIKey: ptr(keyJudge)}})
	if err != nil {
		t.Fatal(err)
	}
	if jv.UsesPixieModel || jv.Model.Provider != "anthropic" || !jv.Model.HasAPIKey || jv.Model.APIKeySource != SourceSettings ||
		jv.SystemPrompt != "Judge strictly." || jv.Fields["systemPrompt"].Source != SourceSettings || !jv.Model.Configured {
		t.Errorf("judge view = %+v", jv)
	}
	resp, err := r.judge.Judge(ctx, judgeReq())
	if err != nil {
		t.Fatal(err)
	}
	if y := *resp.Answers["ok"].Yes; y < 0.29 || y > 0.31 {
		t.Errorf("yes = %v, want the judge model's 0.3", y)
	}
	if c := jm.requests(); len(c) != 1 || c[0].System != "Judge strictly." || c[0].Auth != keyJudge {
		t.Errorf("judge model calls = %+v", len(c))
	}
	if len(pixie.requests()) != 0 {
		t.Error("the Pixie model was asked")
	}

	// Restart keeps it; then the built-in prompt and the Pixie model again.
	r.restart()
	if in := r.judge.Info(); in.UsesPixieModel || !in.CustomSystemPrompt {
		t.Fatalf("after restart: %+v", in)
	}
	jv, err = r.svc.SetJudge(ctx, JudgeInput{SystemPrompt: ptr("  "), Model: &ModelInput{Provider: ptr("")}})
	if err != nil {
		t.Fatal(err)
	}
	if !jv.UsesPixieModel || jv.SystemPrompt != "" {
		t.Errorf("view = %+v", jv)
	}
	if _, err := r.judge.Judge(ctx, judgeReq()); err != nil {
		t.Fatal(err)
	}
	if c := pixie.requests(); len(c) == 0 || c[0].System != judge.DefaultSystemPrompt {
		t.Error("the built-in prompt and the Pixie model were not used")
	}

	bad := []struct {
		name  string
		in    JudgeInput
		field string
	}{
		{"unknown engine", JudgeInput{Engine: ptr("oracle")}, "engine"},
		{"relative Jev URL", JudgeInput{JevBaseURL: ptr("api.typesafe.ai")}, "jevBaseUrl"},
		{"Jev model with a space", JudgeInput{JevModel: ptr("jev latest")}, "jevModel"},
		{"Jev timeout over the limit", JudgeInput{JevTimeout: ptr("11m")}, "jevTimeout"},
		{"system prompt over the limit", JudgeInput{SystemPrompt: ptr(strings.Repeat("p", judge.MaxSystemPromptLength+1))}, "systemPrompt"},
		{"judge model provider", JudgeInput{Model: &ModelInput{Provider: ptr("gemini"), Model: ptr("g")}}, "model.provider"},
		{"judge model without a name", JudgeInput{Model: &ModelInput{Provider: ptr("openai"), BaseURL: ptr(pixie.baseURL())}}, "model.model"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.svc.SetJudge(ctx, tt.in)
			if !errs.Is(err, errs.Invalid) {
				t.Fatalf("err = %v, want invalid", err)
			}
			if d := fieldsOf(t, err); d[0].Field != tt.field {
				t.Errorf("details = %+v, want field %s", d, tt.field)
			}
			if in := r.judge.Info(); in.Engine != "llm" || !in.UsesPixieModel {
				t.Errorf("a refused change reconfigured the engine: %+v", in)
			}
		})
	}

	jv, err = r.svc.SetJudge(ctx, JudgeInput{Engine: ptr("JEV"), JevBaseURL: ptr("http://127.0.0.1:9/"), JevModel: ptr("jev-1.13.0"), JevTimeout: ptr("5s")})
	if err != nil {
		t.Fatal(err)
	}
	if in := r.judge.Info(); in.Engine != "jev" || in.Jev.BaseURL != "http://127.0.0.1:9" || in.Jev.Model != "jev-1.13.0" || in.Jev.Timeout != "5s" {
		t.Errorf("engine = %+v", in)
	}
	if jv.Engine != "jev" || jv.JevTimeout != "5s" || jv.JevKey.Configured || jv.Problem != "" {
		t.Errorf("view = %+v", jv)
	}
	jv, err = r.svc.ResetJudge(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if jv.Engine != "llm" || jv.Overridden || r.judge.Info().Engine != "llm" {
		t.Errorf("after reset = %+v", jv)
	}
	// The judge model's saved key is kept by the reset and can be removed on its own.
	if _, ok, _ := r.creds.Get(ctx, "PIXIE_JUDGE_MODEL_API_KEY"); !ok {
		t.Error("reset removed the judge model key")
	}
	if _, err := r.svc.DeleteJudgeModelKey(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := r.creds.Get(ctx, "PIXIE_JUDGE_MODEL_API_KEY"); ok {
		t.Error("the judge model key is still saved")
	}
	noSecret(t, "logs", r.logs.String())
}

// TestFailedSaveRestoresTheKey: when the store write fails, the credentials file gets its old
// key back and the running model is unchanged.
func TestFailedSaveRestoresTheKey(t *testing.T) {
	a := newFake(t, false, "", "OK")
	r := newRig(t, baseConfig(config.ModelConfig{}), env{})
	ctx := context.Background()
	if _, err := r.svc.SetModel(ctx, ModelInput{Provider: ptr("openai"), BaseURL: ptr(a.baseURL()), Model: ptr("m"), APIKey: ptr(keyA)}); err != nil {
		t.Fatal(err)
	}
	before := r.model.Current()
	if err := r.st.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := r.svc.SetModel(ctx, ModelInput{Provider: ptr("openai"), BaseURL: ptr(a.baseURL()), Model: ptr("other"), APIKey: ptr(keyB)})
	if !errs.Is(err, errs.Internal) {
		t.Fatalf("err = %v, want internal", err)
	}
	if k, _, _ := r.creds.Get(ctx, "PIXIE_MODEL_API_KEY"); k != keyA {
		t.Error("the previous key was not restored")
	}
	if r.model.Current() != before {
		t.Error("the model was swapped although the save failed")
	}
	noSecret(t, "error", err.Error())
}

// TestSavedSettingsThatNoLongerWork: a saved model whose key has gone is reported and the file
// configuration is used.
func TestSavedSettingsThatNoLongerWork(t *testing.T) {
	a := newFake(t, false, "", "OK")
	r := newRig(t, baseConfig(config.ModelConfig{Provider: "openai", BaseURL: a.baseURL(), Model: "file-model"}), env{})
	ctx := context.Background()
	if _, err := r.svc.SetModel(ctx, ModelInput{Provider: ptr("anthropic"), BaseURL: ptr(""), Model: ptr("claude"), APIKey: ptr(keyB)}); err != nil {
		t.Fatal(err)
	}
	if err := r.creds.Delete(ctx, "PIXIE_MODEL_API_KEY"); err != nil {
		t.Fatal(err)
	}
	r.restart()
	view, err := r.svc.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(view.Model.Problem, "were not applied") || r.model.Info().Model != "file-model" {
		t.Errorf("problem %q, model %+v", view.Model.Problem, r.model.Info())
	}
	// Saving a working model clears the problem.
	v, err := r.svc.SetModel(ctx, ModelInput{Model: ptr("fixed")})
	if err != nil {
		t.Fatal(err)
	}
	if v.Problem != "" || r.model.Info().Model != "fixed" {
		t.Errorf("view = %+v", v)
	}

	// The same for the judge model: its saved key removed, the engine goes back to the file
	// (the Pixie model) and says why.
	if _, err := r.svc.SetJudge(ctx, JudgeInput{SystemPrompt: ptr("Strict."), Model: &ModelInput{Provider: ptr("anthropic"), Model: ptr("claude-j"), APIKey: ptr(keyJudge)}}); err != nil {
		t.Fatal(err)
	}
	if err := r.creds.Delete(ctx, "PIXIE_JUDGE_MODEL_API_KEY"); err != nil {
		t.Fatal(err)
	}
	r.restart()
	view, err = r.svc.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(view.Judge.Problem, "were not applied") || !r.judge.Info().UsesPixieModel || r.judge.Info().CustomSystemPrompt {
		t.Errorf("judge problem %q, engine %+v", view.Judge.Problem, r.judge.Info())
	}
	if view.Model.Problem != "" || r.model.Info().Model != "fixed" {
		t.Errorf("the model section was affected: %+v", view.Model)
	}
}

// TestSecretsNeverShown greps every view, error and log line of a session for the keys.
func TestSecretsNeverShown(t *testing.T) {
	a := newFake(t, false, keyA, "OK")
	r := newRig(t, baseConfig(config.ModelConfig{Provider: "openai", BaseURL: a.baseURL(), Model: "m", APIKey: keyFile}), env{})
	ctx := context.Background()
	var out []string
	add := func(v any, err error) {
		out = append(out, jsonOf(t, v))
		if err != nil {
			out = append(out, err.Error(), jsonOf(t, detailsOf(err)))
		}
	}
	add(r.svc.SetModel(ctx, ModelInput{APIKey: ptr(keyA)}))
	add(r.svc.Get(ctx))
	add(r.svc.TestModel(ctx, nil))
	add(r.svc.TestModel(ctx, &ModelInput{APIKey: ptr(keyB)})) // 401 quoting the key it got
	add(r.svc.SetModel(ctx, ModelInput{Provider: ptr("x"), APIKey: ptr(keyB)}))
	add(r.svc.SetJudge(ctx, JudgeInput{Model: &ModelInput{Provider: ptr("openai"), BaseURL: ptr(a.baseURL()), Model: ptr("j"), APIKey: ptr(keyJudge)}}))
	add(r.svc.Get(ctx))
	add(r.svc.DeleteModelKey(ctx))
	for i, s := range out {
		noSecret(t, "output "+string(rune('0'+i)), s)
	}
	noSecret(t, "logs", r.logs.String())
	if !strings.Contains(r.logs.String(), "settings: Pixie model changed") {
		t.Error("no change was logged")
	}
}

func TestDurations(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{"", 0, false}, {"0", 0, false}, {" 45s ", 45 * time.Second, false}, {"2m", 2 * time.Minute, false},
		{"1.5s", 1500 * time.Millisecond, false}, {"-1s", 0, true}, {"5", 0, true}, {"soon", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			d, err := parseDuration(tt.in)
			if (err != nil) != tt.bad || d != tt.want {
				t.Errorf("parseDuration(%q) = %v, %v", tt.in, d, err)
			}
		})
	}
	if fmtDuration(60*time.Second) != "60s" || fmtDuration(1500*time.Millisecond) != "1.5s" || fmtDuration(0) != "" {
		t.Error("fmtDuration")
	}
}

// TestConcurrentChanges saves, reads and calls at once (go test -race): every call is answered
// by one of the saved models, never a half-applied one.
func TestConcurrentChanges(t *testing.T) {
	a := newFake(t, false, "", "OK")
	r := newRig(t, baseConfig(config.ModelConfig{Provider: "openai", BaseURL: a.baseURL(), Model: "m0"}), env{})
	ctx := context.Background()
	done := make(chan struct{})
	errc := make(chan error, 3)
	go func() {
		defer close(done)
		for i := range 6 {
			if _, err := r.svc.SetModel(ctx, ModelInput{Model: ptr("m" + string(rune('1'+i)))}); err != nil {
				errc <- err
				return
			}
		}
	}()
	for range 2 {
		go func() {
			for {
				select {
				case <-done:
					errc <- nil
					return
				default:
				}
				if _, err := r.svc.Get(ctx); err != nil {
					errc <- err
					return
				}
				if _, err := r.ask(t); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range a.requests() {
		if len(c.Model) != 2 || c.Model[0] != 'm' {
			t.Fatalf("a call went to %q", c.Model)
		}
	}
	if r.model.Info().Model != "m6" {
		t.Errorf("final model %q", r.model.Info().Model)
	}
}

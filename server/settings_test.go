package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/credentials"
	"github.com/pixie-dev/pixie/internal/judge"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/settings"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
)

const (
	settingsKey      = "sk-route-SECRET-1a2b3c4d"
	settingsWrongKey = "sk-route-WRONG-9z8y7x6w"
	settingsEnvKey   = "sk-route-ENV-5e6f7a8b"
)

// chatFake speaks OpenAI chat.completions (path /v1/chat/completions) or Anthropic Messages
// (/v1/messages), answering 401 to any other key than key.
type chatFake struct {
	srv       *httptest.Server
	anthropic bool
	key       string
	mu        sync.Mutex
	auths     []string
}

func newChatFake(t *testing.T, anthropic bool, key string) *chatFake {
	f := &chatFake{anthropic: anthropic, key: key}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, got := "/v1/chat/completions", strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if anthropic {
			path, got = "/v1/messages", r.Header.Get("X-Api-Key")
		}
		if r.Method != http.MethodPost || r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		var body struct {
			Model string `json:"model"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		f.auths = append(f.auths, got)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if got != f.key {
			w.WriteHeader(http.StatusUnauthorized)
			if anthropic {
				_, _ = io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
			} else {
				fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, got)
			}
			return
		}
		if anthropic {
			fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":"OK"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":8,"output_tokens":1}}`, body.Model)
			return
		}
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1717000000,"model":%q,"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"{\"yes\": 0.75, \"no\": 0.25}"}}],"usage":{"prompt_tokens":8,"completion_tokens":1,"total_tokens":9}}`, body.Model)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *chatFake) url() string {
	if f.anthropic {
		return f.srv.URL
	}
	return f.srv.URL + "/v1"
}

type settingsEnv struct {
	ts    *httptest.Server
	logs  *bytes.Buffer
	model *model.Swappable
	judge *judge.Service
}

// newSettingsServer serves the settings and judge routes over a real Badger store, with env as
// the process environment.
func newSettingsServer(t *testing.T, cfg config.Config, env map[string]string) *settingsEnv {
	t.Helper()
	home := t.TempDir()
	st, err := badgerstore.Open(context.Background(), badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &settingsEnv{logs: &bytes.Buffer{}, model: model.NewSwappable(nil)}
	log := slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	creds := credentials.Open(home)
	e.judge, err = judge.New(context.Background(), judge.Config{Logger: log, PixieModel: e.model, Keys: judge.NewKeyStore(judge.KeyStoreOptions{
		Getenv: func(n string) string { return env[n] }, Secrets: creds})})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := settings.New(context.Background(), settings.Config{Config: cfg, Store: st, Secrets: creds, Model: e.model,
		Judge: e.judge, Logger: log, LookupEnv: func(n string) (string, bool) { v, ok := env[n]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	s := serverFor(t, Config{Token: testToken, Logger: log}, Deps{Store: st, Settings: svc, Judge: e.judge})
	e.ts = httptest.NewServer(s.Handler())
	t.Cleanup(e.ts.Close)
	return e
}

// call sends a JSON request and decodes the answer into out (when not nil); it returns the
// status and the raw body.
func (e *settingsEnv) call(t *testing.T, method, path, body string, out any) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, e.ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	return resp.StatusCode, string(raw)
}

type fieldErrBody struct {
	Error struct {
		Code    string                `json:"code"`
		Message string                `json:"message"`
		Details []settings.FieldError `json:"details"`
	} `json:"error"`
}

func TestSettingsRoutes(t *testing.T) {
	oa := newChatFake(t, false, settingsKey)
	an := newChatFake(t, true, settingsKey)
	e := newSettingsServer(t, config.Defaults("/unused"), map[string]string{})
	var all strings.Builder // every response body, grepped for the key at the end

	var v settings.View
	st, raw := e.call(t, "GET", "/v1/settings", "", &v)
	all.WriteString(raw)
	if st != 200 || v.Model.Configured || v.Judge == nil || v.Judge.DefaultSystemPrompt == "" || v.Model.Fields["provider"].Env != "PIXIE_MODEL_PROVIDER" {
		t.Fatalf("GET /v1/settings = %d %s", st, raw)
	}

	// Save a model: the next judgment uses it, with no restart.
	var mv settings.ModelView
	st, raw = e.call(t, "PUT", "/v1/settings/model",
		fmt.Sprintf(`{"provider":"openai","baseUrl":%q,"model":"gpt-route","timeout":"20s","apiKey":%q}`, oa.url(), settingsKey), &mv)
	all.WriteString(raw)
	if st != 200 || mv.Model != "gpt-route" || mv.Timeout != "20s" || !mv.HasAPIKey || mv.APIKeySource != "settings" || !mv.Configured {
		t.Fatalf("PUT model = %d %s", st, raw)
	}
	var jr struct {
		Engine  string `json:"engine"`
		Answers map[string]struct {
			Yes *float64 `json:"yes"`
		} `json:"answers"`
	}
	st, raw = e.call(t, "POST", "/v1/judge", `{"state":"tests passed","questions":{"ok":{"type":"noul","instructions":"Did the tests pass?"}}}`, &jr)
	if st != 200 || jr.Answers["ok"].Yes == nil || *jr.Answers["ok"].Yes != 0.75 {
		t.Fatalf("POST /v1/judge after the change = %d %s", st, raw)
	}

	// The connection test: current model, Anthropic draft, a refused key.
	var tr settings.TestResult
	st, raw = e.call(t, "POST", "/v1/settings/model/test", "", &tr)
	all.WriteString(raw)
	if st != 200 || !tr.OK || tr.Model != "gpt-route" || tr.Provider != "openai" || tr.Error != nil {
		t.Fatalf("test current = %d %s", st, raw)
	}
	tr = settings.TestResult{}
	st, raw = e.call(t, "POST", "/v1/settings/model/test", fmt.Sprintf(`{"provider":"anthropic","baseUrl":%q,"model":"claude-route"}`, an.url()), &tr)
	all.WriteString(raw)
	if st != 200 || !tr.OK || tr.Model != "claude-route" || tr.Provider != "anthropic" {
		t.Fatalf("test Anthropic draft = %d %s", st, raw)
	}
	tr = settings.TestResult{}
	st, raw = e.call(t, "POST", "/v1/settings/model/test",
		fmt.Sprintf(`{"provider":"openai","baseUrl":%q,"model":"gpt-route","apiKey":%q}`, oa.url(), settingsWrongKey), &tr)
	all.WriteString(raw)
	if st != 200 || tr.OK || tr.Error == nil || tr.Error.Code != "upstream" || !strings.Contains(tr.Error.Message, "model authentication failed (HTTP 401 from openai)") {
		t.Fatalf("test refused key = %d %s", st, raw)
	}
	if strings.Contains(raw, settingsWrongKey) {
		t.Fatal("the refused key is in the test result")
	}

	// Refusals, each with field details.
	refusals := []struct {
		name, method, path, body string
		status                   int
		code, field              string
	}{
		{"unknown provider", "PUT", "/v1/settings/model", `{"provider":"gemini","model":"g"}`, 400, "invalid", "provider"},
		{"bad timeout", "PUT", "/v1/settings/model", `{"provider":"openai","baseUrl":"http://127.0.0.1:1/v1","model":"m","timeout":"soon"}`, 400, "invalid", "timeout"},
		{"unknown engine", "PUT", "/v1/settings/judge", `{"engine":"oracle"}`, 400, "invalid", "engine"},
		{"bad judge model", "PUT", "/v1/settings/judge", `{"model":{"provider":"nope","model":"x"}}`, 400, "invalid", "model.provider"},
		{"invalid test draft", "POST", "/v1/settings/model/test", `{"provider":"gemini"}`, 400, "invalid", "provider"},
	}
	for _, rr := range refusals {
		t.Run(rr.name, func(t *testing.T) {
			var eb fieldErrBody
			st, raw := e.call(t, rr.method, rr.path, rr.body, &eb)
			if st != rr.status || eb.Error.Code != rr.code || len(eb.Error.Details) == 0 || eb.Error.Details[0].Field != rr.field {
				t.Fatalf("= %d %s", st, raw)
			}
		})
	}
	for _, body := range []string{`{"provider":"openai","colour":"red"}`, `not json`, `{"apiKey":42}`} {
		var eb fieldErrBody
		if st, raw := e.call(t, "PUT", "/v1/settings/model", body, &eb); st != 400 || eb.Error.Code != "invalid" {
			t.Errorf("body %s: %d %s", body, st, raw)
		}
	}
	if e.model.Info().Model != "gpt-route" {
		t.Error("a refused change altered the model")
	}

	// The judge section; then remove the saved model key (a custom base URL may run without a
	// key, so the removal is accepted), and reset both sections to the file.
	var jv settings.JudgeView
	st, raw = e.call(t, "PUT", "/v1/settings/judge", `{"engine":"llm","systemPrompt":"Be strict.","jevModel":"jev-1.13.0"}`, &jv)
	all.WriteString(raw)
	if st != 200 || jv.SystemPrompt != "Be strict." || !jv.UsesPixieModel || jv.JevModel != "jev-1.13.0" || jv.Fields["systemPrompt"].Source != "settings" {
		t.Fatalf("PUT judge = %d %s", st, raw)
	}
	st, raw = e.call(t, "DELETE", "/v1/settings/model/api-key", "", &mv)
	all.WriteString(raw)
	if st != 200 || mv.HasAPIKey {
		t.Fatalf("DELETE key = %d %s", st, raw)
	}
	st, raw = e.call(t, "DELETE", "/v1/settings/judge", "", &jv)
	if st != 200 || jv.SystemPrompt != "" || jv.Overridden {
		t.Fatalf("DELETE judge = %d %s", st, raw)
	}
	st, raw = e.call(t, "DELETE", "/v1/settings/model", "", &mv)
	if st != 200 || mv.Configured || mv.Overridden {
		t.Fatalf("DELETE model = %d %s", st, raw)
	}
	if st, raw = e.call(t, "GET", "/v1/settings", "", nil); st != 200 {
		t.Fatalf("GET settings = %d %s", st, raw)
	}
	all.WriteString(raw)

	if strings.Contains(all.String(), settingsKey) || strings.Contains(all.String(), settingsWrongKey) {
		t.Fatal("an API key appeared in a response")
	}
	if strings.Contains(e.logs.String(), settingsKey) || strings.Contains(e.logs.String(), settingsWrongKey) {
		t.Fatal("an API key appeared in the logs")
	}
}

func TestSettingsRoutesEnvironmentReadOnly(t *testing.T) {
	oa := newChatFake(t, false, settingsEnvKey)
	cfg := config.Defaults("/unused")
	cfg.Model = config.ModelConfig{Provider: "openai", BaseURL: oa.url(), Model: "env-model", APIKey: settingsEnvKey, Timeout: cfg.Model.Timeout}
	env := map[string]string{"PIXIE_MODEL_PROVIDER": "openai", "PIXIE_MODEL_MODEL": "env-model", "PIXIE_MODEL_API_KEY": settingsEnvKey}
	e := newSettingsServer(t, cfg, env)

	var v settings.View
	st, raw := e.call(t, "GET", "/v1/settings", "", &v)
	if st != 200 || !v.Model.Fields["provider"].ReadOnly || !v.Model.Fields["model"].ReadOnly || !v.Model.Fields["apiKey"].ReadOnly ||
		v.Model.Fields["baseUrl"].ReadOnly || v.Model.APIKeySource != "env" {
		t.Fatalf("GET = %d %s", st, raw)
	}
	var eb fieldErrBody
	st, raw = e.call(t, "PUT", "/v1/settings/model", `{"provider":"openai","model":"other"}`, &eb)
	if st != 409 || eb.Error.Code != "conflict" || eb.Error.Details[0].Field != "model" || !strings.Contains(eb.Error.Message, "PIXIE_MODEL_MODEL") {
		t.Fatalf("PUT env field = %d %s", st, raw)
	}
	st, raw = e.call(t, "DELETE", "/v1/settings/model/api-key", "", &eb)
	if st != 409 || !strings.Contains(eb.Error.Message, "PIXIE_MODEL_API_KEY") {
		t.Fatalf("DELETE env key = %d %s", st, raw)
	}
	// The connection test uses the environment's key.
	var tr settings.TestResult
	if st, raw := e.call(t, "POST", "/v1/settings/model/test", `{}`, &tr); st != 200 || !tr.OK {
		t.Fatalf("test = %d %s", st, raw)
	}
	if strings.Contains(raw, settingsEnvKey) || strings.Contains(e.logs.String(), settingsEnvKey) {
		t.Fatal("the environment's key leaked")
	}
}

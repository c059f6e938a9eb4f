package judge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/credentials"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// envKeys is a KeyStore whose environment holds key.
func envKeys(key string) *KeyStore {
	return NewKeyStore(KeyStoreOptions{Getenv: func(n string) string {
		if n == JevKeyName {
			return key
		}
		return ""
	}})
}

// jevServer speaks System One: POST /v1/systemone.
func jevServer(t *testing.T, reply func(body map[string]any) (int, string)) *provider {
	return newProvider(t, "/v1/systemone", reply)
}

const jevAnswers = `{
  "model": "jev-1.13.0",
  "answers": {
    "is_billing": {"type": "noul", "noul": 0.95},
    "team": {"type": "choice", "choice": "billing", "confidence": 0.81,
             "probabilities": {"shipping": 0.02, "billing": 0.88, "returns": 0.1}},
    "urgency": {"type": "score", "score": 1.7, "confidence": 0.6,
                "legend": {"0": "low", "1": "normal", "2": "high"},
                "probabilities": {"0": 0.05, "1": 0.2, "2": 0.75}}
  },
  "usage": {"input_tokens": 318, "output_tokens": 34}
}`

func jevRequestAll() abi.JudgeRequest {
	return abi.JudgeRequest{
		State: `{"message": "My card was charged twice.", "channel": "support"}`,
		Questions: map[string]abi.Question{
			"is_billing": {Type: abi.JudgeBool, Instructions: "Is this about billing?", Criteria: abi.Criteria{True: "a charge or refund"}},
			"team": {Type: abi.JudgeSelect, Instructions: "Which team?", Criteria: abi.Criteria{Options: []abi.Option{
				{Name: "shipping", Description: "delivery"}, {Name: "billing", Description: "charges"}, {Name: "returns", Description: "exchanges"}}}},
			"urgency": {Type: abi.JudgeScore, Instructions: "How urgent?", Criteria: abi.Criteria{Levels: []string{"low", "normal", "high"}}},
		},
	}
}

func TestJevRequestAndAnswers(t *testing.T) {
	srv := jevServer(t, func(map[string]any) (int, string) { return 200, jevAnswers })
	s := newService(t, Config{Keys: envKeys(jevKey), Engine: "jev", Jev: JevConfig{BaseURL: srv.srv.URL, Model: "jev-1.13.0"}})
	resp, err := s.Judge(context.Background(), jevRequestAll())
	if err != nil {
		t.Fatal(err)
	}
	// The request on the wire.
	req := srv.requests()[0]
	if got := req.Header.Get("Authorization"); got != "Bearer "+jevKey {
		t.Errorf("Authorization = %q", got)
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	b := req.Body
	if b["model"] != "jev-1.13.0" {
		t.Errorf("model = %v", b["model"])
	}
	if st, ok := b["state"].(map[string]any); !ok || st["channel"] != "support" {
		t.Errorf("a JSON state is not sent as structured data: %v", b["state"])
	}
	qs := b["questions"].(map[string]any)
	if c := qs["is_billing"].(map[string]any); c["type"] != "noul" || fmt.Sprint(c["criteria"]) != "map[true:a charge or refund]" {
		t.Errorf("noul = %v", c)
	}
	if c := qs["urgency"].(map[string]any); c["type"] != "score" || fmt.Sprint(c["criteria"]) != "[low normal high]" {
		t.Errorf("score = %v", c)
	}
	// Choice criteria keep the option order on the wire.
	if !strings.Contains(req.Raw, `"criteria":{"shipping":"delivery","billing":"charges","returns":"exchanges"}`) {
		t.Errorf("choice criteria order lost: %s", req.Raw)
	}

	// The answers.
	if resp.Engine != EngineJev || resp.Usage != (abi.Usage{InputTokens: 318, OutputTokens: 34}) {
		t.Errorf("engine %q usage %+v", resp.Engine, resp.Usage)
	}
	a := resp.Answers["is_billing"]
	if a.Type != abi.JudgeBool || a.Label != "yes" || !near(*a.Yes, 0.95) || !near(a.Probabilities["no"], 0.05) || !near(a.Confidence, entropyConfidence([]float64{0.95, 0.05})) {
		t.Errorf("noul answer = %+v", a)
	}
	a = resp.Answers["team"]
	if a.Label != "billing" || !near(a.Probabilities["returns"], 0.1) || !near(a.Confidence, round6(entropyConfidence([]float64{0.02, 0.88, 0.1}))) {
		t.Errorf("choice answer = %+v", a)
	}
	a = resp.Answers["urgency"]
	if a.Label != "2" || !near(*a.Score, 1.7) || !near(a.Probabilities["2"], 0.75) {
		t.Errorf("score answer = %+v", a)
	}
}

func TestJevPlainState(t *testing.T) {
	c := &jevClient{model: "jev-latest"}
	b, _ := c.wireRequest(abi.JudgeRequest{State: "plain text", Questions: map[string]abi.Question{"q": boolQ("x")}})
	if !strings.Contains(string(b), `"state":"plain text"`) || strings.Contains(string(b), "criteria") {
		t.Errorf("wire = %s", b)
	}
}

func TestJevErrors(t *testing.T) {
	tests := []struct {
		name    string
		keys    *KeyStore
		status  int
		body    string
		slow    bool
		code    errs.Code
		message string
		detail  string
	}{
		{name: "no key", keys: envKeys(""), code: errs.Unavailable, message: "Jev API key is not configured"},
		{name: "nil key store", keys: nil, code: errs.Unavailable, message: "Jev API key is not configured"},
		{name: "401 wrong key", keys: envKeys(jevKey), status: 401, body: `{"detail": "Invalid API key ` + jevKey + `"}`, code: errs.Upstream, message: "Jev request failed: HTTP 401"},
		{name: "422 malformed question", keys: envKeys(jevKey), status: 422, body: `{"detail": [{"loc": ["body", "questions", "q", "criteria"], "msg": "field required; key ` + jevKey + `"}]}`,
			code: errs.Upstream, message: "Jev request failed: HTTP 422", detail: "field required"},
		{name: "500", keys: envKeys(jevKey), status: 500, body: `{"error": {"message": "internal"}}`, code: errs.Upstream, message: "Jev request failed: HTTP 500"},
		{name: "timeout", keys: envKeys(jevKey), slow: true, code: errs.Timeout, message: "Jev request timed out"},
		{name: "not JSON", keys: envKeys(jevKey), status: 200, body: `<html>`, code: errs.Upstream, message: "not valid JSON"},
		{name: "answer missing", keys: envKeys(jevKey), status: 200, body: `{"model":"jev-1","answers":{},"usage":{"input_tokens":1,"output_tokens":1}}`, code: errs.Upstream, message: `question "q" is not usable: missing`},
		{name: "noul out of range", keys: envKeys(jevKey), status: 200, body: `{"answers":{"q":{"type":"noul","noul":1.5}}}`, code: errs.Upstream, message: "outside 0..1"},
		{name: "wrong type", keys: envKeys(jevKey), status: 200, body: `{"answers":{"q":{"type":"score","score":1}}}`, code: errs.Upstream, message: "type \"score\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stop := make(chan struct{})
			srv := jevServer(t, func(map[string]any) (int, string) {
				if tt.slow {
					<-stop
				}
				return tt.status, tt.body
			})
			t.Cleanup(func() { close(stop) }) // before the server closes (cleanups are LIFO)
			var logs bytes.Buffer
			s := newService(t, Config{Keys: tt.keys, Engine: "jev", Jev: JevConfig{BaseURL: srv.srv.URL, Timeout: 100 * time.Millisecond},
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			resp, err := s.Judge(context.Background(), one(boolQ("Is it done?")))
			if !errs.Is(err, tt.code) || !strings.Contains(err.Error(), tt.message) {
				t.Fatalf("err = %v (%s), want %s %q", err, errs.CodeOf(err), tt.code, tt.message)
			}
			if strings.HasPrefix(tt.message, "Jev request failed: HTTP") && err.Error() != tt.message {
				t.Errorf("message = %q, want exactly %q", err.Error(), tt.message)
			}
			var ce *errs.Error
			details, _ := json.Marshal(err)
			if errors.As(err, &ce) {
				details, _ = json.Marshal(ce.Details)
			}
			if tt.detail != "" && !strings.Contains(string(details), tt.detail) {
				t.Errorf("details = %s, want %q", details, tt.detail)
			}
			out, _ := json.Marshal(resp)
			assertNoSecret(t, "response", string(out))
			assertNoSecret(t, "error", fmt.Sprintf("%v %+v %s", err, err, details))
			assertNoSecret(t, "log", logs.String())
			if !strings.Contains(logs.String(), "judgment failed") {
				t.Errorf("failure not logged: %s", logs.String())
			}
			if tt.name == "no key" && len(srv.requests()) != 0 {
				t.Error("a request was sent without a key")
			}
		})
	}
}

// TestEngineChoice: the gate input reaches Jev only when the jev engine is chosen, and the
// model only when the llm engine is.
func TestEngineChoice(t *testing.T) {
	jev := jevServer(t, func(map[string]any) (int, string) { return 200, `{"answers":{"q":{"type":"noul","noul":0.2}}}` })
	llm := openaiProvider(t, "openai_bool_half.json", "")
	keys := envKeys(jevKey)

	s := newService(t, Config{PixieModel: openaiModel(t, llm), Keys: keys, Jev: JevConfig{BaseURL: jev.srv.URL}})
	if _, err := s.Judge(context.Background(), one(boolQ("Done?"))); err != nil {
		t.Fatal(err)
	}
	if len(jev.requests()) != 0 || len(llm.requests()) != 1 {
		t.Fatalf("llm engine: jev calls %d, model calls %d", len(jev.requests()), len(llm.requests()))
	}
	s = newService(t, Config{PixieModel: openaiModel(t, llm), Keys: keys, Engine: "JEV", Jev: JevConfig{BaseURL: jev.srv.URL}})
	resp, err := s.Judge(context.Background(), one(boolQ("Done?")))
	if err != nil {
		t.Fatal(err)
	}
	if len(jev.requests()) != 1 || len(llm.requests()) != 1 || resp.Engine != EngineJev || resp.Answers["q"].Label != "no" {
		t.Fatalf("jev engine: jev calls %d, model calls %d, resp %+v", len(jev.requests()), len(llm.requests()), resp)
	}
	if jev.requests()[0].Body["model"] != DefaultJevModel {
		t.Errorf("model = %v, want %s", jev.requests()[0].Body["model"], DefaultJevModel)
	}
	info := s.Info()
	if info.Engine != EngineJev || info.Jev.Model != DefaultJevModel || !info.Jev.Key.Configured || info.Jev.Key.Source != KeySourceEnv {
		t.Errorf("info = %+v", info)
	}
	b, _ := json.Marshal(info)
	assertNoSecret(t, "info", string(b))
}

func TestKeyStore(t *testing.T) {
	ctx := context.Background()
	type setup struct {
		env, cwdDotenv, homeDotenv, saved string
	}
	tests := []struct {
		name       string
		setup      setup
		wantSource string
		wantKey    string
		setErr     errs.Code // SetKey's error, "" for success
	}{
		{"nothing", setup{}, "", "", ""},
		{"environment wins", setup{env: "k-env", cwdDotenv: "k-cwd", saved: "k-saved"}, KeySourceEnv, "k-env", errs.Conflict},
		{"dotenv in the working directory", setup{cwdDotenv: "k-cwd", homeDotenv: "k-home", saved: "k-saved"}, KeySourceDotenv, "k-cwd", errs.Conflict},
		{"dotenv in the home", setup{homeDotenv: "k-home", saved: "k-saved"}, KeySourceDotenv, "k-home", errs.Conflict},
		{"credentials file", setup{saved: "k-saved"}, KeySourceCredentials, "k-saved", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cwd, home := t.TempDir(), t.TempDir()
			if tt.setup.cwdDotenv != "" {
				writeFile(t, filepath.Join(cwd, ".env"), "# settings\nOTHER=1\nexport TYPESAFE_API_KEY=\""+tt.setup.cwdDotenv+"\"\n")
			}
			if tt.setup.homeDotenv != "" {
				writeFile(t, filepath.Join(home, ".env"), "TYPESAFE_API_KEY="+tt.setup.homeDotenv+" # the key\n")
			}
			creds := credentials.Open(home)
			if tt.setup.saved != "" {
				if err := creds.Set(ctx, JevKeyName, tt.setup.saved); err != nil {
					t.Fatal(err)
				}
			}
			ks := NewKeyStore(KeyStoreOptions{
				Getenv:     func(n string) string { return map[string]string{JevKeyName: tt.setup.env}[n] },
				DotenvDirs: []string{cwd, home},
				Secrets:    creds,
			})
			key, st, err := ks.Key(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if key != tt.wantKey || st.Source != tt.wantSource || st.Configured != (tt.wantKey != "") || st.ReadOnly != (tt.setErr == errs.Conflict) {
				t.Errorf("key %q status %+v", key, st)
			}
			b, _ := json.Marshal(st)
			if tt.wantKey != "" && strings.Contains(string(b), tt.wantKey) {
				t.Errorf("status shows the key: %s", b)
			}
			_, err = ks.SetKey(ctx, "k-new")
			if tt.setErr != "" {
				if !errs.Is(err, tt.setErr) || !strings.Contains(err.Error(), "cannot be changed here") {
					t.Fatalf("SetKey err = %v, want %s", err, tt.setErr)
				}
				if err := ks.DeleteKey(ctx); !errs.Is(err, errs.Conflict) {
					t.Errorf("DeleteKey err = %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if v, _, _ := creds.Get(ctx, JevKeyName); v != "k-new" {
				t.Errorf("saved = %q", v)
			}
			if err := ks.DeleteKey(ctx); err != nil {
				t.Fatal(err)
			}
			if st, _ := ks.Status(ctx); st.Configured {
				t.Errorf("status after delete = %+v", st)
			}
		})
	}
}

func TestSetKeyValidation(t *testing.T) {
	ctx := context.Background()
	ks := NewKeyStore(KeyStoreOptions{Getenv: func(string) string { return "" }, Secrets: credentials.Open(t.TempDir())})
	tests := []struct {
		name, key string
		code      errs.Code
	}{
		{"empty", "  ", errs.Invalid},
		{"space inside", "ab cd", errs.Invalid},
		{"at limit", strings.Repeat("k", MaxKeyLength), ""},
		{"over limit", strings.Repeat("k", MaxKeyLength+1), errs.Invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ks.SetKey(ctx, tt.key)
			if tt.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errs.Is(err, tt.code) || strings.Contains(err.Error(), tt.key) && strings.TrimSpace(tt.key) != "" {
				t.Fatalf("err = %v", err)
			}
		})
	}
	noStore := NewKeyStore(KeyStoreOptions{Getenv: func(string) string { return "" }})
	if _, err := noStore.SetKey(ctx, "k"); !errs.Is(err, errs.Unavailable) {
		t.Errorf("SetKey without a store: %v", err)
	}
}

// TestSavedKeyReachesJev: a key saved through the KeyStore is what Jev receives, and nothing
// the Service returns or logs contains it.
func TestSavedKeyReachesJev(t *testing.T) {
	ctx := context.Background()
	srv := jevServer(t, func(map[string]any) (int, string) { return 200, `{"answers":{"q":{"type":"noul","noul":0.7}}}` })
	ks := NewKeyStore(KeyStoreOptions{Getenv: func(string) string { return "" }, Secrets: credentials.Open(t.TempDir())})
	var logs bytes.Buffer
	s := newService(t, Config{Keys: ks, Engine: EngineJev, Jev: JevConfig{BaseURL: srv.srv.URL}, Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	st, err := s.Keys().SetKey(ctx, jevKey)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(st)
	assertNoSecret(t, "SetKey status", string(b))
	resp, err := s.Judge(ctx, one(boolQ("Done?")))
	if err != nil {
		t.Fatal(err)
	}
	if srv.requests()[0].Header.Get("Authorization") != "Bearer "+jevKey {
		t.Error("the saved key was not used")
	}
	b, _ = json.Marshal(resp)
	assertNoSecret(t, "response", string(b))
	b, _ = json.Marshal(s.Info())
	assertNoSecret(t, "info", string(b))
	assertNoSecret(t, "log", logs.String())
	if !strings.Contains(logs.String(), "judged") {
		t.Errorf("no debug line: %s", logs.String())
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

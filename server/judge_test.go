package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/credentials"
	"github.com/pixie-dev/pixie/internal/judge"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
)

// newJudgeServer serves the judge routes with no model configured, a real credentials file, and
// env as the process environment the key store sees.
func newJudgeServer(t *testing.T, env map[string]string) (*httptest.Server, *strings.Builder) {
	t.Helper()
	st, err := badgerstore.Open(context.Background(), badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	noModel, err := model.New(model.Config{})
	if err != nil {
		t.Fatal(err)
	}
	keys := judge.NewKeyStore(judge.KeyStoreOptions{
		Getenv:  func(k string) string { return env[k] },
		Secrets: credentials.Open(t.TempDir()),
	})
	logs := &strings.Builder{}
	j, err := judge.New(t.Context(), judge.Config{PixieModel: noModel, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	s := serverFor(t, Config{Token: testToken, Logger: slog.New(slog.NewTextHandler(logs, nil))}, Deps{Store: st, Judge: j})
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts, logs
}

func TestJudgeRoutes(t *testing.T) {
	const secret = "tsk-this-is-the-jev-key"
	ts, logs := newJudgeServer(t, nil)
	h := bearer(testToken)
	cases := []struct {
		name, method, path, body string
		status                   int
		code, contains           string
	}{
		{"judge without a model is a tool error", "POST", "/v1/judge",
			`{"state":"x","questions":{"q":{"type":"noul","instructions":"Is it done?"}}}`, 503, "unavailable", "configure"},
		{"malformed question", "POST", "/v1/judge", `{"state":"x","questions":{"q":{"type":"maybe","instructions":"?"}}}`, 400, "invalid", ""},
		{"no questions", "POST", "/v1/judge", `{"state":"x","questions":{}}`, 400, "invalid", ""},
		{"key status before", "GET", "/v1/judge/key", "", 200, "", `"configured":false`},
		{"empty key refused", "PUT", "/v1/judge/key", `{"key":""}`, 400, "invalid", ""},
		{"save key", "PUT", "/v1/judge/key", `{"key":"` + secret + `"}`, 200, "", `"source":"credentials"`},
		{"key status after", "GET", "/v1/judge/key", "", 200, "", `"configured":true`},
		{"engine info", "GET", "/v1/judge", "", 200, "", `"engine":"llm"`},
		{"delete key", "DELETE", "/v1/judge/key", "", 200, "", `"configured":false`},
		{"no token", "GET", "/v1/judge/key", "", 401, "unauthorized", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hdr := h
			if c.code == "unauthorized" {
				hdr = nil
			}
			req, _ := http.NewRequest(c.method, ts.URL+c.path, strings.NewReader(c.body))
			if c.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, raw)
			}
			if c.code != "" && !strings.Contains(string(raw), `"code":"`+c.code+`"`) {
				t.Fatalf("body %s lacks code %s", raw, c.code)
			}
			if c.contains != "" && !strings.Contains(string(raw), c.contains) {
				t.Fatalf("body %s lacks %s", raw, c.contains)
			}
			if strings.Contains(string(raw), secret) {
				t.Fatal("the Jev key came back in a response")
			}
		})
	}
	if strings.Contains(logs.String(), secret) {
		t.Fatal("the Jev key reached the log")
	}
}

func TestJudgeKeyFromEnvironmentIsReadOnly(t *testing.T) {
	ts, _ := newJudgeServer(t, map[string]string{"TYPESAFE_API_KEY": "tsk-env"})
	req, _ := http.NewRequest("PUT", ts.URL+"/v1/judge/key", strings.NewReader(`{"key":"tsk-other"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || strings.Contains(string(raw), "tsk-env") {
		t.Fatalf("saving over an environment key: %d %s", resp.StatusCode, raw)
	}
}

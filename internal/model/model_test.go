package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
)

const testKey = "sk-test-SECRET-0123456789abcdef"

var sentinels = []error{ErrNoModel, ErrAuth, ErrRateLimit, ErrTimeout, ErrBadResponse}

// checkErr asserts err wraps exactly want among the sentinels, carries code, and never shows
// the API key (in the message, the cause chain or any formatting).
func checkErr(t *testing.T, err error, want error, code errs.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("want error %v, got nil", want)
	}
	for _, s := range sentinels {
		if got := errors.Is(err, s); got != (s == want) {
			t.Errorf("errors.Is(err, %v) = %v; err = %v", s, got, err)
		}
	}
	if got := errs.CodeOf(err); got != code {
		t.Errorf("code = %q, want %q (err %v)", got, code, err)
	}
	assertNoKey(t, err)
}

func assertNoKey(t *testing.T, err error) {
	t.Helper()
	for e := err; e != nil; e = errors.Unwrap(e) {
		for _, s := range []string{e.Error(), fmt.Sprintf("%+v", e), fmt.Sprintf("%#v", e)} {
			if strings.Contains(s, testKey) {
				t.Fatalf("API key leaked in error: %s", s)
			}
		}
	}
}

// openaiBody is a real chat.completion response body.
func openaiBody(content string, logprobs string) string {
	if logprobs == "" {
		logprobs = "null"
	}
	return fmt.Sprintf(`{
  "id": "chatcmpl-9xYz",
  "object": "chat.completion",
  "created": 1717000000,
  "model": "gpt-4o-mini-2024-07-18",
  "choices": [{
    "index": 0,
    "message": {"role": "assistant", "content": %q, "refusal": null},
    "logprobs": %s,
    "finish_reason": "stop"
  }],
  "usage": {"prompt_tokens": 21, "completion_tokens": 3, "total_tokens": 24,
    "prompt_tokens_details": {"cached_tokens": 0}, "completion_tokens_details": {"reasoning_tokens": 0}},
  "system_fingerprint": "fp_0123"
}`, content, logprobs)
}

const openaiLogprobs = `{"content": [{"token": "yes", "logprob": -0.0725, "bytes": [121,101,115],
  "top_logprobs": [
    {"token": "yes", "logprob": -0.0725, "bytes": [121,101,115]},
    {"token": "no", "logprob": -2.66, "bytes": [110,111]},
    {"token": "Yes", "logprob": -5.1, "bytes": [89,101,115]}
  ]}], "refusal": null}`

func openaiError(status int, typ, code, msg string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("x-request-id", "req_123")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error": {"message": %q, "type": %q, "param": null, "code": %q}}`, msg, typ, code)
	}
}

type captured struct {
	path, auth, contentType, apiKey, version string
	body                                     map[string]any
}

// openaiServer serves /v1/chat/completions with h after checking the wire basics.
func openaiServer(t *testing.T, h http.HandlerFunc, got *captured) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		if got != nil {
			got.path, got.auth, got.contentType = r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Content-Type")
			raw, _ := io.ReadAll(r.Body)
			got.body = map[string]any{}
			if err := json.Unmarshal(raw, &got.body); err != nil {
				t.Errorf("request body is not JSON: %v", err)
			}
		}
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func jsonHandler(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}
}

func temp(v float64) *float64 { return &v }

func TestOpenAIComplete(t *testing.T) {
	req := Request{
		System:      "You are terse.",
		Messages:    []Message{{Role: RoleUser, Content: "Is the sky blue?"}},
		MaxTokens:   1,
		Temperature: temp(0),
	}
	withLogprobs := req
	withLogprobs.TopLogprobs = 5

	tests := []struct {
		name      string
		req       Request
		handler   http.HandlerFunc
		wantText  string
		wantUsage Usage
		wantLP    bool
		check     func(t *testing.T, got *captured)
	}{
		{
			name: "answer with usage", req: req, handler: jsonHandler(openaiBody("yes", "")),
			wantText: "yes", wantUsage: Usage{InputTokens: 21, OutputTokens: 3},
			check: func(t *testing.T, got *captured) {
				if got.auth != "Bearer "+testKey {
					t.Errorf("Authorization = %q", got.auth)
				}
				if !strings.HasPrefix(got.contentType, "application/json") {
					t.Errorf("Content-Type = %q", got.contentType)
				}
				if got.body["model"] != "gpt-4o-mini" || got.body["max_tokens"] != float64(1) || got.body["temperature"] != float64(0) {
					t.Errorf("body = %v", got.body)
				}
				if _, ok := got.body["logprobs"]; ok {
					t.Errorf("logprobs sent without TopLogprobs: %v", got.body)
				}
				msgs, _ := got.body["messages"].([]any)
				if len(msgs) != 2 || msgs[0].(map[string]any)["role"] != "system" || msgs[1].(map[string]any)["content"] != "Is the sky blue?" {
					t.Errorf("messages = %v", msgs)
				}
			},
		},
		{
			name: "logprobs present", req: withLogprobs, handler: jsonHandler(openaiBody("yes", openaiLogprobs)),
			wantText: "yes", wantUsage: Usage{InputTokens: 21, OutputTokens: 3}, wantLP: true,
			check: func(t *testing.T, got *captured) {
				if got.body["logprobs"] != true || got.body["top_logprobs"] != float64(5) {
					t.Errorf("logprobs not requested: %v", got.body)
				}
			},
		},
		{
			name: "logprobs absent", req: withLogprobs, handler: jsonHandler(openaiBody("yes", "")),
			wantText: "yes", wantUsage: Usage{InputTokens: 21, OutputTokens: 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got captured
			base := openaiServer(t, tt.handler, &got)
			m, err := New(Config{Provider: "openai", BaseURL: base, Model: "gpt-4o-mini", APIKey: testKey})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := m.Complete(context.Background(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != tt.wantText || resp.Usage != tt.wantUsage || resp.Model != "gpt-4o-mini-2024-07-18" {
				t.Errorf("resp = %+v", resp)
			}
			if tt.wantLP {
				if len(resp.Logprobs) != 1 || resp.Logprobs[0].Token != "yes" || len(resp.Logprobs[0].Top) != 3 ||
					resp.Logprobs[0].Top[1].Token != "no" || resp.Logprobs[0].Top[1].Logprob != -2.66 {
					t.Errorf("logprobs = %+v", resp.Logprobs)
				}
			} else if resp.Logprobs != nil {
				t.Errorf("logprobs = %+v, want nil", resp.Logprobs)
			}
			if tt.check != nil {
				tt.check(t, &got)
			}
		})
	}
}

func TestOpenAIErrors(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    error
		code    errs.Code
		status  int
	}{
		{"401 echoes the key", openaiError(401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided: "+testKey+"."), ErrAuth, errs.Upstream, 401},
		{"403", openaiError(403, "permission_error", "forbidden", "Project does not have access"), ErrAuth, errs.Upstream, 403},
		{"429", openaiError(429, "requests", "rate_limit_exceeded", "Rate limit reached for key "+testKey), ErrRateLimit, errs.Unavailable, 429},
		{"500", openaiError(500, "server_error", "", "The server had an error"), ErrBadResponse, errs.Upstream, 500},
		{"404 model", openaiError(404, "invalid_request_error", "model_not_found", "The model `x` does not exist"), ErrBadResponse, errs.Upstream, 404},
		{"empty choices", jsonHandler(`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":0,"total_tokens":1}}`), ErrBadResponse, errs.Upstream, 0},
		{"undecodable", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id": "chatcmpl`)
		}, ErrBadResponse, errs.Upstream, 0},
		{"empty answer", jsonHandler(openaiBody("", "")), ErrBadResponse, errs.Upstream, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := openaiServer(t, tt.handler, nil)
			m, err := New(Config{Provider: "openai", BaseURL: base, Model: "gpt-4o-mini", APIKey: testKey})
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.Complete(context.Background(), Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}})
			checkErr(t, err, tt.want, tt.code)
			if got := StatusCode(err); got != tt.status {
				t.Errorf("StatusCode = %d, want %d", got, tt.status)
			}
		})
	}
}

// slowHandler never answers before the client gives up; it returns when the test ends.
func slowHandler(stop <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}
}

func TestTimeoutsAndNetwork(t *testing.T) {
	stop := make(chan struct{})
	anthropicSlow := anthropicServer(t, slowHandler(stop), nil)
	openaiSlow := openaiServer(t, slowHandler(stop), nil)
	t.Cleanup(func() { close(stop) }) // runs before the servers close (cleanups are LIFO)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()

	tests := []struct {
		name     string
		cfg      Config
		cancel   bool
		want     error
		code     errs.Code
		contains string
	}{
		{"openai timeout", Config{Provider: "openai", BaseURL: openaiSlow, Model: "m", APIKey: testKey, Timeout: 100 * time.Millisecond}, false, ErrTimeout, errs.Timeout, "timed out"},
		{"anthropic timeout", Config{Provider: "anthropic", BaseURL: anthropicSlow, Model: "m", APIKey: testKey, Timeout: 100 * time.Millisecond}, false, ErrTimeout, errs.Timeout, "timed out"},
		{"caller cancels", Config{Provider: "openai", BaseURL: openaiSlow, Model: "m", APIKey: testKey, Timeout: time.Minute}, true, ErrTimeout, errs.Timeout, "cancelled"},
		{"unreachable", Config{Provider: "openai", BaseURL: closed, Model: "m", APIKey: testKey}, false, ErrBadResponse, errs.Unavailable, "unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := New(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancel {
				time.AfterFunc(50*time.Millisecond, cancel)
			}
			start := time.Now()
			_, err = m.Complete(ctx, Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}})
			checkErr(t, err, tt.want, tt.code)
			if !strings.Contains(err.Error(), tt.contains) {
				t.Errorf("err = %q, want it to mention %q", err, tt.contains)
			}
			if time.Since(start) > 3*time.Second {
				t.Errorf("call took %v: retries or timeout not applied", time.Since(start))
			}
		})
	}
}

// anthropicBody is a real /v1/messages response body.
func anthropicBody(text string) string {
	return fmt.Sprintf(`{
  "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
  "type": "message",
  "role": "assistant",
  "model": "claude-sonnet-4-5-20250929",
  "content": [{"type": "text", "text": %q}],
  "stop_reason": "end_turn",
  "stop_sequence": null,
  "usage": {"input_tokens": 12, "output_tokens": 6, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
}`, text)
}

func anthropicError(status int, typ, msg string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("request-id", "req_011CSHoEeqs5C35K2UUqR7Fy")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"type": "error", "error": {"type": %q, "message": %q}, "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"}`, typ, msg)
	}
}

func anthropicServer(t *testing.T, h http.HandlerFunc, got *captured) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		if got != nil {
			got.path, got.apiKey, got.contentType = r.URL.Path, r.Header.Get("X-Api-Key"), r.Header.Get("Content-Type")
			got.version, got.auth = r.Header.Get("Anthropic-Version"), r.Header.Get("Authorization")
			raw, _ := io.ReadAll(r.Body)
			got.body = map[string]any{}
			if err := json.Unmarshal(raw, &got.body); err != nil {
				t.Errorf("request body is not JSON: %v", err)
			}
		}
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestAnthropic(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    error // nil: success
		code    errs.Code
	}{
		{"answer with usage", jsonHandler(anthropicBody("Blue.")), nil, ""},
		{"401", anthropicError(401, "authentication_error", "invalid x-api-key "+testKey), ErrAuth, errs.Upstream},
		{"429", anthropicError(429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"), ErrRateLimit, errs.Unavailable},
		{"500", anthropicError(500, "api_error", "Internal server error"), ErrBadResponse, errs.Upstream},
		{"529 overloaded", anthropicError(529, "overloaded_error", "Overloaded"), ErrBadResponse, errs.Upstream},
		{"no text", jsonHandler(`{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":0}}`), ErrBadResponse, errs.Upstream},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got captured
			base := anthropicServer(t, tt.handler, &got)
			m, err := New(Config{Provider: "Anthropic", BaseURL: base, Model: "claude-sonnet-4-5", APIKey: testKey})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := m.Complete(context.Background(), Request{
				System:      "Be brief.",
				Messages:    []Message{{Role: RoleUser, Content: "Sky colour?"}},
				Temperature: temp(0),
				TopLogprobs: 20, // ignored: the Messages API has no logprobs
			})
			if tt.want != nil {
				checkErr(t, err, tt.want, tt.code)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != "Blue." || resp.Usage != (Usage{InputTokens: 12, OutputTokens: 6}) || resp.Logprobs != nil {
				t.Errorf("resp = %+v", resp)
			}
			if got.apiKey != testKey || got.auth != "" || got.version == "" || !strings.HasPrefix(got.contentType, "application/json") {
				t.Errorf("headers: x-api-key %q, authorization %q, anthropic-version %q, content-type %q", got.apiKey, got.auth, got.version, got.contentType)
			}
			if got.body["max_tokens"] != float64(defaultAnthropicMaxTokens) || got.body["model"] != "claude-sonnet-4-5" || got.body["temperature"] != float64(0) {
				t.Errorf("body = %v", got.body)
			}
			if sys, _ := got.body["system"].([]any); len(sys) != 1 || sys[0].(map[string]any)["text"] != "Be brief." {
				t.Errorf("system = %v", got.body["system"])
			}
			for _, k := range []string{"logprobs", "top_logprobs"} {
				if _, ok := got.body[k]; ok {
					t.Errorf("%s sent to Anthropic", k)
				}
			}
		})
	}
}

func TestNew(t *testing.T) {
	t.Setenv(EnvOpenAIAPIKey, "")
	t.Setenv(EnvAnthropicAPIKey, "")
	tests := []struct {
		name     string
		cfg      Config
		wantErr  string // substring; empty: success
		provider string
	}{
		{"empty is no model", Config{}, "", ""},
		{"unknown provider", Config{Provider: "gemini", Model: "x"}, `unknown model provider "gemini"`, ""},
		{"model required", Config{Provider: "openai", BaseURL: "http://localhost:8000/v1"}, "model name is empty", ""},
		{"bad base url", Config{Provider: "openai", Model: "m", BaseURL: "localhost:8000"}, "not an absolute http(s) URL", ""},
		{"credentials in url", Config{Provider: "openai", Model: "m", BaseURL: "http://u:p@localhost:8000"}, "must not carry credentials", ""},
		{"negative timeout", Config{Provider: "openai", Model: "m", BaseURL: "http://localhost", Timeout: -1}, "negative", ""},
		{"real openai needs a key", Config{Provider: "openai", Model: "gpt-4o-mini"}, "OPENAI_API_KEY", ""},
		{"real anthropic needs a key", Config{Provider: "anthropic", Model: "claude"}, "ANTHROPIC_API_KEY", ""},
		{"local server without key", Config{Provider: "openai", Model: "llama3", BaseURL: "http://localhost:11434/v1"}, "", "openai"},
		{"anthropic with key", Config{Provider: " ANTHROPIC ", Model: "claude", APIKey: testKey}, "", "anthropic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := New(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errs.Is(err, errs.Invalid) {
					t.Fatalf("err = %v, want invalid mentioning %q", err, tt.wantErr)
				}
				assertNoKey(t, err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			info := m.Info()
			if info.Provider != tt.provider || info.Configured != (tt.provider != "") {
				t.Errorf("info = %+v", info)
			}
		})
	}
}

func TestNoModel(t *testing.T) {
	m, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Info().Configured {
		t.Error("Configured = true")
	}
	_, err = m.Complete(context.Background(), Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}})
	checkErr(t, err, ErrNoModel, errs.Unavailable)
	for _, want := range []string{"PIXIE_MODEL_PROVIDER", "PIXIE_MODEL_MODEL", "PIXIE_MODEL_API_KEY", "pixie.yaml"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not mention %s", err, want)
		}
	}
}

func TestAPIKeyFallback(t *testing.T) {
	tests := []struct {
		name, cfgKey, envKey, want string
	}{
		{"config key wins", testKey, "sk-env-other", testKey},
		{"provider variable", "", testKey, testKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvOpenAIAPIKey, tt.envKey)
			var got captured
			base := openaiServer(t, jsonHandler(openaiBody("ok", "")), &got)
			m, err := New(Config{Provider: "openai", BaseURL: base, Model: "m", APIKey: tt.cfgKey})
			if err != nil {
				t.Fatal(err)
			}
			if !m.Info().HasAPIKey {
				t.Error("HasAPIKey = false")
			}
			if _, err := m.Complete(context.Background(), Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}}); err != nil {
				t.Fatal(err)
			}
			if got.auth != "Bearer "+tt.want {
				t.Errorf("Authorization = %q", got.auth)
			}
		})
	}
}

func TestInvalidRequest(t *testing.T) {
	m, err := New(Config{Provider: "openai", BaseURL: "http://127.0.0.1:1", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  Request
	}{
		{"no messages", Request{}},
		{"bad role", Request{Messages: []Message{{Role: "system", Content: "x"}}}},
		{"negative", Request{Messages: []Message{{Role: RoleUser, Content: "x"}}, TopLogprobs: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := m.Complete(context.Background(), tt.req); !errs.Is(err, errs.Invalid) {
				t.Errorf("err = %v, want invalid", err)
			}
		})
	}
}

package settings

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
	"time"

	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/credentials"
	"github.com/pixie-dev/pixie/internal/judge"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
)

// Test secrets: none may appear in a view, an error, a test result or a log line.
const (
	keyA     = "sk-settings-SECRET-aaaa1111"
	keyB     = "sk-ant-settings-SECRET-bbbb2222"
	keyFile  = "sk-file-SECRET-cccc3333"
	keyEnv   = "sk-env-SECRET-dddd4444"
	keyJudge = "sk-judge-SECRET-eeee5555"
)

var allKeys = []string{keyA, keyB, keyFile, keyEnv, keyJudge}

// call is one request a fake provider received.
type call struct {
	Path   string
	Auth   string // Authorization (OpenAI) or X-Api-Key (Anthropic)
	Model  string
	System string // OpenAI system message, or the Anthropic system text
	User   string // the first user message
}

// fake is an httptest server speaking the OpenAI chat.completions or the Anthropic Messages wire
// format. It answers 401 when wantKey is set and the request carries another key.
type fake struct {
	srv       *httptest.Server
	anthropic bool
	wantKey   string
	reply     string
	mu        sync.Mutex
	calls     []call
}

func newFake(t *testing.T, anthropic bool, wantKey, reply string) *fake {
	t.Helper()
	f := &fake{anthropic: anthropic, wantKey: wantKey, reply: reply}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// baseURL is the value of model.baseUrl for this fake.
func (f *fake) baseURL() string {
	if f.anthropic {
		return f.srv.URL
	}
	return f.srv.URL + "/v1"
}

func (f *fake) requests() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	path := "/v1/chat/completions"
	if f.anthropic {
		path = "/v1/messages"
	}
	if r.Method != http.MethodPost || r.URL.Path != path {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var body struct {
		Model    string          `json:"model"`
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(raw, &body)
	c := call{Path: r.URL.Path, Model: body.Model}
	if f.anthropic {
		c.Auth = r.Header.Get("X-Api-Key")
		var blocks []struct{ Text string }
		_ = json.Unmarshal(body.System, &blocks)
		if len(blocks) > 0 {
			c.System = blocks[0].Text
		}
	} else {
		c.Auth = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	for _, m := range body.Messages {
		switch {
		case m.Role == "system" && !f.anthropic:
			c.System, _ = m.Content.(string)
		case m.Role == "user" && c.User == "":
			if s, ok := m.Content.(string); ok {
				c.User = s
			} else {
				b, _ := json.Marshal(m.Content)
				c.User = string(b)
			}
		}
	}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if f.wantKey != "" && c.Auth != f.wantKey {
		w.WriteHeader(http.StatusUnauthorized)
		if f.anthropic {
			_, _ = io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
		} else {
			// Real OpenAI quotes part of the key it refused.
			fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, c.Auth)
		}
		return
	}
	if f.anthropic {
		fmt.Fprintf(w, `{"id":"msg_01","type":"message","role":"assistant","model":"claude-answered","content":[{"type":"text","text":%q}],`+
			`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":2}}`, f.reply)
		return
	}
	fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1717000000,"model":%q,`+
		`"choices":[{"index":0,"message":{"role":"assistant","content":%q,"refusal":null},"logprobs":null,"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`, body.Model+"-answered", f.reply)
}

// env is a fake environment for LookupEnv.
type env map[string]string

func (e env) lookup(name string) (string, bool) { v, ok := e[name]; return v, ok }

// rig is one Pixie home: a Badger store, a credentials file, the Pixie model and the judge.
type rig struct {
	t     *testing.T
	home  string
	dir   string
	st    *store.Store
	creds *credentials.File
	model *model.Swappable
	judge *judge.Service
	svc   *Service
	logs  *bytes.Buffer
	env   env
	cfg   config.Config
}

// newRig opens a store in a new home and starts the settings service with cfg's model and
// judge sections (the rest is config.Defaults).
func newRig(t *testing.T, cfg config.Config, e env) *rig {
	t.Helper()
	r := &rig{t: t, home: t.TempDir(), env: e, logs: &bytes.Buffer{}}
	r.dir = r.home + "/data"
	r.creds = credentials.Open(r.home)
	r.cfg = cfg
	r.start()
	return r
}

// start opens the store (again) and builds fresh services on it, as a restart does.
func (r *rig) start() {
	t := r.t
	t.Helper()
	st, err := badgerstore.Open(context.Background(), badgerstore.Options{Dir: r.dir, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	r.st = st
	t.Cleanup(func() { _ = st.Close() })
	r.model = model.NewSwappable(nil)
	log := slog.New(slog.NewJSONHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	keys := judge.NewKeyStore(judge.KeyStoreOptions{Getenv: func(n string) string { return r.env[n] }, Secrets: r.creds})
	if r.judge, err = judge.New(context.Background(), judge.Config{Logger: log, PixieModel: r.model, Keys: keys}); err != nil {
		t.Fatal(err)
	}
	svc, err := New(context.Background(), Config{Config: r.cfg, Store: st, Secrets: r.creds, Model: r.model,
		Judge: r.judge, LookupEnv: r.env.lookup, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	r.svc = svc
}

// restart closes the store and starts again on the same home.
func (r *rig) restart() {
	r.t.Helper()
	if err := r.st.Close(); err != nil {
		r.t.Fatal(err)
	}
	r.start()
}

// baseConfig is config.Defaults with the given model section.
func baseConfig(m config.ModelConfig) config.Config {
	c := config.Defaults("/unused")
	if m.Timeout == 0 {
		m.Timeout = c.Model.Timeout
	}
	c.Model = m
	return c
}

func ptr[T any](v T) *T { return &v }

// noSecret fails when s holds any test key.
func noSecret(t *testing.T, what, s string) {
	t.Helper()
	for _, k := range allKeys {
		if strings.Contains(s, k) {
			t.Fatalf("%s contains a secret (%s…): %s", what, k[:8], s)
		}
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// ask makes one call through the Pixie model the services hold.
func (r *rig) ask(t *testing.T) (model.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return r.model.Complete(ctx, model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "hello"}}})
}

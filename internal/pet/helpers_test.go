package pet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/helper"
	"github.com/pixie-dev/pixie/internal/judge"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/pet"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime"
)

// TestMain lets the test binary play the pixie binary for the bash executor, which re-executes
// os.Executable() with the sandbox verb.
func TestMain(m *testing.M) { testutil.Main(m) }

func openStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := badgerstore.Open(context.Background(), badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

type env struct {
	st  *store.Store
	svc *pet.Service
	ws  string
}

// newEnv builds a Service over a real Badger store with a workspace in a temp dir.
func newEnv(t testing.TB, exec runtime.Executor, m model.Model, cfg pet.Config) *env {
	t.Helper()
	st := openStore(t)
	if cfg.Workspace == "" {
		cfg.Workspace = filepath.Join(t.TempDir(), "workspace")
	}
	cfg.Store, cfg.Exec, cfg.Model = st, exec, m
	svc, err := pet.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{st: st, svc: svc, ws: cfg.Workspace}
}

// skillDir writes a Skill directory: SKILL.md with the front matter and body, plus files.
func skillDir(t testing.TB, name, description, body string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "skills", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := "---\nname: " + name + "\ndescription: " + description + "\n---\n" + body
	writeFile(t, filepath.Join(dir, pet.ManifestFile), manifest)
	for p, content := range files {
		writeFile(t, filepath.Join(dir, filepath.FromSlash(p)), content)
	}
	return dir
}

func writeFile(t testing.TB, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// register inspects and registers dir, enabled and as a shortcut, confirming the sandbox policy
// it asks for.
func register(t testing.TB, svc *pet.Service, dir string) pet.SkillView {
	t.Helper()
	ctx := context.Background()
	in, err := svc.Inspect(ctx, dir)
	if err != nil {
		t.Fatalf("inspect %s: %v", dir, err)
	}
	v, err := svc.Register(ctx, pet.RegisterRequest{Path: dir, Confirm: true, Fingerprint: in.Fingerprint, Sandbox: in.Sandbox, Enabled: true, Shortcut: true})
	if err != nil {
		t.Fatalf("register %s: %v", dir, err)
	}
	return v
}

// fingerprint inspects dir and returns the fingerprint registration needs.
func fingerprint(t testing.TB, svc *pet.Service, dir string) string {
	t.Helper()
	in, err := svc.Inspect(context.Background(), dir)
	if err != nil {
		t.Fatalf("inspect %s: %v", dir, err)
	}
	return in.Fingerprint
}

func snapshot(scope string) pet.Snapshot {
	return pet.Snapshot{Scope: scope, Title: "T1", Selection: "selected text", CapturedAt: time.Now().Add(-time.Second)}
}

// modelServer is an OpenAI-compatible chat completions server. It records every request body,
// and answers with a text that names the last user message's first line and the number of
// messages; fail(n) makes the next n calls answer HTTP 503. A request for log-probabilities
// (the decision engine's) is answered " Yes" with P(yes) = 0.8 over the yes/no tokens.
type modelServer struct {
	*httptest.Server
	mu       sync.Mutex
	bodies   []string
	requests []chatRequest
	failures int
	fixed    []string // answers to give, in order, before the default one
}

// answer makes the next call answer text.
func (ms *modelServer) answer(text string) {
	ms.mu.Lock()
	ms.fixed = append(ms.fixed, text)
	ms.mu.Unlock()
}

type chatRequest struct {
	Model    string `json:"model"`
	Logprobs bool   `json:"logprobs"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

func newModelServer(t testing.TB) (*modelServer, model.Model) {
	t.Helper()
	ms := &modelServer{}
	ms.Server = httptest.NewServer(http.HandlerFunc(ms.serve))
	t.Cleanup(ms.Close)
	m, err := model.New(model.Config{Provider: "openai", BaseURL: ms.URL + "/v1", Model: "m", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	return ms, m
}

func (ms *modelServer) fail(n int) {
	ms.mu.Lock()
	ms.failures = n
	ms.mu.Unlock()
}

func (ms *modelServer) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"no such route"}}`, http.StatusNotFound)
		return
	}
	var req chatRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	ms.mu.Lock()
	ms.bodies = append(ms.bodies, string(raw))
	ms.requests = append(ms.requests, req)
	fail := ms.failures > 0
	if fail {
		ms.failures--
	}
	ms.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if fail {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":{"message":"overloaded","type":"server_error"}}`)
		return
	}
	if req.Logprobs {
		// ln 0.6, ln 0.2, ln 0.2: " Yes" and "yes" are both yes.
		_, _ = fmt.Fprintf(w, `{"id":"chatcmpl-2","object":"chat.completion","created":%d,"model":%q,
"choices":[{"index":0,"finish_reason":"length","message":{"role":"assistant","content":" Yes"},
"logprobs":{"content":[{"token":" Yes","logprob":-0.5108256,"bytes":[32,89,101,115],"top_logprobs":[
{"token":" Yes","logprob":-0.5108256,"bytes":[32,89,101,115]},{"token":"yes","logprob":-1.6094379,"bytes":[121,101,115]},
{"token":" No","logprob":-1.6094379,"bytes":[32,78,111]}]}]}}],
"usage":{"prompt_tokens":90,"completion_tokens":1,"total_tokens":91}}`, time.Now().Unix(), req.Model)
		return
	}
	last := ""
	for _, m := range req.Messages {
		if m.Role == "user" {
			last, _, _ = strings.Cut(m.Content, "\n")
		}
	}
	answer := fmt.Sprintf("model saw %d messages; last: %s", len(req.Messages), last)
	ms.mu.Lock()
	if len(ms.fixed) > 0 {
		answer, ms.fixed = ms.fixed[0], ms.fixed[1:]
	}
	ms.mu.Unlock()
	resp := map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": answer}}},
		"usage": map[string]any{"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
	}
	_ = json.NewEncoder(w).Encode(resp)
}

func (ms *modelServer) received() ([]string, []chatRequest) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return append([]string(nil), ms.bodies...), append([]chatRequest(nil), ms.requests...)
}

// newHelpers returns a real helper service (the instance id of its own Badger store, the real
// decision engine on m): what the binary gives Pet as Config.Helpers.
func newHelpers(t testing.TB, m model.Model) *helper.Service {
	t.Helper()
	j, err := judge.New(context.Background(), judge.Config{PixieModel: m})
	if err != nil {
		t.Fatal(err)
	}
	h, err := helper.New(context.Background(), helper.Config{Instance: openStore(t).Instance(), Model: m, Judge: j})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

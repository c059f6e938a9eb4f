package wasmit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/helper"
	"github.com/pixie-dev/pixie/internal/judge"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/bash"
	"github.com/pixie-dev/pixie/runtime/modules"
	"github.com/pixie-dev/pixie/runtime/sandbox"
	"github.com/pixie-dev/pixie/runtime/wasm"
	"github.com/pixie-dev/pixie/server"
)

const token = "wasmit-admin-token-0123456789abcdef0123456789abcdef0123456789"

// guests are the example guests, each with its bash twin guests/<name>/<name>.sh.
var guests = []string{"only-search-tools", "measure-subtitle", "translate-check", "claim-check", "list-changed-files", "block-risky-commands"}

// llm is an OpenAI-compatible chat-completions server. It tells the three kinds of request the
// Pixie model receives apart by their prompts: a judgment (a one-token answer with
// log-probabilities, from judge), a helper ask (from ask), and a gate task (answered with a
// gate output whose note repeats the rendered task, so that what a rule handed to the task is
// visible in the result).
type llm struct {
	*httptest.Server
	mu    sync.Mutex
	judge func(question, state string) map[string]float64
	ask   func(instruction, input string) string
	calls int
}

func newLLM(t testing.TB) *llm {
	l := &llm{}
	l.Server = httptest.NewServer(http.HandlerFunc(l.serve))
	t.Cleanup(l.Close)
	return l
}

// set replaces the answers (nil keeps the current one).
func (l *llm) set(judge func(question, state string) map[string]float64, ask func(instruction, input string) string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if judge != nil {
		l.judge = judge
	}
	if ask != nil {
		l.ask = ask
	}
}

func (l *llm) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Logprobs bool `json:"logprobs"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var system, user string
	for _, m := range req.Messages {
		switch m.Role {
		case "system", "developer":
			system = text(m.Content)
		case "user":
			user = text(m.Content)
		}
	}
	l.mu.Lock()
	l.calls++
	judgeFn, askFn := l.judge, l.ask
	l.mu.Unlock()
	switch {
	case strings.HasPrefix(user, "<state>\n"):
		state, rest, _ := strings.Cut(strings.TrimPrefix(user, "<state>\n"), "\n</state>\n\nQuestion: ")
		question, _, _ := strings.Cut(rest, "\n")
		if judgeFn == nil || !req.Logprobs {
			http.Error(w, `{"error":{"message":"no judgment expected","type":"invalid_request_error"}}`, http.StatusInternalServerError)
			return
		}
		writeCompletion(w, judgeFn(question, state))
	case strings.HasPrefix(system, "You are Pixie, a helper"):
		instruction, input, _ := strings.Cut(user, "\n\n<input>\n")
		input = strings.TrimSuffix(input, "\n</input>")
		if askFn == nil {
			http.Error(w, `{"error":{"message":"no ask expected","type":"invalid_request_error"}}`, http.StatusInternalServerError)
			return
		}
		writeText(w, askFn(instruction, input))
	case strings.HasPrefix(system, "You are Pixie, a gate"):
		task, _, _ := strings.Cut(strings.TrimPrefix(user, "Task:\n"), "\n\nPoint: ")
		out, _ := json.Marshal(map[string]string{"note": "task: " + task})
		writeText(w, string(out))
	default:
		http.Error(w, `{"error":{"message":"unexpected request","type":"invalid_request_error"}}`, http.StatusBadRequest)
	}
}

// text reads a message content: a string or an array of text parts.
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

const usage = `"usage":{"prompt_tokens":11,"completion_tokens":1,"total_tokens":12}`

func writeText(w http.ResponseWriter, content string) {
	c, _ := json.Marshal(content)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"chatcmpl-t","object":"chat.completion","created":1717000000,"model":"m","choices":[{"index":0,"finish_reason":"stop","logprobs":null,"message":{"role":"assistant","content":%s}}],%s}`, c, usage)
}

// writeCompletion answers with the most probable token and the log-probabilities of all.
func writeCompletion(w http.ResponseWriter, probs map[string]float64) {
	type top struct {
		Token   string  `json:"token"`
		Logprob float64 `json:"logprob"`
		Bytes   []int   `json:"bytes"`
	}
	var tops []top
	for tok, p := range probs {
		tops = append(tops, top{Token: tok, Logprob: math.Log(p), Bytes: []int{}})
	}
	sort.Slice(tops, func(i, j int) bool { return tops[i].Logprob > tops[j].Logprob })
	first := tops[0]
	lp, _ := json.Marshal(map[string]any{"content": []map[string]any{{
		"token": first.Token, "logprob": first.Logprob, "bytes": []int{}, "top_logprobs": tops,
	}}})
	c, _ := json.Marshal(first.Token)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"chatcmpl-t","object":"chat.completion","created":1717000000,"model":"m","choices":[{"index":0,"finish_reason":"stop","logprobs":%s,"message":{"role":"assistant","content":%s}}],%s}`, lp, c, usage)
}

// yesNo is a bool judgment's answer: P(yes) = yes.
func yesNo(yes float64) map[string]float64 { return map[string]float64{"yes": yes, "no": 1 - yes} }

// stack is a Pixie server as cmd/pixie wires it for gates and modules.
type stack struct {
	ts      *httptest.Server
	st      *store.Store
	reg     *modules.Registry
	x       *wasm.Executor
	gates   *gate.Service
	home    string
	scripts string
	blobs   string
	llm     *llm
	client  *http.Client
}

type stackOptions struct {
	// maxModuleSize caps uploads (zero: the default 16 MiB).
	maxModuleSize int64
	// wasm configures the executor and the validator (CacheDir is the shared cache).
	wasm wasm.Config
}

func newStack(t testing.TB, o stackOptions) *stack {
	t.Helper()
	ctx := context.Background()
	s := &stack{home: t.TempDir(), client: &http.Client{}}
	s.scripts = filepath.Join(s.home, "commands")
	s.blobs = filepath.Join(s.home, "blobs")
	if err := os.Mkdir(s.scripts, 0o755); err != nil {
		t.Fatal(err)
	}
	// Every bash twin is in the script folder.
	for _, g := range guests {
		body, err := os.ReadFile(filepath.Join(testutil.Root(), "guests", g, g+".sh"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(s.scripts, g+".sh"), body, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	st, err := badgerstore.Open(ctx, badgerstore.Options{Dir: filepath.Join(s.home, "data"), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s.st = st
	wc := o.wasm
	wc.CacheDir = testutil.WasmCacheDir(t)
	wc.MaxModuleSize = o.maxModuleSize
	v, err := wasm.NewValidator(ctx, wc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close(ctx) })
	if s.reg, err = modules.New(context.Background(), modules.Config{Store: st, Dir: s.blobs, Validator: v, MaxSize: o.maxModuleSize}); err != nil {
		t.Fatal(err)
	}
	wc.Source = s.reg
	if s.x, err = wasm.New(ctx, wc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.x.Close(ctx) })
	// Scripts run through the real binary's sandbox verb, as the server's do.
	bx, err := bash.New(context.Background(), bash.Config{PixieBinDir: filepath.Dir(testutil.PixieBinary(t)), Sandbox: []string{testutil.PixieBinary(t), sandbox.Verb}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bx.Close(context.Background()) })
	s.llm = newLLM(t)
	m, err := model.New(model.Config{Provider: "openai", BaseURL: s.llm.URL + "/v1", Model: "m", APIKey: "sk-wasmit-secret"})
	if err != nil {
		t.Fatal(err)
	}
	j, err := judge.New(ctx, judge.Config{PixieModel: m})
	if err != nil {
		t.Fatal(err)
	}
	hs, err := helper.New(ctx, helper.Config{Instance: st.Instance(), Model: m, Judge: j})
	if err != nil {
		t.Fatal(err)
	}
	s.gates, err = gate.New(ctx, gate.Config{Store: st, Exec: runtime.Dispatcher{runtime.KindScript: bx, runtime.KindModule: s.x}, Model: m, Helpers: hs, Home: s.home, Modules: s.reg})
	if err != nil {
		t.Fatal(err)
	}
	srv := testServer(t, server.Config{Token: token}, server.Deps{Store: st, Gates: s.gates, Helpers: hs, Modules: s.reg, ModuleInUse: s.gates.ModuleInUse})
	s.ts = httptest.NewServer(srv.Handler())
	t.Cleanup(s.ts.Close)
	hs.SetURL(s.ts.URL)
	return s
}

// request sends an admin request with a raw body; a 2xx JSON answer is decoded into out, and
// an error answer (which must have the error shape) is returned.
func (s *stack) request(t testing.TB, method, path, contentType string, body io.Reader, out any) (int, server.ErrorBody) {
	t.Helper()
	req, err := http.NewRequest(method, s.ts.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var eb server.ErrorBody
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(raw, &eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
			t.Fatalf("%s %s: %d with a body not in the error shape: %s", method, path, resp.StatusCode, raw)
		}
		return resp.StatusCode, eb
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	return resp.StatusCode, eb
}

// call sends a JSON request.
func (s *stack) call(t testing.TB, method, path string, in, out any) (int, server.ErrorBody) {
	t.Helper()
	var body io.Reader
	ct := ""
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		body, ct = bytes.NewReader(raw), "application/json"
	}
	return s.request(t, method, path, ct, body, out)
}

// push uploads a guest (a folder under guests/) as module name, raw.
func (s *stack) push(t testing.TB, guest, name string) modules.Module {
	t.Helper()
	var m modules.Module
	if st, eb := s.request(t, http.MethodPost, "/v1/modules?name="+name, "application/wasm", bytes.NewReader(testutil.Guest(t, guest)), &m); st != http.StatusCreated {
		t.Fatalf("push %s: %d %+v", guest, st, eb)
	}
	return m
}

func (s *stack) save(t testing.TB, set gate.Set) {
	t.Helper()
	if st, eb := s.call(t, http.MethodPut, "/v1/gates", set, nil); st != http.StatusOK {
		t.Fatalf("save gates: %d %+v", st, eb)
	}
}

func (s *stack) evaluate(t testing.TB, r gate.EvalRequest) gate.Result {
	t.Helper()
	var res gate.Result
	if st, eb := s.call(t, http.MethodPost, "/v1/gates/evaluate", r, &res); st != http.StatusOK {
		t.Fatalf("evaluate: %d %+v", st, eb)
	}
	return res
}

// moduleList is GET /v1/modules.
func (s *stack) moduleList(t testing.TB) []modules.Module {
	t.Helper()
	var l server.ModuleList
	if st, eb := s.call(t, http.MethodGet, "/v1/modules", nil, &l); st != http.StatusOK {
		t.Fatalf("list: %d %+v", st, eb)
	}
	return l.Modules
}

// blobFiles lists the files in the blob directory (temporary uploads included).
func (s *stack) blobFiles(t testing.TB) []string {
	t.Helper()
	ents, err := os.ReadDir(s.blobs)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// gateWith is a gate at point whose rule is rule, attached to preset.
func gateWith(name, point, task string, rule gate.Rule, onError string, timeout int) gate.Gate {
	if onError == "" {
		onError = gate.OnErrorContinue
	}
	if timeout == 0 {
		timeout = 60
	}
	return gate.Gate{Name: name, Enabled: true, Point: point, Task: task, Rule: &rule,
		Advanced: gate.Options{ShowInChat: true, OnError: onError, Targets: gate.TargetsAll, TimeoutSeconds: timeout, RedoLimit: 1}}
}

func moduleRule(name string) gate.Rule { return gate.Rule{Kind: runtime.KindModule, Name: name} }
func scriptRule(name string) gate.Rule { return gate.Rule{Kind: runtime.KindScript, Name: name} }

// onePreset attaches every gate to preset p.
func onePreset(p string, gates ...gate.Gate) gate.Set {
	pr := gate.Preset{Name: p}
	for _, g := range gates {
		pr.Gates = append(pr.Gates, gate.Attachment{Gate: g.Name, Enabled: true})
	}
	return gate.Set{Gates: gates, Presets: []gate.Preset{pr}}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// errDetails returns a coded error's details.
func errDetails(err error) any {
	var ce *errs.Error
	if errors.As(err, &ce) {
		return ce.Details
	}
	return nil
}

// testServer is server.New over deps, failing t on an error.
func testServer(t testing.TB, cfg server.Config, deps server.Deps) *server.Server {
	t.Helper()
	cfg.Deps = deps
	s, err := server.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

package gate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode"

	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/helper"
	"github.com/pixie-dev/pixie/internal/judge"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/bash"
	"github.com/pixie-dev/pixie/runtime/sandbox"
	"github.com/pixie-dev/pixie/server"
)

// exampleModel is a test model server speaking the OpenAI chat.completions wire format. It
// plays three roles, told apart by the request: the decision engine's one-token judgments
// (answered with log-probabilities), `pixie ask` (a translation), and gate tasks (gate output
// JSON).
type exampleModel struct {
	url string
	// faithful is the "yes" probability of the translation-faithfulness judgment.
	faithful atomic.Value // float64
	// claim is the select distribution of the claim audit (supported, contradicted, missing).
	claim atomic.Value // [3]float64
	// judgeStatus, when not 200, fails every judgment with that HTTP status.
	judgeStatus atomic.Int64
	// task answers gate tasks.
	task atomic.Value // func(user string) string

	mu    sync.Mutex
	tasks []string // user messages of gate tasks
	asks  int
}

var questionRE = regexp.MustCompile(`(?s)<state>\n(.*)\n</state>\n\nQuestion: ([^\n]*)`)

func hasHangul(s string) bool {
	for _, r := range s {
		if unicode.Is(unicode.Hangul, r) {
			return true
		}
	}
	return false
}

func newExampleModel(t *testing.T) *exampleModel {
	m := &exampleModel{}
	m.faithful.Store(0.9)
	m.claim.Store([3]float64{0.02, 0.02, 0.96})
	m.judgeStatus.Store(200)
	m.task.Store(func(string) string { return `{"verdict":"pass"}` })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
			Logprobs bool `json:"logprobs"`
		}
		raw, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(raw, &body); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		var system, user string
		for _, msg := range body.Messages {
			if msg.Role == "user" {
				user += msg.Content
			} else {
				system += msg.Content
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if body.Logprobs { // a judgment
			if st := int(m.judgeStatus.Load()); st != 200 {
				w.WriteHeader(st)
				fmt.Fprint(w, `{"error":{"message":"judge backend down","type":"server_error","param":null,"code":null}}`)
				return
			}
			mt := questionRE.FindStringSubmatch(user)
			if mt == nil {
				http.Error(w, "no question", 400)
				return
			}
			state, question := mt[1], mt[2]
			var probs map[string]float64
			switch {
			case strings.Contains(question, "written in Korean"):
				p := 0.02
				if hasHangul(state) {
					p = 0.97
				}
				probs = map[string]float64{"yes": p, "no": 1 - p}
			case strings.Contains(question, "keep every condition"):
				p := m.faithful.Load().(float64)
				probs = map[string]float64{"yes": p, "no": 1 - p}
			case strings.Contains(question, "tests passed supported"):
				c := m.claim.Load().([3]float64)
				probs = map[string]float64{"A": c[0], "B": c[1], "C": c[2]}
			default:
				http.Error(w, "unexpected question "+question, 400)
				return
			}
			writeLogprobAnswer(w, probs)
			return
		}
		var content string
		switch {
		case strings.Contains(system, "helper called from a gate script"):
			m.mu.Lock()
			m.asks++
			m.mu.Unlock()
			content = "번역: " + strings.TrimSpace(user[strings.LastIndex(user, "<input>")+len("<input>"):])
			content = strings.TrimSuffix(content, "</input>")
		default:
			m.mu.Lock()
			m.tasks = append(m.tasks, user)
			m.mu.Unlock()
			content = m.task.Load().(func(string) string)(user)
		}
		c, _ := json.Marshal(content)
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1717000000,"model":"pixie-test",
"choices":[{"index":0,"finish_reason":"stop","logprobs":null,"message":{"role":"assistant","content":%s}}],
"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, c)
	}))
	t.Cleanup(srv.Close)
	m.url = srv.URL + "/v1"
	return m
}

// writeLogprobAnswer answers a one-token judgment: the most likely token, with every valid
// answer among its top log-probabilities.
func writeLogprobAnswer(w io.Writer, probs map[string]float64) {
	best, bestP := "", -1.0
	var tops []string
	for tok, p := range probs {
		if p > bestP {
			best, bestP = tok, p
		}
		tops = append(tops, fmt.Sprintf(`{"token":%q,"logprob":%g,"bytes":null}`, tok, math.Log(p)))
	}
	fmt.Fprintf(w, `{"id":"chatcmpl-2","object":"chat.completion","created":1717000000,"model":"pixie-test",
"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":%q},
"logprobs":{"content":[{"token":%q,"logprob":%g,"bytes":null,"top_logprobs":[%s]}],"refusal":null}}],
"usage":{"prompt_tokens":20,"completion_tokens":1,"total_tokens":21}}`, best, best, math.Log(bestP), strings.Join(tops, ","))
}

func (m *exampleModel) lastTask() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.tasks) == 0 {
		return ""
	}
	return m.tasks[len(m.tasks)-1]
}

// TestExampleScripts runs the five example scripts of the spec, unchanged (each is copied
// verbatim from its guest's folder, guests/<name>/<name>.sh, where its WASM twin lives), through the real bash executor with the real pixie binary first on PATH,
// the helper answered by the server's helper routes, the decision engine's llm engine and a
// test model server that speaks the OpenAI wire format.
func TestExampleScripts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the pixie binary")
	}
	for _, tool := range []string{"jq", "git", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (.ci/run installs it): %v", tool, err)
		}
	}
	ctx := context.Background()
	bin := testutil.PixieBinary(t)
	fm := newExampleModel(t)
	pm, err := model.New(model.Config{Provider: "openai", BaseURL: fm.url, Model: "pixie-test", APIKey: "sk-test"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := badgerstore.Open(ctx, badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ex, err := bash.New(context.Background(), bash.Config{PixieBinDir: filepath.Dir(bin), Sandbox: []string{bin, sandbox.Verb}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close(context.Background()) })
	home := t.TempDir()
	scripts := filepath.Join(home, "commands")
	if err := os.MkdirAll(scripts, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"only-search-tools", "measure-subtitle", "translate-check", "claim-check", "list-changed-files"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "guests", n, n+".sh"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(scripts, n+".sh"), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	j, err := judge.New(t.Context(), judge.Config{PixieModel: pm})
	if err != nil {
		t.Fatal(err)
	}
	hs, err := helper.New(t.Context(), helper.Config{Instance: st.Instance(), Model: pm, Judge: j})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := gate.New(t.Context(), gate.Config{Store: st, Exec: runtime.Dispatcher{runtime.KindScript: ex}, Model: pm, Helpers: hs, Home: home})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(testServer(t, server.Config{Token: "admin-token-for-the-example-test"}, server.Deps{Store: st, Gates: svc, Helpers: hs}).Handler())
	t.Cleanup(ts.Close)
	hs.SetURL(ts.URL)

	policy := runtime.PolicyFull
	if sandbox.Probe() == nil {
		policy = runtime.PolicyWorkspaceWrite
	}
	cwd := t.TempDir()
	opts := gate.Options{ShowInChat: true, OnError: gate.OnErrorContinue, TimeoutSeconds: 60, RedoLimit: 1}
	mk := func(name, point, task, script string) gate.Gate {
		return gate.Gate{Name: name, Enabled: true, Point: point, Task: task, Rule: &gate.Rule{Kind: runtime.KindScript, Name: script}, Advanced: opts}
	}
	save := func(gs ...gate.Gate) {
		t.Helper()
		p := gate.Preset{Name: "dev"}
		for _, g := range gs {
			p.Gates = append(p.Gates, gate.Attachment{Gate: g.Name, Enabled: true})
		}
		if _, err := svc.Save(ctx, gate.Set{Gates: gs, Presets: []gate.Preset{p}}); err != nil {
			t.Fatal(err)
		}
	}
	turn := 0
	eval := func(point, target string, tool *gate.Tool) (gate.Result, gate.Record) {
		t.Helper()
		turn++
		res, err := svc.Evaluate(ctx, gate.EvalRequest{Point: point, Target: target, Turn: turn, Tool: tool,
			Session: gate.Session{ID: "s1", Preset: "dev", Cwd: cwd, Policy: policy}})
		if err != nil {
			t.Fatal(err)
		}
		if res.RunID == "" {
			t.Fatalf("no run: %+v", res)
		}
		rec, err := svc.Record(ctx, res.RunID)
		if err != nil {
			t.Fatal(err)
		}
		return res, rec
	}

	t.Run("only-search-tools", func(t *testing.T) {
		save(mk("digest", "tool-after", "The result has {{hooks.only-search-tools.text}} bytes. Digest it.", "only-search-tools.sh"))
		fm.task.Store(func(string) string { return `{"replace":"digest of the matches"}` })
		long := strings.Repeat("match: internal/gate/gate.go:12\n", 200)
		for _, c := range []struct {
			tool, target, action, by string
		}{
			{"bash", long, gate.ActionNone, gate.BySkippedByHook},
			{"grep", "short", gate.ActionNone, gate.BySkippedByHook},
			{"grep", long, gate.ActionReplaced, gate.ByPixie},
		} {
			res, _ := eval("tool-after", c.target, &gate.Tool{Name: c.tool, Args: json.RawMessage(`{}`)})
			if res.Action != c.action || res.ConcludedBy != c.by || res.Error != "" {
				t.Errorf("%s/%d bytes: %+v", c.tool, len(c.target), res)
			}
		}
		if want := fmt.Sprintf("The result has %d bytes.", len(long)); !strings.Contains(fm.lastTask(), want) {
			t.Errorf("the task lacks %q:\n%s", want, fm.lastTask())
		}
	})

	t.Run("measure-subtitle", func(t *testing.T) {
		save(mk("subs", "user-message", "Measured: {{hooks.measure-subtitle.data}} Stop if there are no cues.", "measure-subtitle.sh"))
		fm.task.Store(func(string) string { return `{"note":"2 cues"}` })
		srt := "1\n00:00:01,000 --> 00:00:02,000\nHello\n\n2\n00:00:03,000 --> 00:00:04,000\nWorld\n"
		res, rec := eval("user-message", srt, nil)
		want := fmt.Sprintf(`Measured: {"cues":2,"bytes":%d}`, len(strings.TrimRight(srt, "\n")))
		if !strings.Contains(fm.lastTask(), want) || res.ConcludedBy != gate.ByPixie || rec.Rule.ExitCode != 0 {
			t.Errorf("want %q in the task:\n%s\n%+v", want, fm.lastTask(), res)
		}
	})

	t.Run("translate-check", func(t *testing.T) {
		save(mk("translate", "turn-end", "", "translate-check.sh"))
		// Already Korean: one judgment ends it.
		res, rec := eval("turn-end", "모든 테스트가 통과했습니다.", nil)
		if res.ConcludedBy != gate.BySkippedByHook || len(rec.HelperCalls) != 1 || rec.HelperCalls[0].JudgeType != "bool" ||
			rec.HelperCalls[0].Label != "yes" || rec.HelperCalls[0].Engine != "llm" {
			t.Errorf("Korean answer: %+v %+v", res, rec.HelperCalls)
		}
		// English, faithful on the first try.
		fm.faithful.Store(0.9)
		res, rec = eval("turn-end", "All 12 tests pass. Run `go test ./...`.", nil)
		if res.ConcludedBy != gate.ByHookScript || len(res.Notes) != 1 || !strings.HasPrefix(res.Notes[0], "[한국어 번역]\n번역: All 12 tests pass.") {
			t.Errorf("translated: %+v", res)
		}
		if types := helperTypes(rec); types != "judge ask judge" {
			t.Errorf("helper calls %q", types)
		}
		if rec.Usage.InputTokens != 20+10+20 {
			t.Errorf("usage %+v", rec.Usage)
		}
		// Never faithful: the last translation is kept, not verified.
		fm.faithful.Store(0.3)
		res, rec = eval("turn-end", "Deleted 3 files.", nil)
		if len(res.Notes) != 1 || !strings.HasPrefix(res.Notes[0], "[한국어 번역 — 충실도 미확인]\n") {
			t.Errorf("not verified: %+v", res)
		}
		if types := helperTypes(rec); types != "judge ask judge ask judge" {
			t.Errorf("helper calls %q", types)
		}
		notes, err := svc.ChatNotes(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		last := notes[len(notes)-1]
		if last.RunID != res.RunID || last.Title != "한국어 번역 — 충실도 미확인" || !last.NotVerified {
			t.Errorf("chat note: %+v", last)
		}
		// A judgment error (pixie judge exits 2) becomes exit 1: the error policy applies.
		fm.judgeStatus.Store(500)
		res, _ = eval("turn-end", "Done.", nil)
		fm.judgeStatus.Store(200)
		if !strings.Contains(res.Error, "exited with status 1") || res.Action != gate.ActionNone {
			t.Errorf("judge failure: %+v", res)
		}
	})

	t.Run("claim-check", func(t *testing.T) {
		save(mk("claims", "turn-end", "Read {{hooks.claim-check.data}}; stop with a reason if the test claim is unsupported.", "claim-check.sh"))
		evidence := filepath.Join(cwd, ".last-test-run")
		// No evidence, confident "missing": a note.
		fm.claim.Store([3]float64{0.01, 0.01, 0.98})
		res, rec := eval("turn-end", "All tests passed.", nil)
		if res.ConcludedBy != gate.ByHookScript || len(res.Notes) != 1 || res.Notes[0] != "No recorded test run." {
			t.Errorf("missing: %+v", res)
		}
		if c := rec.HelperCalls; len(c) != 1 || c[0].JudgeType != "select" || c[0].Label != "missing" || c[0].Confidence == nil || *c[0].Confidence < 0.6 {
			t.Errorf("helper call: %+v", c)
		}
		// Contradicted: a redo with the reason.
		if err := os.WriteFile(evidence, []byte("FAIL: TestSave (0.01s)\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		fm.claim.Store([3]float64{0.01, 0.98, 0.01})
		res, _ = eval("turn-end", "All tests passed.", nil)
		if res.Action != gate.ActionSteered || !strings.Contains(res.Reason, "contradict") {
			t.Errorf("contradicted: %+v", res)
		}
		// Supported: skipped.
		fm.claim.Store([3]float64{0.98, 0.01, 0.01})
		if res, _ = eval("turn-end", "All tests passed.", nil); res.ConcludedBy != gate.BySkippedByHook {
			t.Errorf("supported: %+v", res)
		}
		// Unsure "missing": Pixie reads the judgment (exit 0, .data).
		fm.claim.Store([3]float64{0.3, 0.25, 0.45})
		fm.task.Store(func(string) string { return `{"verdict":"stop","reason":"Run the tests and show the output."}` })
		res, _ = eval("turn-end", "All tests passed.", nil)
		if res.ConcludedBy != gate.ByPixie || res.Action != gate.ActionSteered || !strings.Contains(fm.lastTask(), `"label":"missing"`) {
			t.Errorf("low confidence: %+v\n%s", res, fm.lastTask())
		}
	})

	t.Run("list-changed-files", func(t *testing.T) {
		save(mk("changes", "turn-end", "Changed files:\n{{hooks.list-changed-files.text}}\nNote anything unexpected.", "list-changed-files.sh"))
		git := func(args ...string) {
			cmd := exec.Command("git", args...)
			cmd.Dir = cwd
			cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@x", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@x")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v\n%s", args, err, out)
			}
		}
		git("init", "-q")
		if err := os.WriteFile(filepath.Join(cwd, "main.go"), []byte("package main\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		fm.task.Store(func(string) string { return `{"note":"main.go is new"}` })
		res, _ := eval("turn-end", "I added main.go.", nil)
		if !strings.Contains(fm.lastTask(), "Changed files:\n") || !strings.Contains(fm.lastTask(), "?? main.go") || res.Notes[0] != "main.go is new" {
			t.Errorf("task:\n%s\n%+v", fm.lastTask(), res)
		}
	})
}

func helperTypes(rec gate.Record) string {
	var out []string
	for _, c := range rec.HelperCalls {
		out = append(out, c.Type)
	}
	return strings.Join(out, " ")
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

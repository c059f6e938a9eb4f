package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/server"
)

const gateCLIToken = "cli-test-token-0123456789abcdef0123456789abcdef"

// gateCLIServer is a real server with the gate routes, a real store and the real OpenAI
// provider answering answerText from a test model server.
func gateCLIServer(t *testing.T, answerText string) (*httptest.Server, *gate.Service) {
	t.Helper()
	llm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		content, _ := json.Marshal(answerText)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,
"finish_reason":"stop","message":{"role":"assistant","content":%s}}],"usage":{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6}}`, content)
	}))
	t.Cleanup(llm.Close)
	m, err := model.New(model.Config{Provider: "openai", BaseURL: llm.URL + "/v1", Model: "m", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := badgerstore.Open(context.Background(), badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := gate.New(t.Context(), gate.Config{Store: st, Model: m, Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(testServer(t, server.Config{Token: gateCLIToken}, server.Deps{Store: st, Gates: svc}).Handler())
	t.Cleanup(ts.Close)
	return ts, svc
}

func runGateCLI(t *testing.T, ts *httptest.Server, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	args = append(args, "--url", ts.URL, "--token", gateCLIToken)
	code := runGate(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestGateCLI(t *testing.T) {
	ts, svc := gateCLIServer(t, `{"verdict":"stop","reason":"Name the file."}`)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := write("bad.yaml", `
gates:
  - name: fmt
    point: user-message
    task: "{{hooks.nope.text}}"
  - name: empty
    point: turn-end
presets:
  - name: dev
    gates: [{gate: ghost}]
`)
	code, _, stderr := runGateCLI(t, ts, "", "apply", "-f", bad)
	if code != 1 {
		t.Fatalf("refused apply exit %d", code)
	}
	for _, f := range []string{"gates[0].task:", "gates[1].task:", "presets[0].gates[0].gate:"} {
		if !strings.Contains(stderr, f) {
			t.Errorf("stderr lacks %s:\n%s", f, stderr)
		}
	}
	good := `
gates:
  - name: fmt
    point: user-message
    task: |
      Check that the instruction names a file.
    advanced:
      onError: stop
  - name: verify
    point: turn-end
    enabled: false
    task: Verify.
presets:
  - name: dev
    gates: [{gate: fmt}, {gate: verify, enabled: false}]
`
	code, out, stderr := runGateCLI(t, ts, good, "apply", "-f", "-")
	if code != 0 || !strings.Contains(out, "saved: 3 added, 0 changed, 0 removed; 2 gate(s) and 1 preset(s), revision 1") {
		t.Fatalf("apply: %d %q %q", code, out, stderr)
	}
	code, out, _ = runGateCLI(t, ts, "", "list")
	if code != 0 || !strings.Contains(out, "fmt") || !strings.Contains(out, "dev (off)") || !strings.Contains(out, "revision 1") {
		t.Errorf("list: %d\n%s", code, out)
	}
	code, out, _ = runGateCLI(t, ts, "", "show", "fmt")
	if code != 0 || !strings.Contains(out, "onError: stop") || !strings.Contains(out, "point: user-message") {
		t.Errorf("show: %d\n%s", code, out)
	}
	if code, _, _ = runGateCLI(t, ts, "", "show", "ghost"); code != 1 {
		t.Errorf("show ghost: %d", code)
	}
	code, out, _ = runGateCLI(t, ts, "", "try", "fmt", "--target", "fix it")
	if code != 0 || !strings.Contains(out, "action: rejected") || !strings.Contains(out, "reason: Name the file.") {
		t.Errorf("try saved: %d\n%s", code, out)
	}
	draft := write("draft.yaml", "name: d\npoint: tool-before\ntask: Check {{tool.name}}.\n")
	code, out, _ = runGateCLI(t, ts, "", "try", "-f", draft, "--target", "{}", "--tool", "bash", "--args", `{"command":"ls"}`, "--json")
	var tr gate.TryResult
	if code != 0 || json.Unmarshal([]byte(out), &tr) != nil || tr.Action != gate.ActionBlocked {
		t.Errorf("try draft: %d\n%s", code, out)
	}
	// Records: nothing from the trials; one from an evaluation.
	res, err := svc.Evaluate(context.Background(), gate.EvalRequest{Point: "user-message", Session: gate.Session{ID: "s9", Preset: "dev"}, Target: "x"})
	if err != nil {
		t.Fatal(err)
	}
	code, out, _ = runGateCLI(t, ts, "", "records", "--session", "s9")
	if code != 0 || !strings.Contains(out, res.RunID) || !strings.Contains(out, "rejected") {
		t.Errorf("records: %d\n%s", code, out)
	}
	code, out, _ = runGateCLI(t, ts, "", "records", res.RunID)
	if code != 0 || !strings.Contains(out, `"original": "x"`) {
		t.Errorf("record: %d\n%s", code, out)
	}
	for _, args := range [][]string{{"nope"}, {"show"}, {"apply"}, {"try", "fmt"}, {"records"}} {
		if code, _, _ := runGateCLI(t, ts, "", args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// TestGateApplyPrintsItsPlanAndPrunesOnlyWhenAsked is the attack where `pixie gate apply -f`
// deleted, without a word, every gate and preset missing from the file: apply now prints what it
// adds, changes and removes, keeps what the file leaves out (saying so), removes it only with
// --prune, saves nothing with --dry-run or when nothing changes, and refuses a misspelt key
// with its path and line before anything is sent.
func TestGateApplyPrintsItsPlanAndPrunesOnlyWhenAsked(t *testing.T) {
	ts, svc := gateCLIServer(t, "{}")
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	saved := func() gate.Set {
		s, err := svc.Definitions(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	apply := func(wantCode int, args ...string) (string, string) {
		t.Helper()
		code, out, errOut := runGateCLI(t, ts, "", append([]string{"apply"}, args...)...)
		if code != wantCode {
			t.Fatalf("apply %v: exit %d, want %d\n%s%s", args, code, wantCode, out, errOut)
		}
		return out, errOut
	}
	lines := func(out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w+"\n") {
				t.Errorf("output lacks the line %q:\n%s", w, out)
			}
		}
	}
	all := write("all.yaml", "gates:\n  - {name: a, point: user-message, task: Check A}\n  - {name: b, point: turn-end, task: Check B}\npresets:\n  - {name: dev, gates: [{gate: a}, {gate: b}]}\n")
	out, _ := apply(0, "-f", all)
	lines(out, "add gate a", "add gate b", "add preset dev", "saved: 3 added, 0 changed, 0 removed; 2 gate(s) and 1 preset(s), revision 1")

	// A file with one changed gate keeps the rest, and says so.
	onlyA := write("a.yaml", "gates:\n  - name: a\n    point: user-message\n    task: Check A again\n    advanced: {timeoutSeconds: 30}\n")
	out, _ = apply(0, "-f", onlyA)
	lines(out, "change gate a: advanced.timeoutSeconds, task", "keep gate b (not in the file; --prune removes it)",
		"keep preset dev (not in the file; --prune removes it)", "saved: 0 added, 1 changed, 0 removed; 2 gate(s) and 1 preset(s), revision 2")
	if s := saved(); len(s.Gates) != 2 || len(s.Presets) != 1 || len(s.Presets[0].Gates) != 2 {
		t.Fatalf("apply without --prune removed something: %+v", s)
	}
	// The same file again changes nothing and does not bump the revision.
	out, _ = apply(0, "-f", onlyA)
	lines(out, "nothing to change (revision 2)")
	if strings.Contains(out, "change gate") {
		t.Errorf("an unchanged gate was listed as changed:\n%s", out)
	}
	// --dry-run --prune lists the removals and saves nothing.
	out, _ = apply(0, "-f", onlyA, "--prune", "--dry-run")
	lines(out, "remove gate b", "remove preset dev", "dry run, nothing saved: 0 added, 0 changed, 2 removed would be saved over revision 2")
	if s := saved(); s.Revision != 2 || len(s.Gates) != 2 {
		t.Fatalf("a dry run saved: %+v", s)
	}
	// --prune makes the saved set exactly the file.
	out, _ = apply(0, "-f", onlyA, "--prune")
	lines(out, "remove gate b", "remove preset dev", "saved: 0 added, 0 changed, 2 removed; 1 gate(s) and 0 preset(s), revision 3")
	if s := saved(); len(s.Gates) != 1 || s.Gates[0].Name != "a" || len(s.Presets) != 0 {
		t.Fatalf("after --prune: %+v", s)
	}

	// Misspelt keys are refused with path and line, before anything is read or saved.
	typo := write("typo.yaml", "gates:\n  - name: a\n    point: user-message\n    taks: Check A\n    advanced:\n      onErrror: stop\npresets:\n  - name: dev\n    gates: [{gate: a, enabeld: false}]\n")
	_, errOut := apply(1, "-f", typo)
	for _, w := range []string{`line 4: gates[0].taks: unknown field (did you mean "task"?)`,
		`line 6: gates[0].advanced.onErrror: unknown field (did you mean "onError"?)`,
		`line 9: presets[0].gates[0].enabeld: unknown field (did you mean "enabled"?)`, "3 problems"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errOut)
		}
	}
	// A file that is empty, or not a mapping, is refused too.
	for _, body := range []string{"", "# nothing\n", "- a\n- b\n", "just text\n"} {
		apply(1, "-f", write("empty.yaml", body))
	}
	// The server's own refusals point at the file's lines as well.
	bad := write("bad.yaml", "gates:\n  - name: a\n    point: user-message\n    task: \"{{hooks.nope.text}}\"\n")
	_, errOut = apply(1, "-f", bad)
	if !strings.Contains(errOut, "line 4: gates[0].task:") {
		t.Errorf("server problem without its line:\n%s", errOut)
	}
	if s := saved(); s.Revision != 3 {
		t.Fatalf("a refused apply saved: %+v", s)
	}
}

// TestGateEndToEnd runs the real binary: `pixie serve` with a model from the environment, a
// script gate applied with `pixie gate apply`, an evaluation whose script calls `pixie ask`
// through the server's helper route, and `pixie gate records`.
func TestGateEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the pixie binary")
	}
	llm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,
"finish_reason":"stop","message":{"role":"assistant","content":"hello from pixie"}}],"usage":{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6}}`)
	}))
	defer llm.Close()
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "commands"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/bash\nanswer=$(pixie ask \"Say hello.\") || exit 1\nprintf '{\"note\":\"%s\"}' \"$answer\"; exit 11\n"
	if err := os.WriteFile(filepath.Join(home, "commands", "hello.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	p := testutil.StartServer(t, home, []string{"PIXIE_MODEL_PROVIDER=openai", "PIXIE_MODEL_BASE_URL=" + llm.URL + "/v1",
		"PIXIE_MODEL_MODEL=m", "PIXIE_MODEL_API_KEY=sk-e2e"})
	defer p.Stop(t)
	tok := p.Token(t)
	conn := []string{"--url", p.URL, "--token", tok}
	yml := filepath.Join(t.TempDir(), "gates.yaml")
	if err := os.WriteFile(yml, []byte("gates:\n  - name: hello\n    point: turn-end\n    rule: {name: hello.sh}\npresets:\n  - name: dev\n    gates: [{gate: hello}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if out, code := testutil.RunPixie(t, ctx, nil, append([]string{"gate", "apply", "-f", yml}, conn...)...); code != 0 {
		t.Fatalf("apply: %d %s", code, out)
	}
	body, _ := json.Marshal(gate.EvalRequest{Point: "turn-end", Target: "done", Turn: 1,
		Session: gate.Session{ID: "e2e", Preset: "dev", Cwd: t.TempDir(), Policy: "full"}})
	req, _ := http.NewRequest(http.MethodPost, p.URL+"/v1/gates/evaluate", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var res gate.Result
	err = json.NewDecoder(resp.Body).Decode(&res)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || len(res.Notes) != 1 || res.Notes[0] != "hello from pixie" || res.ConcludedBy != gate.ByHookScript {
		t.Fatalf("evaluate: %d %+v %v\n%s", resp.StatusCode, res, err, p.Stderr)
	}
	out, code := testutil.RunPixie(t, ctx, nil, append([]string{"gate", "records", "--session", "e2e"}, conn...)...)
	if code != 0 || !strings.Contains(out, res.RunID) || !strings.Contains(out, "hook-script") {
		t.Errorf("records: %d\n%s", code, out)
	}
	out, code = testutil.RunPixie(t, ctx, nil, append([]string{"gate", "records", res.RunID}, conn...)...)
	if code != 0 || !strings.Contains(out, `"type": "ask"`) {
		t.Errorf("record: %d\n%s", code, out)
	}
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

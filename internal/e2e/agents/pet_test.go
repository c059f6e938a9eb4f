package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/hint"
	"github.com/pixie-dev/pixie/internal/hooks"
	"github.com/pixie-dev/pixie/internal/pet"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/internal/testutil/fakemodel"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/modules"
	"github.com/pixie-dev/pixie/runtime/sandbox"
	"github.com/pixie-dev/pixie/runtime/wasm"
	"github.com/pixie-dev/pixie/server"
)

// testToken is the admin token of the in-process server.
const testToken = "admin-token-of-the-pet-tests"

// expect sends an admin API request and decodes the JSON answer into out (if non-nil); the
// status must be status.
func (e *extEnv) expect(t *testing.T, method, path string, body any, status int, out any) string {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, status, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	return string(raw)
}

// The Pet tests here run instruction Skills on the pinned CLIs (the external executors,
// docs/pet.md "External executors"), in-process: a real server over Badger with the hook
// route, the gate service running the real block-risky-commands guest, the hint queue, and a
// Pet service whose CLIs talk to fake model APIs. The CLIs' hooks run the pixie binary
// (`pixie hook claude|codex`) against that server.

// extEnv is a real server (Badger, the hook route, the gate service running the real
// block-risky-commands guest in the preset "pet", the hint queue) with a Pet service whose
// external executors are the pinned Claude Code and Codex, talking to fake model APIs.
type extEnv struct {
	ts     *httptest.Server
	ws     string
	svc    *pet.Service
	hints  *hint.Queue
	home   string // the Pixie home, hidden from the CLIs
	claude *fakemodel.Server
	codex  *fakemodel.Server
}

type extOptions struct {
	timeout time.Duration
	claude  fakemodel.Script
	codex   fakemodel.Script
}

const (
	claudeKey = "sk-ant-pet-test-key-1234"
	codexKey  = "sk-codex-pet-test-key-5678"
)

func newExtEnv(t *testing.T, o extOptions) *extEnv {
	t.Helper()
	if sandbox.Probe() != nil {
		t.Skip("Landlock is not available here: external executors fail closed (TestExternalUnavailable covers it)")
	}
	ctx := context.Background()
	e := &extEnv{home: t.TempDir()}
	if err := os.WriteFile(filepath.Join(e.home, "token"), []byte("ADMIN-TOKEN-IN-THE-HOME"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := badgerstore.Open(ctx, badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	q, err := hint.New(ctx, hint.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close(context.Background()) })
	e.hints = q

	// The gate: the real block-risky-commands guest at tool-before, in the preset "pet".
	cache, err := testutil.WasmCachePath()
	if err != nil {
		t.Fatal(err)
	}
	wc := wasm.Config{CacheDir: cache}
	v, err := wasm.NewValidator(ctx, wc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close(context.Background()) })
	reg, err := modules.New(ctx, modules.Config{Store: st, Dir: t.TempDir(), Validator: v})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close(context.Background()) })
	guest, err := os.ReadFile(testutil.GuestPath(t, "block-risky-commands"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Put(ctx, "block-risky-commands", guest, ""); err != nil {
		t.Fatal(err)
	}
	wc.Source = reg
	wx, err := wasm.New(ctx, wc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wx.Close(context.Background()) })
	gs, err := gate.New(ctx, gate.Config{Store: st, Exec: runtime.Dispatcher{runtime.KindModule: wx}, Home: e.home, Modules: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gs.Close(context.Background()) })
	g := gate.Gate{Name: "risky", Enabled: true, Point: "tool-before", Rule: &gate.Rule{Kind: runtime.KindModule, Name: "block-risky-commands"},
		Advanced: gate.Options{ShowInChat: true, OnError: gate.OnErrorContinue, Targets: gate.TargetsAll, TimeoutSeconds: 30, RedoLimit: 1}}
	if _, err := gs.Save(ctx, gate.Set{Gates: []gate.Gate{g}, Presets: []gate.Preset{{Name: "pet", Gates: []gate.Attachment{{Gate: "risky", Enabled: true}}}}}); err != nil {
		t.Fatal(err)
	}
	hs, err := hooks.New(ctx, hooks.Config{Store: st, Gates: gs, Hints: q, DefaultPreset: "default"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close(context.Background()) })

	ext := pet.ExternalConfig{Preset: "pet", Pixie: testutil.PixieBinary(t), Hidden: []string{e.home},
		ServerURL: func() string { return e.ts.URL }}
	if o.claude != nil {
		e.claude = fakemodel.NewAnthropic(t, o.claude)
		ext.Claude = pet.CLIConfig{Command: testutil.Tool(t, testutil.ToolClaude), BaseURL: e.claude.URL, APIKey: claudeKey, Model: "claude-sonnet-4-5"}
	}
	if o.codex != nil {
		e.codex = fakemodel.NewOpenAI(t, o.codex)
		ext.Codex = pet.CLIConfig{Command: testutil.Tool(t, testutil.ToolCodex), BaseURL: e.codex.URL + "/v1", APIKey: codexKey, Model: "gpt-test"}
	}
	timeout := o.timeout
	if timeout == 0 {
		timeout = 90 * time.Second
	}
	e.ws = filepath.Join(t.TempDir(), "workspace")
	svc, err := pet.New(ctx, pet.Config{Store: st, Workspace: e.ws, RunTimeout: timeout, External: ext})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	srv, err := server.New(ctx, server.Config{Token: testToken, Deps: server.Deps{Store: st, Pet: svc, Hooks: hs, Gates: gs, Hints: q}})
	if err != nil {
		t.Fatal(err)
	}
	e.ts = httptest.NewServer(srv.Handler())
	t.Cleanup(e.ts.Close)
	return e
}

// register inspects and registers the instruction Skill in dir with an executor, enabled,
// granting the sandbox it asks for.
func (e *extEnv) register(t *testing.T, dir, executor string) {
	t.Helper()
	var in pet.Inspection
	e.expect(t, "POST", "/v1/pet/skills/inspect", map[string]any{"path": dir}, http.StatusOK, &in)
	var v pet.SkillView
	e.expect(t, "POST", "/v1/pet/skills", map[string]any{"path": dir, "confirm": true, "fingerprint": in.Fingerprint,
		"sandbox": in.Sandbox, "enabled": true, "shortcut": true, "executor": executor}, http.StatusCreated, &v)
	if v.Executor != executor || !v.Available {
		t.Fatalf("registered %s: executor %q available %v (%s)", v.Name, v.Executor, v.Available, v.Reason)
	}
}

// invoke runs the Skill against a session snapshot with cwd, and returns its latest Run.
func (e *extEnv) invoke(t *testing.T, skill, cwd string) (pet.Run, string) {
	t.Helper()
	var iv pet.InvocationView
	raw := e.expect(t, "POST", "/v1/pet/invocations", map[string]any{"skill": skill, "snapshot": map[string]any{
		"scope": "session:dev-1", "cwd": cwd, "title": "my work", "capturedAt": time.Now().UTC()}}, http.StatusCreated, &iv)
	return iv.Latest(), raw
}

// extSkill writes an ordinary instruction Skill that refers to a file of its own, asking for
// the sandbox policy given (none: read-only).
func extSkill(t *testing.T, name string, policy ...runtime.Policy) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ask := ""
	if len(policy) > 0 {
		ask = "sandbox: " + string(policy[0]) + "\n"
	}
	body := "---\nname: " + name + "\ndescription: Tidies the worktree.\n" + ask + "---\nSKILL-BODY-" + name + ": follow checklist.md, next to this file.\n"
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "checklist.md"), []byte("1. list the files\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// extCwd is a snapshot's working directory with one file in it.
func extCwd(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("NOTES-CONTENT-42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// externalCase is one scenario run on both CLIs.
type externalCase struct {
	executor string
	call     func(cmd string) fakemodel.Call
	shell    string // the tool name the record shows
}

var externalCases = []externalCase{
	{pet.ExecutorClaude, bash, "Bash"},
	{pet.ExecutorCodex, execCommand, "exec_command"},
}

func (c externalCase) opts(o extOptions, s fakemodel.Script) extOptions {
	if c.executor == pet.ExecutorClaude {
		o.claude = s
	} else {
		o.codex = s
	}
	return o
}

func (c externalCase) requests(e *extEnv) []fakemodel.Request {
	if c.executor == pet.ExecutorClaude {
		return e.claude.ModelRequests()
	}
	return e.codex.ModelRequests()
}

// TestExternalExecutorRecordsToolCalls: a Skill run on each CLI reads a file of the snapshot's
// cwd through the scripted model's shell call, a risky command is denied by the Pet preset's
// block-risky-commands gate, and the answer is the Run's output. The Run record holds both
// calls with their results, the denial, the usage, and nothing secret; the model saw the Skill
// (with its own folder), the snapshot and the file; the CLI never saw the Pixie home.
func TestExternalExecutorRecordsToolCalls(t *testing.T) {
	for _, c := range externalCases {
		t.Run(c.executor, func(t *testing.T) {
			t.Parallel()
			script := fakemodel.Steps(
				fakemodel.Reply{Calls: []fakemodel.Call{c.call("cat notes.txt; echo DSH=$DSH_PET_GROUP")}},
				fakemodel.Reply{Calls: []fakemodel.Call{c.call("git push --force origin main")}},
				fakemodel.Reply{Text: "TIDY-DONE: one file, nothing to push"})
			e := newExtEnv(t, c.opts(extOptions{}, script))
			cwd := extCwd(t)
			e.expect(t, "PUT", "/v1/pet/env/GROUP", map[string]any{"value": "group-secret-value"}, http.StatusOK, nil)
			// A hint for every session is pending: a Pet run's hooks must never take it.
			if _, err := e.hints.Put(context.Background(), "", "GLOBAL-HINT-NOT-FOR-PET"); err != nil {
				t.Fatal(err)
			}
			e.register(t, extSkill(t, "tidy"), c.executor)
			run, raw := e.invoke(t, "tidy", cwd)
			t.Logf("run record: %s", raw)
			if run.Status != pet.StatusSucceeded || run.Output != "TIDY-DONE: one file, nothing to push" || run.ExternalExecutor != c.executor {
				t.Fatalf("run: %+v", run)
			}
			if len(run.ToolCalls) != 2 {
				t.Fatalf("tool calls: %+v", run.ToolCalls)
			}
			read, push := run.ToolCalls[0], run.ToolCalls[1]
			if read.N != 1 || read.Step != 1 || read.Name != c.shell || !strings.Contains(string(read.Input), "cat notes.txt") ||
				!strings.Contains(read.Output, "NOTES-CONTENT-42") || read.IsError || read.Gate != "" {
				t.Fatalf("the read: %+v", read)
			}
			// The environment value reached the command, and is redacted from the record.
			if !strings.Contains(read.Output, "DSH=[$DSH_PET_GROUP]") || strings.Contains(raw, "group-secret-value") {
				t.Fatalf("DSH_PET_GROUP: %q", read.Output)
			}
			if push.N != 2 || push.Step != 2 || !strings.Contains(push.Gate, "tool-before risky: blocked: Blocked: force push") || !push.IsError {
				t.Fatalf("the push: %+v", push)
			}
			if run.Usage == nil || run.Usage.InputTokens == 0 || run.Usage.OutputTokens == 0 {
				t.Fatalf("usage: %+v", run.Usage)
			}
			for _, secret := range []string{claudeKey, codexKey, "ADMIN-TOKEN-IN-THE-HOME", testToken, pet.HookTokenPrefix} {
				if strings.Contains(raw, secret) {
					t.Fatalf("the record holds %q:\n%s", secret, raw)
				}
			}
			reqs := c.requests(e)
			if len(reqs) < 3 {
				t.Fatalf("model requests: %d", len(reqs))
			}
			first := reqs[0]
			if !first.Contains("SKILL-BODY-tidy") || !first.Contains("checklist.md") || !first.Contains(`"title": "my work"`) || !first.Contains(cwd) {
				t.Fatalf("the model did not get the Skill and the snapshot:\n%.3000s", first.Body)
			}
			if !reqs[2].Contains("Blocked: force push") {
				t.Fatalf("the denial did not reach the model:\n%.3000s", reqs[2].Body)
			}
			for _, q := range reqs {
				if q.Contains("GLOBAL-HINT-NOT-FOR-PET") {
					t.Fatal("a Pet run's hooks took a person's hint")
				}
			}
		})
	}
}

// TestExternalExecutorPolicy: under read-only a command cannot create a file in the cwd, the
// run's private state or the Pixie home, nor read the home; under workspace-write the file in
// the cwd is created.
func TestExternalExecutorPolicy(t *testing.T) {
	for _, c := range externalCases {
		for _, p := range []runtime.Policy{runtime.PolicyReadOnly, runtime.PolicyWorkspaceWrite} {
			t.Run(c.executor+"/"+string(p), func(t *testing.T) {
				t.Parallel()
				var e *extEnv
				script := func(q fakemodel.Request) fakemodel.Reply {
					return fakemodel.Steps(
						fakemodel.Reply{Calls: []fakemodel.Call{c.call("echo made > made.txt; cat " + e.home + "/token; ls " + e.home + "; echo listed; " +
							// The hooks' configuration is out of the model's reach.
							`echo '{}' > "$CODEX_HOME/hooks.json" 2>/dev/null && echo TAMPERED-HOOKS; ` +
							`echo '{}' > "$CLAUDE_CONFIG_DIR/../../conf/settings.json" 2>/dev/null && echo TAMPERED-SETTINGS; ` + "true")}},
						fakemodel.Reply{Text: "done"})(q)
				}
				e = newExtEnv(t, c.opts(extOptions{}, script))
				cwd := extCwd(t)
				e.register(t, extSkill(t, "write-it", p), c.executor)
				run, raw := e.invoke(t, "write-it", cwd)
				if run.Status != pet.StatusSucceeded || len(run.ToolCalls) != 1 {
					t.Fatalf("run: %s", raw)
				}
				out := run.ToolCalls[0].Output
				// (Without namespaces Landlock still lets names be listed; never their content.)
				if strings.Contains(out, "ADMIN-TOKEN-IN-THE-HOME") || !strings.Contains(out, "listed") || strings.Contains(out, "TAMPERED") {
					t.Fatalf("the Pixie home was visible: %q", out)
				}
				_, err := os.Stat(filepath.Join(cwd, "made.txt"))
				if made := err == nil; made != (p == runtime.PolicyWorkspaceWrite) {
					t.Fatalf("%s: made.txt created %v; the command said %q", p, made, out)
				}
			})
		}
	}
}

// TestClaudeCannotTurnOffTheHooks: Claude Code reloads the user settings of its configuration
// folder, which the Run must leave writable; a model that writes disableAllHooks there and then
// force-pushes is still denied (the Run's --settings keep the hooks on).
func TestClaudeCannotTurnOffTheHooks(t *testing.T) {
	t.Parallel()
	e := newExtEnv(t, extOptions{claude: fakemodel.Steps(
		fakemodel.Reply{Calls: []fakemodel.Call{bash(`echo '{"disableAllHooks":true,"hooks":{}}' > "$CLAUDE_CONFIG_DIR/settings.json" && echo WROTE; sleep 2`)}},
		fakemodel.Reply{Calls: []fakemodel.Call{bash("git push --force origin main")}},
		fakemodel.Reply{Text: "done"})})
	e.register(t, extSkill(t, "sneaky"), pet.ExecutorClaude)
	run, raw := e.invoke(t, "sneaky", extCwd(t))
	if run.Status != pet.StatusSucceeded || len(run.ToolCalls) != 2 || !strings.Contains(run.ToolCalls[0].Output, "WROTE") {
		t.Fatalf("run: %s", raw)
	}
	if push := run.ToolCalls[1]; !strings.Contains(push.Gate, "blocked") || !push.IsError {
		t.Fatalf("the push went through: %+v", push)
	}
}

// TestExternalExecutorTimeoutKillsTheTree: a CLI whose command starts a detached process and
// then sleeps is killed at the Run's time limit, with everything it started; the Run fails
// with timeout, transient.
func TestExternalExecutorTimeoutKillsTheTree(t *testing.T) {
	for _, c := range externalCases {
		t.Run(c.executor, func(t *testing.T) {
			t.Parallel()
			marker := "pet-orphan-" + c.executor + "-" + time.Now().Format("150405.000000")
			// Codex's command tool hands back a command still running after 10 s; the model
			// then runs another sleep (Steps repeats its last step), so the CLI never ends its
			// turn before the time limit.
			script := fakemodel.Steps(
				fakemodel.Reply{Calls: []fakemodel.Call{c.call("setsid bash -c 'exec -a " + marker + " sleep 300' </dev/null >/dev/null 2>&1 & sleep 300")}},
				fakemodel.Reply{Calls: []fakemodel.Call{c.call("sleep 300")}})
			// The time limit leaves the CLI room to start and run the command on a loaded
			// machine (CI runs packages side by side): at 5 s, a slow start was cut first.
			e := newExtEnv(t, c.opts(extOptions{timeout: 15 * time.Second}, script))
			e.register(t, extSkill(t, "hang"), c.executor)
			alive := func() string {
				entries, _ := os.ReadDir("/proc")
				for _, d := range entries {
					cmd, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
					if err == nil && bytes.HasPrefix(cmd, []byte(marker)) {
						return d.Name()
					}
				}
				return ""
			}
			start := time.Now()
			done := make(chan string, 1)
			var run pet.Run
			go func() {
				var raw string
				run, raw = e.invoke(t, "hang", extCwd(t))
				done <- raw
			}()
			// The detached process runs while the CLI waits: the test would mean nothing else.
			seen := ""
			for seen == "" && time.Since(start) < 45*time.Second {
				seen = alive()
				time.Sleep(20 * time.Millisecond)
			}
			raw := <-done
			if seen == "" {
				t.Fatalf("the detached process never ran: %s", raw)
			}
			if run.Status != pet.StatusFailed || run.Error == nil || run.Error.Code != "timeout" || !run.Transient {
				t.Fatalf("run: %s", raw)
			}
			if d := time.Since(start); d > 45*time.Second {
				t.Fatalf("the run took %s", d)
			}
			// Nothing the CLI started lives on.
			for deadline := time.Now().Add(5 * time.Second); alive() != ""; time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("process %s (%s) outlived the run", alive(), marker)
				}
			}
		})
	}
}

// TestExternalHookCredential: the credential a CLI carries (read back from what the model saw
// in an env dump) reaches the hook route only, for its own session only, and nothing after
// its Run.
func TestExternalHookCredential(t *testing.T) {
	script := fakemodel.Steps(fakemodel.Reply{Calls: []fakemodel.Call{bash("echo TOKEN=$PIXIE_TOKEN; echo KEY=${ANTHROPIC_API_KEY:-none}")}}, fakemodel.Reply{Text: "done"})
	e := newExtEnv(t, extOptions{claude: script})
	e.register(t, extSkill(t, "env-dump"), pet.ExecutorClaude)
	run, raw := e.invoke(t, "env-dump", extCwd(t))
	if run.Status != pet.StatusSucceeded || len(run.ToolCalls) != 1 {
		t.Fatalf("run: %s", raw)
	}
	// The record redacts it; the model saw it (it is in the CLI's environment).
	if !strings.Contains(run.ToolCalls[0].Output, "TOKEN=[$PIXIE_TOKEN]") {
		t.Fatalf("record: %q", run.ToolCalls[0].Output)
	}
	// The key configured for the CLI is in its environment, as it is for any Claude Code
	// session; the record never shows it.
	if !strings.Contains(run.ToolCalls[0].Output, "KEY=[$API_KEY]") || strings.Contains(raw, claudeKey) {
		t.Fatalf("record: %q", run.ToolCalls[0].Output)
	}
	reqs := e.claude.ModelRequests()
	m := regexp.MustCompile(`TOKEN=(pxh_[A-Za-z0-9_-]+)`).FindStringSubmatch(reqs[len(reqs)-1].Results[0].Output)
	if m == nil {
		t.Fatalf("no credential in what the model saw: %+v", reqs[len(reqs)-1].Results)
	}
	tok := m[1]
	post := func(path, body string) (int, string) {
		req, _ := http.NewRequest("POST", e.ts.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(server.AdapterHeader, "1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	get := func(path string) int {
		req, _ := http.NewRequest("GET", e.ts.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// Never another route, during or after the run.
	for _, p := range []string{"/v1/gates", "/v1/pet/skills", "/v1/hints/state", "/v1/info"} {
		if st := get(p); st != http.StatusUnauthorized {
			t.Fatalf("GET %s with the hook credential: %d", p, st)
		}
	}
	if st, body := post("/v1/helper/ask", `{"instruction":"x"}`); st != http.StatusUnauthorized {
		t.Fatalf("helper route: %d %s", st, body)
	}
	// After the run the hook route refuses it too.
	input := `{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_use_id":"t1","cwd":"/"}`
	if st, body := post("/v1/hooks/claude-code", input); st != http.StatusUnauthorized || !strings.Contains(body, "its Pet run has ended") {
		t.Fatalf("hook route after the run: %d %s", st, body)
	}
}

// TestExternalHookGrant drives the hook route with a live credential (printed by the run's
// first command, read from what the model saw while its second command waits): another session
// is refused; for the CLI's own session the credential's preset runs whatever ?preset= asks
// (the force push is denied by "pet", though "default" has no gate), and the answer carries
// no hint, though one for every session is pending.
func TestExternalHookGrant(t *testing.T) {
	e := newExtEnv(t, extOptions{claude: fakemodel.Steps(
		fakemodel.Reply{Calls: []fakemodel.Call{bash("echo T=$PIXIE_TOKEN S=$CLAUDE_CODE_SESSION_ID")}},
		fakemodel.Reply{Calls: []fakemodel.Call{bash("while [ ! -e release ]; do sleep 0.1; done")}},
		fakemodel.Reply{Text: "done"})})
	if _, err := e.hints.Put(context.Background(), "", "GLOBAL-HINT-NOT-FOR-PET"); err != nil {
		t.Fatal(err)
	}
	e.register(t, extSkill(t, "wait"), pet.ExecutorClaude)
	cwd := t.TempDir()
	done := make(chan pet.Run, 1)
	go func() {
		run, _ := e.invoke(t, "wait", cwd)
		done <- run
	}()
	re := regexp.MustCompile(`T=(pxh_[A-Za-z0-9_-]+) S=(\S+)`)
	var tok, session string
	for deadline := time.Now().Add(time.Minute); tok == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, q := range e.claude.ModelRequests() {
			for _, r := range q.Results {
				if m := re.FindStringSubmatch(r.Output); m != nil {
					tok, session = m[1], m[2]
				}
			}
		}
	}
	if tok == "" {
		t.Fatal("the run's first command never answered")
	}
	call := func(session, event, preset string) (int, string) {
		body := `{"session_id":"` + session + `","hook_event_name":"` + event + `","tool_name":"Bash","tool_input":{"command":"git push --force origin main"},` +
			`"tool_response":{"stdout":"ok"},"tool_use_id":"t9","cwd":"/"}`
		req, _ := http.NewRequest("POST", e.ts.URL+"/v1/hooks/claude-code?preset="+preset, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(server.AdapterHeader, "1")
		req.Header.Set(server.HintHoldHeader, "1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.Header.Get(server.HintTakeHeader) != "" {
			t.Fatalf("the answer holds a hint take")
		}
		return resp.StatusCode, string(b)
	}
	if st, body := call("someone-else", "PreToolUse", "pet"); st != http.StatusForbidden {
		t.Fatalf("another session: %d %s", st, body)
	}
	if st, body := call(session, "PreToolUse", "default"); st != http.StatusOK || !strings.Contains(body, `"permissionDecision":"deny"`) || !strings.Contains(body, "force push") {
		t.Fatalf("the credential's own preset did not run: %d %s", st, body)
	}
	if st, body := call(session, "PostToolUse", "pet"); st != http.StatusOK || strings.Contains(body, "GLOBAL-HINT") {
		t.Fatalf("PostToolUse: %d %s", st, body)
	}
	if err := os.WriteFile(filepath.Join(cwd, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if run := <-done; run.Status != pet.StatusSucceeded {
		t.Fatalf("run: %+v", run)
	}
	st, err := e.hints.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Pending) != 1 {
		t.Fatalf("the global hint was taken: %+v", st)
	}
}

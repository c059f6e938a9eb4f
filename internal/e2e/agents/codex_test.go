package agents

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/internal/testutil/fakemodel"
)

// codexRun is one `codex exec --json` run.
type codexRun struct {
	ThreadID string // the hooks' session_id
	Final    string // the last agent message
	Stdout   string // the --json events
	Stderr   string
	HookRuns int // "hook: … Completed/Blocked/Failed" lines on stderr
	Failed   []string
}

func runCodex(t *testing.T, codex, proj string, env []string, prompt string) codexRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, codex, "exec", "--json", "--skip-git-repo-check", prompt)
	cmd.Dir = proj
	cmd.Env = append(baseEnv(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Stdin = strings.NewReader("")
	if err := cmd.Run(); err != nil {
		t.Fatalf("codex exec %q: %v\nstdout %s\nstderr %s", prompt, err, stdout.String(), stderr.String())
	}
	run := codexRun{Stdout: stdout.String(), Stderr: stderr.String()}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			Type     string `json:"type"`
			ThreadID string `json:"thread_id"`
			Item     struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"item"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		switch {
		case ev.Type == "thread.started":
			run.ThreadID = ev.ThreadID
		case ev.Type == "item.completed" && ev.Item.Type == "agent_message":
			run.Final = ev.Item.Text
		}
	}
	for _, line := range strings.Split(run.Stderr, "\n") {
		if strings.HasPrefix(line, "hook: ") && (strings.HasSuffix(line, " Completed") || strings.HasSuffix(line, " Blocked") || strings.HasSuffix(line, " Failed")) {
			run.HookRuns++
			if strings.HasSuffix(line, " Failed") {
				run.Failed = append(run.Failed, line)
			}
		}
	}
	if run.ThreadID == "" {
		t.Fatalf("codex exec %q: no thread id\nstdout %s\nstderr %s", prompt, stdout.String(), stderr.String())
	}
	return run
}

func execCommand(cmd string) fakemodel.Call {
	return fakemodel.Call{Name: "exec_command", Input: map[string]any{"cmd": cmd}}
}

// codexScenarios are the fake model's answers for every scenario of the Codex tests.
func codexScenarios() fakemodel.Script {
	return scripted(
		scenario{"S-DENY", fakemodel.Steps(fakemodel.Reply{Calls: []fakemodel.Call{execCommand("touch ran-deny.txt; echo DENY-ME")}}, fakemodel.Reply{Text: "done"})},
		scenario{"S-WITHHOLD", fakemodel.Steps(fakemodel.Reply{Calls: []fakemodel.Call{execCommand("printf 'SECRET-%s' VALUE42")}}, fakemodel.Reply{Text: "done"})},
		scenario{"S-REPLACE", fakemodel.Steps(fakemodel.Reply{Calls: []fakemodel.Call{execCommand("printf 'REDACT-%s' VALUE43")}}, fakemodel.Reply{Text: "done"})},
		scenario{"S-NOTE", fakemodel.Steps(fakemodel.Reply{Calls: []fakemodel.Call{execCommand("printf 'NOTE-%s' ME")}}, fakemodel.Reply{Text: "done"})},
		scenario{"S-REDO", func(q fakemodel.Request) fakemodel.Reply {
			if q.Contains("TE-REDO") {
				return fakemodel.Reply{Text: "SECOND-ANSWER"}
			}
			return fakemodel.Reply{Text: "FIRST-ANSWER"}
		}},
		scenario{"S-HINT", fakemodel.Steps(fakemodel.Reply{Calls: []fakemodel.Call{execCommand("echo one")}},
			fakemodel.Reply{Calls: []fakemodel.Call{execCommand("echo two")}}, fakemodel.Reply{Text: "done"})},
		scenario{"S-UM", fakemodel.Steps(fakemodel.Reply{Calls: []fakemodel.Call{execCommand("echo listing")}}, fakemodel.Reply{Text: "done"})},
		scenario{"S-AGENT", fakemodel.Steps(fakemodel.Reply{Calls: []fakemodel.Call{{Name: "spawn_agent", Input: map[string]any{"message": "AGENT-BAD check the files"}}}},
			fakemodel.Reply{Text: "done"})},
		scenario{"S-MCP", fakemodel.Steps(
			fakemodel.Reply{Calls: []fakemodel.Call{{Name: "hint_send", Input: map[string]any{"text": "MCP-HINT-2 REDACT-PAYLOAD"}}}},
			fakemodel.Reply{Calls: []fakemodel.Call{{Name: "hint_status", Input: map[string]any{"sessionId": "*"}}}},
			fakemodel.Reply{Text: "done"})},
		scenario{"S-UNTRUSTED", fakemodel.Steps(fakemodel.Reply{Calls: []fakemodel.Call{execCommand("touch ran-untrusted.txt; echo DENY-ME")}}, fakemodel.Reply{Text: "done"})},
	)
}

// rolloutsContaining lists Codex's session rollouts (its kept history) that hold s.
func rolloutsContaining(t *testing.T, codexHome, s string) []string {
	t.Helper()
	var out []string
	_ = filepath.Walk(filepath.Join(codexHome, "sessions"), func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), s) {
				out = append(out, p)
			}
		}
		return nil
	})
	return out
}

// TestCodex drives Codex 0.171.0 (`codex exec`) through every point, set up by `pixie init codex
// --write` as it writes the project and the user's Codex config (by default the model-API
// proxy as its model provider), first without and then with --trust, with only PIXIE_TOKEN in
// the agent's environment (the proxy's credential; the command hooks read the home's token
// file). What only the proxy can do is checked there; a second set-up with --no-proxy checks
// that the hooks alone still work as before.
func TestCodex(t *testing.T) {
	codex := testutil.Tool(t, testutil.ToolCodex)
	t.Parallel()
	srv := fakemodel.NewOpenAI(t, codexScenarios())
	r := newRig(t, "PIXIE_PROXY_OPENAI_URL="+srv.URL)

	proj, userHome, codexHome := t.TempDir(), t.TempDir(), t.TempDir()
	if out, err := exec.Command("git", "init", "-q", proj).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	// The user's own Codex configuration; init adds Pixie's model provider and selects it.
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte("model = \"gpt-test\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + userHome, "CODEX_HOME=" + codexHome, "PIXIE_TOKEN=" + r.token}
	initEnv := []string{"PIXIE_CODEX_BIN=" + codex, "HOME=" + userHome, "CODEX_HOME=" + codexHome}

	t.Run("untrusted hooks are skipped without a word, and doctor says so", func(t *testing.T) {
		out := r.pixieOK(proj, initEnv, "init", "codex", "--write", "--url", r.proc.URL, "--home", r.home)
		if !strings.Contains(out, "WITHOUT A WORD") || !strings.Contains(out, "pixie init codex --write --trust") || !strings.Contains(out, "wrote the model-API proxy into") {
			t.Fatalf("init does not explain Codex's trust or set up the proxy:\n%s", out)
		}
		res := runCodex(t, codex, proj, env, "S-UNTRUSTED: run it")
		// What the issue saw: no hook ran, nothing said so, and the command ran ungated.
		if res.HookRuns != 0 || strings.Contains(res.Stderr, "hook") && strings.Contains(res.Stderr, "trust") {
			t.Logf("codex said: %s", res.Stderr)
		}
		reqs := requestsOf(srv, "S-UNTRUSTED")
		if res.HookRuns != 0 || len(reqs) < 2 || reqs[1].Contains("TB-DENIED") || len(reqs[1].Results) == 0 || !strings.Contains(reqs[1].Results[0].Output, "DENY-ME") {
			t.Fatalf("expected Codex to skip the untrusted hooks and run the command: hook runs %d\n%s", res.HookRuns, dumpRequests(t, reqs))
		}
		dout, code := r.pixieRun(proj, initEnv, "doctor")
		if code != 1 || !strings.Contains(dout, "the project is not trusted") || !strings.Contains(dout, "fix: pixie init codex --write --trust") {
			t.Fatalf("doctor: %d\n%s", code, dout)
		}
	})

	out := r.pixieOK(proj, initEnv, "init", "codex", "--write", "--trust", "--url", r.proc.URL, "--home", r.home)
	if !strings.Contains(out, "recorded Codex's trust for 5 Pixie hooks") {
		t.Fatalf("init --trust:\n%s", out)
	}
	if dout, code := r.pixieRun(proj, initEnv, "doctor"); code != 0 {
		t.Fatalf("doctor after init --trust: %d\n%s", code, dout)
	}
	run := func(prompt string) codexRun {
		res := runCodex(t, codex, proj, env, prompt)
		if len(res.Failed) > 0 {
			t.Fatalf("Codex dropped Pixie's answers: %v\n%s", res.Failed, res.Stderr)
		}
		return res
	}

	t.Run("tool-before deny", func(t *testing.T) {
		run("S-DENY: run the command")
		reqs := requestsOf(srv, "S-DENY")
		if len(reqs) < 2 || len(reqs[1].Results) == 0 || !strings.Contains(reqs[1].Results[0].Output, "TB-DENIED: that command is not allowed.") {
			t.Fatalf("the deny reason did not reach the model:\n%s", dumpRequests(t, reqs))
		}
		if _, err := os.Stat(filepath.Join(proj, "ran-deny.txt")); err == nil {
			t.Fatal("the denied command ran")
		}
	})
	t.Run("the model requests go through the proxy", func(t *testing.T) {
		for _, q := range srv.Requests() {
			if q.Header.Get("X-Pixie-Token") != "" || strings.Contains(q.Header.Get("Authorization"), r.token) {
				t.Fatalf("request %d reached the fake with Pixie's token: %v", q.Index, q.Header)
			}
		}
		if len(srv.Requests()) == 0 {
			t.Fatal("no request reached the fake")
		}
	})
	t.Run("tool-after block withholds the result", func(t *testing.T) {
		run("S-WITHHOLD: run the command")
		reqs := requestsOf(srv, "S-WITHHOLD")
		if len(reqs) < 2 {
			t.Fatalf("requests: %d", len(reqs))
		}
		for _, q := range reqs[1:] {
			if q.Contains("SECRET-VALUE42") {
				t.Fatalf("the withheld result reached the model:\n%s", dumpRequests(t, reqs))
			}
		}
		if !reqs[1].Contains("TA-WITHHELD: the output held a secret.") {
			t.Fatalf("the reason did not reach the model:\n%s", dumpRequests(t, reqs))
		}
	})
	t.Run("tool-after replace", func(t *testing.T) {
		res := run("S-REPLACE: run the command")
		reqs := requestsOf(srv, "S-REPLACE")
		// Codex takes no replacement of a built-in tool's result, but sends the model a
		// block's reason in its place: the replacement rides there.
		if len(reqs) < 2 || len(reqs[1].Results) == 0 || reqs[1].Results[0].Output != "TA-REPLACED: a digest of the output." || reqs[1].Contains("REDACT-VALUE43") {
			t.Fatalf("%s\n%s", res.Stderr, dumpRequests(t, reqs))
		}
		if rec := r.findRecord(res.ThreadID, "tool-after"); rec.Action != "replaced" {
			t.Fatalf("record: %+v", rec)
		}
	})
	t.Run("a reason without a stop is a note, which a gate with showInChat off keeps to its record", func(t *testing.T) {
		res := run("S-NOTE: run the command")
		for _, q := range requestsOf(srv, "S-NOTE") {
			if q.Contains("TA-REASON-ONLY") {
				t.Fatal("a note reached the model")
			}
		}
		rec := r.findRecord(res.ThreadID, "tool-after")
		if rec.Action != "none" || !strings.Contains(strings.Join(rec.Notes, "\n"), "Reason: TA-REASON-ONLY") {
			t.Fatalf("record: %+v", rec)
		}
		// Codex 0.171's exec shows no hook systemMessage at all (checked: neither its output
		// nor --json events nor its rollout hold one, whatever the gate's showInChat), so
		// whether the quiet gate sent one is checked at the adapter (hooks'
		// TestServiceShowInChatOff) and with Claude Code; here, that nothing of it is kept.
		if f := rolloutsContaining(t, codexHome, "TA-REASON-ONLY"); len(f) != 0 || strings.Contains(res.Stdout+res.Stderr, "TA-REASON-ONLY") {
			t.Fatalf("Codex showed or kept the quiet gate's note: %v", f)
		}
	})
	t.Run("turn-end redo", func(t *testing.T) {
		res := run("S-REDO: answer")
		reqs := requestsOf(srv, "S-REDO")
		if res.Final != "SECOND-ANSWER" || len(reqs) != 2 || !reqs[1].Contains("TE-REDO: check your work and answer again.") {
			t.Fatalf("%+v\n%s", res, dumpRequests(t, reqs))
		}
		if rec := r.findRecord(res.ThreadID, "turn-end"); rec.Action != "steered" {
			t.Fatalf("record: %+v", rec)
		}
	})
	t.Run("agent message to a subagent", func(t *testing.T) {
		res := run("S-AGENT: delegate")
		reqs := requestsOf(srv, "S-AGENT")
		if len(reqs) < 2 || !reqs[1].Contains("AM-REJECT: name the files.") {
			t.Fatalf("the rejection did not reach the model:\n%s", dumpRequests(t, reqs))
		}
		for _, q := range srv.ModelRequests() {
			if q.Contains("AM-SUGGESTION") {
				t.Fatalf("the suggestion reached a model:\n%s", dumpRequests(t, []fakemodel.Request{q}))
			}
		}
		rec := r.findRecord(res.ThreadID, "agent-message")
		if rec.Agent != "child" || rec.Action != "rejected" || rec.Suggestion != "AM-SUGGESTION: list server/*.go" {
			t.Fatalf("record: %+v", rec)
		}
	})
	t.Run("a hint queued before the first prompt reaches the first request once, through the proxy", func(t *testing.T) {
		// codex exec names its thread only once it runs, so the hint is a global one, which a
		// new session's first step takes (the hooks took it at UserPromptSubmit before).
		r.call("POST", "/v1/hints", map[string]any{"text": "HINT-FIRST-8 use the staging database"}, nil)
		res := run("S-HINT: run two commands")
		reqs := requestsOf(srv, "S-HINT")
		if len(reqs) != 3 {
			t.Fatalf("%d requests:\n%s", len(reqs), dumpRequests(t, reqs))
		}
		for i, q := range reqs {
			if want := map[bool]int{true: 1, false: 0}[i == 0]; count(q, "HINT-FIRST-8") != want {
				t.Fatalf("request %d carries the hint %d times, want %d:\n%s", i, count(q, "HINT-FIRST-8"), want, dumpRequests(t, reqs))
			}
		}
		if !reqs[0].Contains("not part of the chat history, visible in this step only") {
			t.Fatalf("the hint did not come through the proxy:\n%s", dumpRequests(t, reqs[:1]))
		}
		if f := rolloutsContaining(t, codexHome, "HINT-FIRST-8"); len(f) != 0 {
			t.Fatalf("the hint is in Codex's rollouts: %v", f)
		}
		if f := rolloutsContaining(t, codexHome, res.ThreadID); len(f) == 0 {
			t.Fatal("no rollout of the run (the check above proves nothing)")
		}
	})
	t.Run("a replaced prompt reaches the model in place of the original, through the proxy", func(t *testing.T) {
		res := run("S-UM: ORIG-PROMPT delete everything")
		reqs := requestsOf(srv, "S-UM")
		if len(reqs) != 2 {
			t.Fatalf("%d requests:\n%s", len(reqs), dumpRequests(t, reqs))
		}
		for _, q := range srv.Requests() {
			if q.Header.Get("Session-Id") == res.ThreadID && (q.Contains("ORIG-PROMPT") || q.Contains("Treat the text below as the user's message")) {
				t.Fatalf("request %d holds the original prompt:\n%s", q.Index, dumpRequests(t, []fakemodel.Request{q}))
			}
		}
		for _, q := range reqs {
			if !q.Contains("S-UM: REWRITTEN-PROMPT run the listing") {
				t.Fatalf("request %d lacks the replacement:\n%s", q.Index, dumpRequests(t, reqs))
			}
		}
	})
	t.Run("MCP tools", func(t *testing.T) {
		res := run("S-MCP: leave a hint")
		reqs := requestsOf(srv, "S-MCP")
		if len(reqs) != 3 {
			t.Fatalf("requests: %d\n%s", len(reqs), dumpRequests(t, reqs))
		}
		// Codex passes its MCP servers no session id: hint_send said it queues a global hint,
		// and did; the next step of this session took it.
		if !reqs[1].Contains(`\"sessionId\":\"\"`) && !reqs[1].Contains(`"sessionId":""`) {
			t.Fatalf("hint_send did not queue a global hint:\n%s", dumpRequests(t, reqs[1:2]))
		}
		// Codex hands the hook an MCP tool's result as the structured CallToolResult
		// ({content, structuredContent}), which no hook can replace: through the proxy the
		// model gets the replacement in place of that function_call_output.
		if len(reqs[2].Results) < 2 || reqs[2].Results[1].Output != "TA-REPLACED: a digest of the output." {
			t.Fatalf("hint_status: results %+v", reqs[2].Results)
		}
		var actions []string
		for _, rec := range r.records(res.ThreadID) {
			if rec.Point == "tool-after" {
				actions = append(actions, rec.Action)
			}
		}
		if strings.Join(actions, ",") != "none,replaced" { // hint_send's result holds no REDACT-
			t.Fatalf("tool-after actions: %v", actions)
		}
	})
	t.Run("a changed hook is untrusted again", func(t *testing.T) {
		r.pixieOK(proj, initEnv, "init", "codex", "--write", "--preset", "other", "--url", r.proc.URL, "--home", r.home)
		dout, code := r.pixieRun(proj, initEnv, "doctor")
		if code != 1 || !strings.Contains(dout, "has not recorded trust for the hook") || !strings.Contains(dout, "(modified)") {
			t.Fatalf("doctor: %d\n%s", code, dout)
		}
		res := runCodex(t, codex, proj, env, "S-DENY: once more, with changed hooks")
		if res.HookRuns != 0 {
			t.Fatalf("Codex ran %d changed hooks", res.HookRuns)
		}
	})

	// --no-proxy: the hooks alone, with the user's own model provider (the fake), as before
	// the proxy was the default.
	hooksProj, hooksCodexHome := t.TempDir(), t.TempDir()
	if out, err := exec.Command("git", "init", "-q", hooksProj).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	cfg := "model = \"gpt-test\"\nmodel_provider = \"fake\"\n\n[model_providers.fake]\nname = \"fake\"\nbase_url = \"" + srv.URL + "/v1\"\nwire_api = \"responses\"\nenv_key = \"FAKE_OPENAI_KEY\"\n"
	if err := os.WriteFile(filepath.Join(hooksCodexHome, "config.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	hooksEnv := []string{"HOME=" + userHome, "CODEX_HOME=" + hooksCodexHome, "FAKE_OPENAI_KEY=k"}
	r.pixieOK(hooksProj, append([]string{"PIXIE_CODEX_BIN=" + codex}, hooksEnv...), "init", "codex", "--write", "--trust", "--no-proxy", "--url", r.proc.URL, "--home", r.home)
	if raw, _ := os.ReadFile(filepath.Join(hooksCodexHome, "config.toml")); strings.Contains(string(raw), "pixie") && strings.Contains(string(raw), "model_provider = \"pixie\"") {
		t.Fatalf("--no-proxy selected Pixie's model provider:\n%s", raw)
	}
	runHooks := func(prompt string) codexRun {
		res := runCodex(t, codex, hooksProj, hooksEnv, prompt)
		if len(res.Failed) > 0 {
			t.Fatalf("Codex dropped Pixie's answers: %v\n%s", res.Failed, res.Stderr)
		}
		return res
	}
	t.Run("no proxy: a hint is delivered once by the hooks and stays in the history", func(t *testing.T) {
		r.call("POST", "/v1/hints", map[string]any{"text": "HINT-ONCE-8 use the staging database"}, nil)
		runHooks("S-HINT: run two commands, hooks only")
		reqs := requestsOf(srv, "S-HINT: run two commands, hooks only")
		// Codex keeps additionalContext in the session's history (a developer message).
		for i, q := range reqs {
			if n := count(q, "HINT-ONCE-8"); n != 1 {
				t.Fatalf("request %d carries the hint %d times:\n%s", i, n, dumpRequests(t, reqs))
			}
		}
		if len(reqs) != 3 {
			t.Fatalf("%d requests:\n%s", len(reqs), dumpRequests(t, reqs))
		}
		st := r.hints()
		if len(st.Pending) != 0 || len(st.Consumed) == 0 || !strings.HasPrefix(st.Consumed[0].Text, "HINT-ONCE-8") {
			t.Fatalf("hint state: %+v", st)
		}
	})
	t.Run("no proxy: an MCP result's replacement is a note", func(t *testing.T) {
		res := runHooks("S-MCP: leave a hint, hooks only")
		reqs := requestsOf(srv, "S-MCP: leave a hint, hooks only")
		if len(reqs) != 3 || len(reqs[2].Results) < 2 || !strings.Contains(reqs[2].Results[1].Output, "REDACT-PAYLOAD") || reqs[2].Contains("TA-REPLACED") {
			t.Fatalf("hint_status: %s", dumpRequests(t, reqs))
		}
		var notes []string
		for _, rec := range r.records(res.ThreadID) {
			if rec.Point == "tool-after" {
				var full record
				r.call("GET", "/v1/gates/records/"+rec.ID, nil, &full)
				notes = append(notes, full.Notes...)
			}
		}
		if !strings.Contains(strings.Join(notes, "\n"), "TA-REPLACED") {
			t.Fatalf("the replacement did not become a note: %v", notes)
		}
	})
	t.Run("no proxy: a replaced prompt reaches the model as context beside the original", func(t *testing.T) {
		runHooks("S-UM: ORIG-PROMPT delete everything, hooks only")
		reqs := requestsOf(srv, "S-UM: ORIG-PROMPT delete everything, hooks only")
		if len(reqs) < 1 || !reqs[0].Contains("Treat the text below as the user's message") || !reqs[0].Contains("S-UM: REWRITTEN-PROMPT run the listing") {
			t.Fatalf("%s", dumpRequests(t, reqs))
		}
	})
}

package agents

import (
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

// claudeRun is one headless Claude Code run.
type claudeRun struct {
	Result    string `json:"result"`
	SessionID string `json:"session_id"`
	IsError   bool   `json:"is_error"`
	raw       string
}

// runClaude runs `claude -p prompt` in proj against the fake model, with env added to a clean
// environment (no Pixie variables unless env has them). ANTHROPIC_BASE_URL points at the fake:
// a project set up with the proxy overrides it in its settings (env.ANTHROPIC_BASE_URL), so the
// model requests go through Pixie, while Claude Code's start-up fetches answer at once.
func runClaude(t *testing.T, claude, proj, userHome string, srv *fakemodel.Server, prompt string, env ...string) claudeRun {
	t.Helper()
	return runClaudeArgs(t, claude, proj, userHome, srv, prompt, nil, env...)
}

// runClaudeArgs is runClaude with extra command-line arguments (--session-id).
func runClaudeArgs(t *testing.T, claude, proj, userHome string, srv *fakemodel.Server, prompt string, args []string, env ...string) claudeRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	argv := append([]string{"-p", prompt, "--output-format", "json", "--model", "claude-sonnet-4-5",
		"--allowedTools", "Bash,Agent,mcp__pixie__hint_send,mcp__pixie__hint_status"}, args...)
	cmd := exec.CommandContext(ctx, claude, argv...)
	cmd.Dir = proj
	cmd.Env = append(baseEnv(), "HOME="+userHome, "ANTHROPIC_BASE_URL="+srv.URL, "ANTHROPIC_API_KEY=sk-ant-test",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.Output()
	var run claudeRun
	if jerr := json.Unmarshal(out, &run); jerr != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("claude -p %q: %v\nstdout %s\nstderr %s", prompt, err, out, stderr)
	}
	run.raw = string(out)
	return run
}

// claudeTranscript is the session's transcript, which holds what Claude Code showed and kept
// (hook systemMessages included).
func claudeTranscript(t *testing.T, userHome, session string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(userHome, ".claude", "projects", "*", session+".jsonl"))
	if len(files) != 1 {
		t.Fatalf("no transcript for %s", session)
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func bash(cmd string) fakemodel.Call {
	return fakemodel.Call{Name: "Bash", Input: map[string]any{"command": cmd, "description": "run it"}}
}

// claudeScenarios are the fake model's answers for every scenario of the Claude Code tests.
func claudeScenarios() fakemodel.Script {
	return scripted(
		scenario{"S-DENY", func(q fakemodel.Request) fakemodel.Reply {
			if len(q.Results) == 0 {
				return fakemodel.Reply{Calls: []fakemodel.Call{bash("touch ran-deny.txt; echo DENY-ME")}}
			}
			return fakemodel.Reply{Text: "done"}
		}},
		scenario{"S-WITHHOLD", fakemodel.Steps(fakemodel.Reply{Calls: []fakemodel.Call{bash("printf 'SECRET-%s' VALUE42")}}, fakemodel.Reply{Text: "done"})},
		scenario{"S-REPLACE", fakemodel.Steps(fakemodel.Reply{Calls: []fakemodel.Call{bash("printf 'REDACT-%s' VALUE43")}},
			fakemodel.Reply{Calls: []fakemodel.Call{bash("echo second")}}, fakemodel.Reply{Text: "done"})},
		scenario{"S-NOTE", fakemodel.Steps(fakemodel.Reply{Calls: []fakemodel.Call{bash("printf 'NOTE-%s' ME")}}, fakemodel.Reply{Text: "done"})},
		scenario{"S-SHOWN", fakemodel.Steps(fakemodel.Reply{Text: "NOTE-SHOWN answer"})},
		scenario{"S-REDO", func(q fakemodel.Request) fakemodel.Reply {
			if q.Contains("TE-REDO") {
				return fakemodel.Reply{Text: "SECOND-ANSWER"}
			}
			return fakemodel.Reply{Text: "FIRST-ANSWER"}
		}},
		scenario{"S-HINT", fakemodel.Steps(fakemodel.Reply{Calls: []fakemodel.Call{bash("echo one")}},
			fakemodel.Reply{Calls: []fakemodel.Call{bash("echo two")}}, fakemodel.Reply{Text: "done"})},
		scenario{"S-UM", fakemodel.Steps(fakemodel.Reply{Calls: []fakemodel.Call{bash("echo listing")}}, fakemodel.Reply{Text: "done"})},
		scenario{"S-AGENT", fakemodel.Steps(fakemodel.Reply{Calls: []fakemodel.Call{{Name: "Agent",
			Input: map[string]any{"description": "check", "prompt": "AGENT-BAD check the files", "subagent_type": "general-purpose"}}}},
			fakemodel.Reply{Text: "done"})},
		scenario{"S-MCP", fakemodel.Steps(
			fakemodel.Reply{Calls: []fakemodel.Call{{Name: "mcp__pixie__hint_send", Input: map[string]any{"text": "MCP-HINT-1 REDACT-PAYLOAD"}}}},
			fakemodel.Reply{Calls: []fakemodel.Call{{Name: "mcp__pixie__hint_status", Input: map[string]any{"sessionId": "*"}}}},
			fakemodel.Reply{Text: "done"})},
	)
}

// sessionRequests are every recorded request of one Claude Code session (side requests too).
func sessionRequests(srv *fakemodel.Server, session string) []fakemodel.Request {
	var out []fakemodel.Request
	for _, q := range srv.Requests() {
		if q.Header.Get("X-Claude-Code-Session-Id") == session {
			out = append(out, q)
		}
	}
	return out
}

// TestClaudeCode drives Claude Code 2.1.328 through every point, set up by `pixie init claude
// --write` exactly as it writes the project (http hooks, .mcp.json, and by default the model-API
// proxy in the settings), with only PIXIE_TOKEN in the agent's environment as init tells. What
// only the proxy can do is checked there (a hint queued before the first prompt, a replaced
// prompt, a replaced built-in tool result); a second project set up with --no-proxy checks that
// the hooks alone still work as before.
func TestClaudeCode(t *testing.T) {
	claude := testutil.Tool(t, testutil.ToolClaude)
	t.Parallel()
	srv := fakemodel.NewAnthropic(t, claudeScenarios())
	r := newRig(t, "PIXIE_PROXY_ANTHROPIC_URL="+srv.URL)

	// The set-up, as init writes it.
	proj, userHome := t.TempDir(), t.TempDir()
	out := r.pixieOK(proj, []string{"HOME=" + userHome}, "init", "claude", "--write", "--url", r.proc.URL, "--home", r.home)
	if !strings.Contains(out, "export PIXIE_TOKEN") || !strings.Contains(out, "wrote the model-API proxy into") {
		t.Fatalf("init did not set up the proxy or say how to pass the token:\n%s", out)
	}
	env := []string{"PIXIE_TOKEN=" + r.token}
	run := func(prompt string) claudeRun { return runClaude(t, claude, proj, userHome, srv, prompt, env...) }

	t.Run("tool-before deny", func(t *testing.T) {
		res := run("S-DENY: run the command")
		reqs := requestsOf(srv, "S-DENY")
		if len(reqs) < 2 || !reqs[1].Contains("TB-DENIED: that command is not allowed.") {
			t.Fatalf("the deny reason did not reach the model: %+v\n%s", res, dumpRequests(t, reqs))
		}
		if _, err := os.Stat(filepath.Join(proj, "ran-deny.txt")); err == nil {
			t.Fatal("the denied command ran")
		}
	})
	t.Run("the model requests go through the proxy", func(t *testing.T) {
		// Pixie removes its token, which Claude Code sends as the apiKeyHelper's value, before
		// forwarding: the fake never sees it, only the user's key.
		for _, q := range srv.Requests() {
			if strings.Contains(q.Header.Get("Authorization")+q.Header.Get("X-Api-Key"), r.token) || q.Header.Get("X-Api-Key") != "sk-ant-test" {
				t.Fatalf("request %d reached the fake without going through the proxy: %v", q.Index, q.Header)
			}
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
	t.Run("tool-after replace of a built-in result, through the proxy", func(t *testing.T) {
		res := run("S-REPLACE: run the command")
		reqs := requestsOf(srv, "S-REPLACE")
		// Claude Code's Bash result is an object, which no hook can replace: the proxy puts the
		// replacement in place of that tool_result in this request and in every later one.
		if len(reqs) != 3 {
			t.Fatalf("requests: %d\n%s", len(reqs), dumpRequests(t, reqs))
		}
		for _, q := range reqs[1:] {
			if q.Contains("REDACT-VALUE43") || len(q.Results) < 1 || q.Results[0].Output != "TA-REPLACED: a digest of the output." {
				t.Fatalf("request %d: the model got %+v\n%s", q.Index, q.Results, dumpRequests(t, reqs))
			}
		}
		if rec := r.findRecord(res.SessionID, "tool-after"); rec.Action != "replaced" {
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
		rec := r.findRecord(res.SessionID, "tool-after")
		if rec.Action != "none" || !strings.Contains(strings.Join(rec.Notes, "\n"), "Reason: TA-REASON-ONLY") {
			t.Fatalf("record: %+v", rec)
		}
		// The tool-after gate has showInChat off: Claude Code was sent no note to show or keep.
		if tr := claudeTranscript(t, userHome, res.SessionID); strings.Contains(tr, "TA-REASON-ONLY") || strings.Contains(tr, "Pixie:") {
			t.Fatalf("the transcript holds the quiet gate's note:\n%s", tail(tr, 4000))
		}
		// The control: a gate that shows its results does reach the transcript.
		shown := run("S-SHOWN: answer")
		if tr := claudeTranscript(t, userHome, shown.SessionID); !strings.Contains(tr, "TE-NOTE-SHOWN") {
			t.Fatalf("the shown gate's note is not in the transcript (the check above proves nothing):\n%s", tail(tr, 4000))
		}
	})
	t.Run("turn-end redo", func(t *testing.T) {
		res := run("S-REDO: answer")
		reqs := requestsOf(srv, "S-REDO")
		if res.Result != "SECOND-ANSWER" || len(reqs) != 2 || !reqs[1].Contains("TE-REDO: check your work and answer again.") {
			t.Fatalf("%+v\n%s", res, dumpRequests(t, reqs))
		}
		if rec := r.findRecord(res.SessionID, "turn-end"); rec.Action != "steered" {
			t.Fatalf("record: %+v", rec)
		}
	})
	t.Run("agent message to a subagent", func(t *testing.T) {
		res := run("S-AGENT: delegate")
		reqs := requestsOf(srv, "S-AGENT")
		if len(reqs) < 2 || !reqs[1].Contains("AM-REJECT: name the files.") {
			t.Fatalf("the rejection did not reach the model:\n%s", dumpRequests(t, reqs))
		}
		// The stop's suggested replacement never reaches the main model (nor a subagent).
		for _, q := range srv.ModelRequests() {
			if q.Contains("AM-SUGGESTION") {
				t.Fatalf("the suggestion reached a model:\n%s", dumpRequests(t, []fakemodel.Request{q}))
			}
		}
		// The gate with the default target (Subagents) ran on the main agent's Agent call.
		rec := r.findRecord(res.SessionID, "agent-message")
		if rec.Agent != "child" || rec.Action != "rejected" || rec.Suggestion != "AM-SUGGESTION: list server/*.go" {
			t.Fatalf("record: %+v", rec)
		}
	})
	t.Run("a hint queued before the first prompt reaches the first request once, through the proxy", func(t *testing.T) {
		// What the issue measured: a session's hint queued before its first prompt went through
		// the UserPromptSubmit hook, into the history (2 of 2 requests). The hooks init wrote
		// with the proxy never take hints: the proxy adds it to the first model request only.
		session := "5e55e55e-0000-4000-8000-00000000c1a1"
		r.call("POST", "/v1/hints", map[string]any{"text": "HINT-FIRST-7 use the staging database", "sessionId": session}, nil)
		res := runClaudeArgs(t, claude, proj, userHome, srv, "S-HINT: run two commands", []string{"--session-id", session}, env...)
		if res.SessionID != session {
			t.Fatalf("session %q, want %q", res.SessionID, session)
		}
		reqs := requestsOf(srv, "S-HINT")
		if len(reqs) != 3 {
			t.Fatalf("%d requests:\n%s", len(reqs), dumpRequests(t, reqs))
		}
		for i, q := range reqs {
			if want := map[bool]int{true: 1, false: 0}[i == 0]; count(q, "HINT-FIRST-7") != want {
				t.Fatalf("request %d carries the hint %d times, want %d:\n%s", i, count(q, "HINT-FIRST-7"), want, dumpRequests(t, reqs))
			}
		}
		// Through the proxy: the proxy's header, at the end of the first request's user turn,
		// and not a system-reminder a hook's additionalContext would have become.
		if !strings.Contains(reqs[0].LastUser, "inserted by the user while the task is running; not part of the chat history") {
			t.Fatalf("the hint did not come through the proxy: %q", tail(reqs[0].LastUser, 600))
		}
		if tr := claudeTranscript(t, userHome, session); strings.Contains(tr, "HINT-FIRST-7") {
			t.Fatal("the hint is in Claude Code's transcript")
		}
		st := r.hints()
		if len(st.Pending) != 0 || len(st.Consumed) == 0 || !strings.HasPrefix(st.Consumed[0].Text, "HINT-FIRST-7") {
			t.Fatalf("hint state: %+v", st)
		}
	})
	t.Run("a replaced prompt reaches the model in place of the original, through the proxy", func(t *testing.T) {
		res := run("S-UM: ORIG-PROMPT delete everything")
		reqs := requestsOf(srv, "S-UM")
		if len(reqs) != 2 {
			t.Fatalf("%d requests:\n%s", len(reqs), dumpRequests(t, reqs))
		}
		for _, q := range sessionRequests(srv, res.SessionID) {
			if q.Contains("ORIG-PROMPT") || q.Contains("Treat the text below as the user's message") {
				t.Fatalf("request %d holds the original prompt:\n%s", q.Index, dumpRequests(t, []fakemodel.Request{q}))
			}
		}
		for _, q := range reqs {
			if !q.Contains("S-UM: REWRITTEN-PROMPT run the listing") {
				t.Fatalf("request %d lacks the replacement:\n%s", q.Index, dumpRequests(t, reqs))
			}
		}
		if rec := r.findRecord(res.SessionID, "user-message"); rec.Action != "replaced" {
			t.Fatalf("record: %+v", rec)
		}
	})
	t.Run("MCP tools", func(t *testing.T) {
		res := run("S-MCP: leave yourself a hint")
		reqs := requestsOf(srv, "S-MCP")
		if len(reqs) != 3 {
			t.Fatalf("requests: %d\n%s", len(reqs), dumpRequests(t, reqs))
		}
		// hint_send knew the calling session (CLAUDE_CODE_SESSION_ID): the session's next step,
		// the request after that very call, carried it (through the proxy).
		if !reqs[1].Contains(`"sessionId":"`+res.SessionID+`"`) || count(reqs[1], "MCP-HINT-1") != 2 || count(reqs[2], "MCP-HINT-1") != 1 {
			t.Fatalf("hint_send:\n%s", dumpRequests(t, reqs[1:]))
		}
		// An MCP tool's result reaches Claude Code's hook as text, so the tool-after gate's
		// replacement applies (updatedToolOutput): the model sees the digest, not the result.
		if !reqs[2].Contains("TA-REPLACED: a digest of the output.") || count(reqs[2], "REDACT-PAYLOAD") != count(reqs[1], "REDACT-PAYLOAD")-1 {
			t.Fatalf("hint_status was not replaced:\n%s", dumpRequests(t, reqs[1:]))
		}
	})
	t.Run("command hooks carry the URL and home", func(t *testing.T) {
		proj2 := t.TempDir()
		r.pixieOK(proj2, []string{"HOME=" + userHome}, "init", "claude", "--write", "--command", "--url", r.proc.URL, "--home", r.home)
		runClaude(t, claude, proj2, userHome, srv, "S-DENY: again, through command hooks", env...)
		reqs := requestsOf(srv, "S-DENY: again")
		if len(reqs) < 2 || !reqs[1].Contains("TB-DENIED") {
			t.Fatalf("the command hooks did not reach the server:\n%s", dumpRequests(t, reqs))
		}
		if _, err := os.Stat(filepath.Join(proj2, "ran-deny.txt")); err == nil {
			t.Fatal("the denied command ran")
		}
		if out, code := r.pixieRun(proj2, []string{"HOME=" + userHome}, "doctor"); code != 0 {
			t.Fatalf("doctor after init:\n%s", out)
		}
	})

	// --no-proxy: the hooks alone, as before the proxy was the default.
	hooksProj := t.TempDir()
	r.pixieOK(hooksProj, []string{"HOME=" + userHome}, "init", "claude", "--write", "--no-proxy", "--url", r.proc.URL, "--home", r.home)
	runHooks := func(prompt string) claudeRun { return runClaude(t, claude, hooksProj, userHome, srv, prompt, env...) }
	t.Run("no proxy: a hint is delivered once by the hooks and stays in the history", func(t *testing.T) {
		session := "5e55e55e-0000-4000-8000-00000000c1a2"
		r.call("POST", "/v1/hints", map[string]any{"text": "HINT-ONCE-7 use the staging database", "sessionId": session}, nil)
		runClaudeArgs(t, claude, hooksProj, userHome, srv, "S-HINT: run two commands, hooks only", []string{"--session-id", session}, env...)
		reqs := requestsOf(srv, "S-HINT: run two commands, hooks only")
		// Claude Code keeps additionalContext in the session's history: every request from the
		// first on carries the hint, once (it was injected once).
		for i, q := range reqs {
			if n := count(q, "HINT-ONCE-7"); n != 1 {
				t.Fatalf("request %d carries the hint %d times:\n%s", i, n, dumpRequests(t, reqs))
			}
		}
		if len(reqs) != 3 {
			t.Fatalf("%d requests:\n%s", len(reqs), dumpRequests(t, reqs))
		}
		st := r.hints()
		if len(st.Pending) != 0 || len(st.Consumed) == 0 || !strings.HasPrefix(st.Consumed[0].Text, "HINT-ONCE-7") {
			t.Fatalf("hint state: %+v", st)
		}
	})
	t.Run("no proxy: a built-in result's replacement is a note", func(t *testing.T) {
		res := runHooks("S-REPLACE: run the command, hooks only")
		reqs := requestsOf(srv, "S-REPLACE: run the command, hooks only")
		if len(reqs) < 2 || !reqs[1].Contains("REDACT-VALUE43") || reqs[1].Contains("TA-REPLACED") {
			t.Fatalf("%+v\n%s", res, dumpRequests(t, reqs))
		}
		rec := r.findRecord(res.SessionID, "tool-after")
		if rec.Action != "none" || !strings.Contains(strings.Join(rec.Notes, "\n"), "TA-REPLACED") {
			t.Fatalf("record: %+v", rec)
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

// TestClaudeCodeMissingToken: http hooks without PIXIE_TOKEN decide nothing, and say so in a
// systemMessage that Claude Code shows (kept in the session's transcript), rather than silence.
func TestClaudeCodeMissingToken(t *testing.T) {
	claude := testutil.Tool(t, testutil.ToolClaude)
	t.Parallel()
	srv := fakemodel.NewAnthropic(t, fakemodel.Steps(fakemodel.Reply{Calls: []fakemodel.Call{bash("echo DENY-ME")}}, fakemodel.Reply{Text: "done"}))
	r := newRig(t)
	proj, userHome := t.TempDir(), t.TempDir()
	// Without the token the proxy could not be reached either; the hooks' answer is under test.
	r.pixieOK(proj, []string{"HOME=" + userHome}, "init", "claude", "--write", "--no-proxy", "--url", r.proc.URL, "--home", r.home)
	res := runClaude(t, claude, proj, userHome, srv, "S-NOTOKEN: run it")
	if tr := claudeTranscript(t, userHome, res.SessionID); !strings.Contains(tr, "this hook call carried no valid token") {
		t.Fatalf("the missing token was not shown:\n%s", tail(tr, 4000))
	}
}

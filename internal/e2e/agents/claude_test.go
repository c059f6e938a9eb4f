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
// environment (no Pixie variables unless env has them).
func runClaude(t *testing.T, claude, proj, userHome string, srv *fakemodel.Server, prompt string, env ...string) claudeRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, claude, "-p", prompt, "--output-format", "json", "--model", "claude-sonnet-4-5",
		"--allowedTools", "Bash,Agent,mcp__pixie__hint_send,mcp__pixie__hint_status")
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

func bash(cmd string) fakemodel.Call {
	return fakemodel.Call{Name: "Bash", Input: map[string]any{"command": cmd, "description": "run it"}}
}

// TestClaudeCode drives Claude Code 2.1.328 through every point, set up by `pixie init claude
// --write` exactly as it writes the project (http hooks, .mcp.json), with only PIXIE_TOKEN in
// the agent's environment as init tells.
func TestClaudeCode(t *testing.T) {
	claude := testutil.Tool(t, testutil.ToolClaude)
	t.Parallel()
	r := newRig(t)
	srv := fakemodel.NewAnthropic(t, scripted(
		scenario{"S-DENY", func(q fakemodel.Request) fakemodel.Reply {
			if len(q.Results) == 0 {
				return fakemodel.Reply{Calls: []fakemodel.Call{bash("touch ran-deny.txt; echo DENY-ME")}}
			}
			return fakemodel.Reply{Text: "done"}
		}},
		scenario{"S-WITHHOLD", fakemodel.Steps(fakemodel.Reply{Calls: []fakemodel.Call{bash("printf 'SECRET-%s' VALUE42")}}, fakemodel.Reply{Text: "done"})},
		scenario{"S-REPLACE", fakemodel.Steps(fakemodel.Reply{Calls: []fakemodel.Call{bash("printf 'REDACT-%s' VALUE43")}}, fakemodel.Reply{Text: "done"})},
		scenario{"S-NOTE", fakemodel.Steps(fakemodel.Reply{Calls: []fakemodel.Call{bash("printf 'NOTE-%s' ME")}}, fakemodel.Reply{Text: "done"})},
		scenario{"S-REDO", func(q fakemodel.Request) fakemodel.Reply {
			if q.Contains("TE-REDO") {
				return fakemodel.Reply{Text: "SECOND-ANSWER"}
			}
			return fakemodel.Reply{Text: "FIRST-ANSWER"}
		}},
		scenario{"S-HINT", fakemodel.Steps(fakemodel.Reply{Calls: []fakemodel.Call{bash("echo one")}},
			fakemodel.Reply{Calls: []fakemodel.Call{bash("echo two")}}, fakemodel.Reply{Text: "done"})},
		scenario{"S-AGENT", fakemodel.Steps(fakemodel.Reply{Calls: []fakemodel.Call{{Name: "Agent",
			Input: map[string]any{"description": "check", "prompt": "AGENT-BAD check the files", "subagent_type": "general-purpose"}}}},
			fakemodel.Reply{Text: "done"})},
		scenario{"S-MCP", fakemodel.Steps(
			fakemodel.Reply{Calls: []fakemodel.Call{{Name: "mcp__pixie__hint_send", Input: map[string]any{"text": "MCP-HINT-1 REDACT-PAYLOAD"}}}},
			fakemodel.Reply{Calls: []fakemodel.Call{{Name: "mcp__pixie__hint_status", Input: map[string]any{"sessionId": "*"}}}},
			fakemodel.Reply{Text: "done"})},
	))

	// The set-up, as init writes it.
	proj, userHome := t.TempDir(), t.TempDir()
	out := r.pixieOK(proj, []string{"HOME=" + userHome}, "init", "claude", "--write", "--url", r.proc.URL, "--home", r.home)
	if !strings.Contains(out, "export PIXIE_TOKEN") {
		t.Fatalf("init did not say how to pass the token:\n%s", out)
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
	t.Run("tool-after replace of a built-in result is a note", func(t *testing.T) {
		res := run("S-REPLACE: run the command")
		reqs := requestsOf(srv, "S-REPLACE")
		// Claude Code's Bash result is an object: the gate's table turns a replacement of a
		// structured result into a note, so the model sees the original.
		if len(reqs) < 2 || !reqs[1].Contains("REDACT-VALUE43") || reqs[1].Contains("TA-REPLACED") {
			t.Fatalf("%+v\n%s", res, dumpRequests(t, reqs))
		}
		rec := r.findRecord(res.SessionID, "tool-after")
		if rec.Action != "none" || !strings.Contains(strings.Join(rec.Notes, "\n"), "TA-REPLACED") {
			t.Fatalf("record: %+v", rec)
		}
	})
	t.Run("a reason without a stop is a note", func(t *testing.T) {
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
	t.Run("a hint is delivered once and stays in the history", func(t *testing.T) {
		r.call("POST", "/v1/hints", map[string]any{"text": "HINT-ONCE-7 use the staging database"}, nil)
		run("S-HINT: run two commands")
		reqs := requestsOf(srv, "S-HINT")
		first := -1
		for i, q := range reqs {
			n := count(q, "HINT-ONCE-7")
			if n > 1 {
				t.Fatalf("request %d carries the hint %d times:\n%s", i, n, dumpRequests(t, reqs))
			}
			if n == 1 && first < 0 {
				first = i
			}
			// Claude Code keeps additionalContext in the session's history: every later
			// request carries the hint again, once (it was injected once).
			if first >= 0 && n != 1 {
				t.Fatalf("request %d lost the hint that Claude Code keeps in its history:\n%s", i, dumpRequests(t, reqs))
			}
		}
		if first < 0 || len(reqs) != 3 {
			t.Fatalf("the hint never reached the model (%d requests):\n%s", len(reqs), dumpRequests(t, reqs))
		}
		st := r.hints()
		if len(st.Pending) != 0 || len(st.Consumed) == 0 || !strings.HasPrefix(st.Consumed[0].Text, "HINT-ONCE-7") {
			t.Fatalf("hint state: %+v", st)
		}
	})
	t.Run("MCP tools", func(t *testing.T) {
		res := run("S-MCP: leave yourself a hint")
		reqs := requestsOf(srv, "S-MCP")
		if len(reqs) != 3 {
			t.Fatalf("requests: %d\n%s", len(reqs), dumpRequests(t, reqs))
		}
		// hint_send knew the calling session (CLAUDE_CODE_SESSION_ID): the session's next step,
		// the PostToolUse of that very call, delivered it.
		if !reqs[1].Contains("MCP-HINT-1") || !reqs[1].Contains(`"sessionId":"`+res.SessionID+`"`) {
			t.Fatalf("hint_send:\n%s", dumpRequests(t, reqs[1:2]))
		}
		// An MCP tool's result reaches Claude Code's hook as text, so the tool-after gate's
		// replacement applies (updatedToolOutput): the model sees the digest, not the result.
		if !reqs[2].Contains("TA-REPLACED: a digest of the output.") || count(reqs[2], "REDACT-PAYLOAD") != count(reqs[1], "REDACT-PAYLOAD") {
			t.Fatalf("hint_status was not replaced:\n%s", dumpRequests(t, reqs[1:]))
		}
	})
	t.Run("command hooks carry the URL and home", func(t *testing.T) {
		proj2 := t.TempDir()
		r.pixieOK(proj2, []string{"HOME=" + userHome}, "init", "claude", "--write", "--command", "--url", r.proc.URL, "--home", r.home)
		// No Pixie variable at all in the agent's environment.
		runClaude(t, claude, proj2, userHome, srv, "S-DENY: again, through command hooks")
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
}

// TestClaudeCodeMissingToken: http hooks without PIXIE_TOKEN decide nothing, and say so in a
// systemMessage that Claude Code shows (kept in the session's transcript), rather than silence.
func TestClaudeCodeMissingToken(t *testing.T) {
	claude := testutil.Tool(t, testutil.ToolClaude)
	t.Parallel()
	r := newRig(t)
	srv := fakemodel.NewAnthropic(t, fakemodel.Steps(fakemodel.Reply{Calls: []fakemodel.Call{bash("echo DENY-ME")}}, fakemodel.Reply{Text: "done"}))
	proj, userHome := t.TempDir(), t.TempDir()
	r.pixieOK(proj, []string{"HOME=" + userHome}, "init", "claude", "--write", "--url", r.proc.URL, "--home", r.home)
	res := runClaude(t, claude, proj, userHome, srv, "S-NOTOKEN: run it")
	transcripts, _ := filepath.Glob(filepath.Join(userHome, ".claude", "projects", "*", res.SessionID+".jsonl"))
	if len(transcripts) != 1 {
		t.Fatalf("no transcript for %s", res.SessionID)
	}
	raw, err := os.ReadFile(transcripts[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "this hook call carried no valid token") {
		t.Fatalf("the missing token was not shown:\n%s", tail(string(raw), 4000))
	}
}

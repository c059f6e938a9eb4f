package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/hint"
	"github.com/pixie-dev/pixie/internal/hookcmd"
	"github.com/pixie-dev/pixie/internal/hooks"
	"github.com/pixie-dev/pixie/internal/testutil"
)

// hookFixture reads a hook input from internal/hooks/testdata, with overrides.
func hookFixture(t testing.TB, name string, set map[string]any) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "internal", "hooks", "testdata", "input", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range set {
		m[k] = v
	}
	out, _ := json.Marshal(m)
	return out
}

// hookRun is one run of the command adapter.
type hookRun struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// runHookCmd runs the real binary as a command hook: input on stdin, env added to a clean
// environment.
func runHookCmd(t testing.TB, input []byte, env []string, args ...string) hookRun {
	t.Helper()
	return runWith(t, "", input, append(hookEnv(), env...), append([]string{"hook", "claude"}, args...)...)
}

// runIn runs the real binary in dir with exactly env.
func runIn(t testing.TB, dir string, env []string, args ...string) hookRun {
	t.Helper()
	return runWith(t, dir, nil, env, args...)
}

func runWith(t testing.TB, dir string, input []byte, env []string, args ...string) hookRun {
	t.Helper()
	return runArgv(t, []string{testutil.PixieBinary(t)}, dir, input, env, args...)
}

// hookAdapter is a program that runs the command adapter: `pixie hook`, or pixie-hook beside
// the test pixie (testutil.PixieBinary builds it there, as make build does).
type hookAdapter struct {
	name string
	argv []string // followed by claude|codex and the flags
}

func hookAdapters(t testing.TB) []hookAdapter {
	bin := testutil.PixieBinary(t)
	return []hookAdapter{{"pixie hook", []string{bin, "hook"}}, {hookcmd.Name, []string{filepath.Join(filepath.Dir(bin), hookcmd.Name)}}}
}

// hookRunner runs the adapter as a Claude Code command hook: input on stdin, env added to a
// clean environment.
type hookRunner func(input []byte, env []string, args ...string) hookRun

// eachAdapter runs body once with each adapter program: both run the same code, and must
// answer alike.
func eachAdapter(t *testing.T, body func(t *testing.T, ad hookAdapter, run hookRunner)) {
	for _, ad := range hookAdapters(t) {
		t.Run(ad.name, func(t *testing.T) {
			body(t, ad, func(input []byte, env []string, args ...string) hookRun {
				t.Helper()
				return runArgv(t, ad.argv, "", input, append(hookEnv(), env...), append([]string{"claude"}, args...)...)
			})
		})
	}
}

func runArgv(t testing.TB, argv []string, dir string, input []byte, env []string, args ...string) hookRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], append(append([]string(nil), argv[1:]...), args...)...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(input)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := hookRun{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return r
}

// hookEnv is the environment without Pixie settings or provider keys.
func hookEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PIXIE_") || strings.HasSuffix(k, "_API_KEY") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func TestHookCommandLiveServer(t *testing.T) {
	eachAdapter(t, func(t *testing.T, ad hookAdapter, run hookRunner) {
		home := filepath.Join(t.TempDir(), "home")
		p := testutil.StartServer(t, home, nil)
		defer p.Stop(t)
		tok := p.Token(t)
		api := hintHTTP{url: p.URL, token: tok, c: &http.Client{Timeout: 10 * time.Second}}
		if st, err := api.call("POST", "/v1/hints", map[string]any{"text": "use the staging database", "sessionId": "cmd-live"}, nil); err != nil || st != 200 {
			t.Fatalf("put hint: %d %v", st, err)
		}
		// The token comes from PIXIE_TOKEN, as Claude Code's environment would carry it; the home
		// is elsewhere so the token file cannot be what is used.
		env := []string{"PIXIE_SERVER_URL=" + p.URL, "PIXIE_TOKEN=" + tok, "PIXIE_HOME=" + t.TempDir()}

		r := run(hookFixture(t, "post_tool_use", map[string]any{"session_id": "cmd-live"}), env, "--preset", "default")
		var out hooks.Output
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil || out.HookSpecificOutput == nil ||
			!strings.Contains(out.HookSpecificOutput.AdditionalContext, "1. use the staging database") {
			t.Fatalf("PostToolUse: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
		}
		// Taken exactly once. The preset does not exist (a fresh server): the answer says so.
		r = run(hookFixture(t, "post_tool_use", map[string]any{"session_id": "cmd-live"}), env)
		if r.code != 0 || strings.Contains(r.stdout, "staging database") || !strings.Contains(r.stdout, `the preset \"default\" does not exist`) {
			t.Fatalf("second PostToolUse: exit %d stdout %s stderr %s", r.code, r.stdout, r.stderr)
		}
		// UserPromptSubmit starts the turn, Stop ends it.
		r = run(hookFixture(t, "user_prompt_submit", map[string]any{"session_id": "cmd-live"}), env)
		if r.code != 0 {
			t.Fatalf("UserPromptSubmit: exit %d %s", r.code, r.stderr)
		}
		var status struct {
			Running bool `json:"running"`
		}
		if st, err := api.call("POST", "/v1/tools/hint_status", map[string]any{"sessionId": "cmd-live"}, &status); err != nil || st != 200 || !status.Running {
			t.Fatalf("after UserPromptSubmit: %d %v running=%v", st, err, status.Running)
		}
		if r = run(hookFixture(t, "stop", map[string]any{"session_id": "cmd-live"}), env); r.code != 0 {
			t.Fatalf("Stop: exit %d %s", r.code, r.stderr)
		}
		if st, err := api.call("POST", "/v1/tools/hint_status", map[string]any{"sessionId": "cmd-live"}, &status); err != nil || st != 200 || status.Running {
			t.Fatalf("after Stop: %d %v running=%v", st, err, status.Running)
		}

		// A wrong token is a failure: fail closed blocks with the reason on stderr.
		bad := []string{"PIXIE_SERVER_URL=" + p.URL, "PIXIE_TOKEN=wrong", "PIXIE_HOME=" + t.TempDir()}
		r = run(hookFixture(t, "pre_tool_use", nil), bad, "--fail-closed")
		if r.code != 2 || !strings.Contains(r.stderr, "401") || r.stdout != "" {
			t.Fatalf("wrong token, fail closed: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
		if strings.Contains(r.stderr, "wrong") {
			t.Fatal("the token appears on stderr")
		}
		// Input the server refuses is a failure too; input that is not a hook input at all is a
		// usage error (exit 1, a non-blocking error for the host).
		r = run([]byte(`{"hook_event_name":"PreToolUse","session_id":"x"}`), env, "--fail-closed")
		if r.code != 2 || !strings.Contains(r.stderr, "tool_name") {
			t.Fatalf("input the server refuses, fail closed: exit %d stderr %q", r.code, r.stderr)
		}
		r = run([]byte(`not json`), env)
		if r.code != 1 || !strings.Contains(r.stderr, "not a hook input") {
			t.Fatalf("not JSON: exit %d stderr %q", r.code, r.stderr)
		}
	})
}

func TestHookCommandServerDown(t *testing.T) {
	eachAdapter(t, func(t *testing.T, ad hookAdapter, run hookRunner) {
		down := "http://" + testutil.FreeAddr(t) // nothing listens there
		base := []string{"PIXIE_SERVER_URL=" + down, "PIXIE_TOKEN=t", "PIXIE_HOME=" + t.TempDir()}
		pre := hookFixture(t, "pre_tool_use", nil)

		// Failing open is never silent: the user reads why the step went on unchecked.
		unchecked := func(stdout string) bool {
			var out hooks.Output
			return json.Unmarshal([]byte(stdout), &out) == nil && out.Decision == "" && out.HookSpecificOutput == nil &&
				strings.Contains(out.SystemMessage, "went on unchecked") && strings.Contains(out.SystemMessage, "cannot reach the Pixie server")
		}
		r := run(pre, base, "--fail-open")
		if r.code != 0 || !unchecked(r.stdout) || !strings.Contains(r.stderr, "failing open") {
			t.Errorf("fail open: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
		r = run(pre, base, "--fail-closed")
		if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "cannot reach the Pixie server") {
			t.Errorf("fail closed: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
		// The default is the configuration: hooks.failOpen false (closed) …
		if r = run(pre, base); r.code != 2 {
			t.Errorf("default (closed): exit %d", r.code)
		}
		// … and PIXIE_HOOKS_FAIL_OPEN turns it open.
		if r = run(pre, append(base, "PIXIE_HOOKS_FAIL_OPEN=true")); r.code != 0 || !unchecked(r.stdout) {
			t.Errorf("PIXIE_HOOKS_FAIL_OPEN=true: exit %d stdout %q", r.code, r.stdout)
		}
		// Stop never fails closed: blocking would make the agent keep working.
		if r = run(hookFixture(t, "stop", nil), base, "--fail-closed"); r.code != 0 || !unchecked(r.stdout) {
			t.Errorf("Stop, fail closed: exit %d stdout %q", r.code, r.stdout)
		}
		// Unhandled events answer {} without the server.
		if r = run(hookFixture(t, "notification", nil), base, "--fail-closed"); r.code != 0 || strings.TrimSpace(r.stdout) != "{}" || r.stderr != "" {
			t.Errorf("Notification: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
		if r = run(pre, base, "--fail-open", "--fail-closed"); r.code != 1 {
			t.Errorf("both flags: exit %d", r.code)
		}
	})
}

// TestHookCommandTimeout: a server that accepts the connection but never answers is given up
// on within the timeout.
func TestHookCommandTimeout(t *testing.T) {
	eachAdapter(t, func(t *testing.T, ad hookAdapter, run hookRunner) {
		env := []string{"PIXIE_SERVER_URL=http://" + testutil.SilentServer(t), "PIXIE_TOKEN=t", "PIXIE_HOME=" + t.TempDir()}
		r := run(hookFixture(t, "pre_tool_use", nil), env, "--timeout", "1s", "--fail-closed")
		if r.code != 2 || !strings.Contains(r.stderr, "did not answer within 1s") {
			t.Fatalf("exit %d stderr %q", r.code, r.stderr)
		}
		if r.took > 10*time.Second {
			t.Fatalf("took %s with a 1s timeout", r.took)
		}
		env = append(env, "PIXIE_HOOKS_TIMEOUT=1s", "PIXIE_HOOKS_FAIL_OPEN=true")
		r = run(hookFixture(t, "pre_tool_use", nil), env)
		if r.code != 0 || !strings.Contains(r.stdout, "went on unchecked") || !strings.Contains(r.stderr, "within 1s") {
			t.Fatalf("hooks.timeout from the environment: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
	})
}

// TestHookCommandRollsBackWhenItsAnswerCannotBeWritten is the attack where `pixie hook claude`
// confirmed a take although writing its answer failed (stdout > /dev/full), so the hint was
// consumed and never seen: the adapter now holds the take open, writes the answer, and only
// then confirms; when the write fails it rolls the take back (exit 1, a non-blocking error),
// and the next step delivers the hint. A hint is confirmed once, with no take left open.
func TestHookCommandRollsBackWhenItsAnswerCannotBeWritten(t *testing.T) {
	eachAdapter(t, func(t *testing.T, ad hookAdapter, run hookRunner) {
		full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
		if err != nil {
			t.Skip("no /dev/full here:", err)
		}
		defer full.Close()
		home := filepath.Join(t.TempDir(), "home")
		p := testutil.StartServer(t, home, nil)
		defer p.Stop(t)
		tok := p.Token(t)
		api := hintHTTP{url: p.URL, token: tok, c: &http.Client{Timeout: 10 * time.Second}}
		if st, err := api.call("POST", "/v1/hints", map[string]any{"text": "read the migration notes first", "sessionId": "devfull"}, nil); err != nil || st != 200 {
			t.Fatalf("put hint: %d %v", st, err)
		}
		env := append(hookEnv(), "PIXIE_SERVER_URL="+p.URL, "PIXIE_TOKEN="+tok, "PIXIE_HOME="+t.TempDir())
		input := hookFixture(t, "post_tool_use", map[string]any{"session_id": "devfull"})
		state := func() hint.Snapshot {
			t.Helper()
			var s hint.Snapshot
			if st, err := api.call("GET", "/v1/hints/state", nil, &s); err != nil || st != 200 {
				t.Fatalf("state: %d %v", st, err)
			}
			return s
		}

		for i := range 2 { // twice: a rolled-back hint is not lost to a second failed write either
			cmd := exec.Command(ad.argv[0], append(append([]string(nil), ad.argv[1:]...), "claude")...)
			cmd.Env, cmd.Stdin, cmd.Stdout = env, bytes.NewReader(input), full
			var errb bytes.Buffer
			cmd.Stderr = &errb
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(errb.String(), "returned to the queue") {
				t.Fatalf("run %d > /dev/full: %v\n%s", i, err, errb.String())
			}
			if s := state(); len(s.Pending) != 1 || s.Pending[0].Text != "read the migration notes first" || len(s.Consumed) != 0 {
				t.Fatalf("run %d: the hint is not pending after the failed write: %+v", i, s)
			}
		}

		r := run(input, []string{"PIXIE_SERVER_URL=" + p.URL, "PIXIE_TOKEN=" + tok, "PIXIE_HOME=" + t.TempDir()})
		if r.code != 0 || !strings.Contains(r.stdout, "read the migration notes first") {
			t.Fatalf("next step: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
		}
		s := state()
		if len(s.Pending) != 0 || len(s.Consumed) != 1 || s.Consumed[0].TakeID != "" {
			t.Fatalf("after a written answer the hint is not confirmed: %+v", s)
		}
		if r := run(input, []string{"PIXIE_SERVER_URL=" + p.URL, "PIXIE_TOKEN=" + tok, "PIXIE_HOME=" + t.TempDir()}); strings.Contains(r.stdout, "migration notes") {
			t.Fatalf("delivered twice: %s", r.stdout)
		}
		// An answer without hints that cannot be written is an error too, not a silent success.
		cmd := exec.Command(ad.argv[0], append(append([]string(nil), ad.argv[1:]...), "claude")...)
		cmd.Env, cmd.Stdin, cmd.Stdout = env, bytes.NewReader(input), full
		if err := cmd.Run(); err == nil {
			t.Fatal("a failed write of a hint-less answer exited 0")
		}
	})
}

// TestHookCommandReadsTheConfigurationFile: with no --url, --timeout or fail flag, both adapters
// take addr, hooks.timeout and hooks.failOpen from pixie.yaml (pixie-hook through `pixie config
// --get`); a pixie.yaml that does not load is ignored with a warning, and the call fails closed.
func TestHookCommandReadsTheConfigurationFile(t *testing.T) {
	eachAdapter(t, func(t *testing.T, ad hookAdapter, run hookRunner) {
		// A server that accepts and never answers: the time limit must come from the file.
		silent := testutil.SilentServer(t)
		home := t.TempDir()
		yaml := "addr: " + silent + "\nhooks:\n  failOpen: true\n  timeout: 1s\n"
		if err := os.WriteFile(filepath.Join(home, "pixie.yaml"), []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		env := []string{"PIXIE_TOKEN=t", "PIXIE_HOME=" + home}
		r := run(hookFixture(t, "pre_tool_use", nil), env)
		if r.code != 0 || !strings.Contains(r.stdout, "went on unchecked") || !strings.Contains(r.stderr, "did not answer within 1s") ||
			!strings.Contains(r.stderr, silent) || r.took > 10*time.Second {
			t.Fatalf("from pixie.yaml: exit %d after %s\nstdout %q\nstderr %q", r.code, r.took, r.stdout, r.stderr)
		}

		if err := os.WriteFile(filepath.Join(home, "pixie.yaml"), []byte("hooks:\n  failOpen: maybe\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		r = run(hookFixture(t, "pre_tool_use", nil), env, "--url", "http://"+testutil.FreeAddr(t))
		if r.code != 2 || !strings.Contains(r.stderr, "configuration ignored") || !strings.Contains(r.stderr, "hooks.failOpen") {
			t.Fatalf("a pixie.yaml that does not load: exit %d stderr %q", r.code, r.stderr)
		}
	})
}

// TestHookCommandHTTPS: an https server URL works through both adapters: pixie hook brings TLS,
// and pixie-hook, which links none, hands the call to it before reading stdin. The server's
// certificate is trusted through SSL_CERT_FILE, as a user's own CA would be.
func TestHookCommandHTTPS(t *testing.T) {
	var got []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, r.URL.Path+" "+r.Header.Get("Authorization")+" "+string(body))
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"over tls"}}`)
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	eachAdapter(t, func(t *testing.T, ad hookAdapter, run hookRunner) {
		got = nil
		input := hookFixture(t, "pre_tool_use", nil)
		r := run(input, []string{"SSL_CERT_FILE=" + ca, "PIXIE_TOKEN=tls-token", "PIXIE_HOME=" + t.TempDir()}, "--url", srv.URL, "--timeout", "20s", "--fail-closed")
		if r.code != 0 || !strings.Contains(r.stdout, `"permissionDecisionReason":"over tls"`) {
			t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
		if len(got) != 1 || got[0] != "/v1/hooks/claude-code Bearer tls-token "+string(input) {
			t.Fatalf("the server got %q", got)
		}
		// An untrusted certificate is a failure, not a silent downgrade.
		r = run(input, []string{"PIXIE_TOKEN=tls-token", "PIXIE_HOME=" + t.TempDir()}, "--url", srv.URL, "--timeout", "20s", "--fail-closed")
		if r.code != 2 || !strings.Contains(r.stderr, "certificate") {
			t.Fatalf("untrusted: exit %d stderr %q", r.code, r.stderr)
		}
	})
}

// TestConfigGet prints the values of the settings asked, a line each, from pixie.yaml and the
// environment, and refuses a key that does not exist.
func TestConfigGet(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "pixie.yaml"), []byte("hooks:\n  timeout: 45s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(hookEnv(), "PIXIE_HOOKS_FAIL_OPEN=true", "PIXIE_MODEL_API_KEY=sk-secret-value")
	r := runIn(t, "", env, "config", "--home", home, "--get", "hooks.timeout", "--get", "HOOKS.FAILOPEN", "--get", "addr", "--get", "model.apiKey")
	if r.code != 0 || strings.Contains(r.stdout, "sk-secret-value") {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 4 || lines[0] != "45s" || lines[1] != "true" || lines[2] != "127.0.0.1:7777" || lines[3] == "" {
		t.Fatalf("stdout %q", r.stdout)
	}
	if r = runIn(t, "", env, "config", "--home", home, "--get", "hooks.nope"); r.code == 0 || !strings.Contains(r.stderr, `no setting "hooks.nope"`) {
		t.Fatalf("unknown key: exit %d stderr %q", r.code, r.stderr)
	}
}

// TestHookAdapterHTTPSWithoutPixie: pixie-hook alone (no pixie beside it to hand an https call
// to) fails the call as an unreachable server does: closed blocks the step (exit 2), open lets
// it go on with a message. It never exits 1, which the host would let pass silently.
func TestHookAdapterHTTPSWithoutPixie(t *testing.T) {
	dir := t.TempDir()
	lone := filepath.Join(dir, hookcmd.Name)
	src, err := os.ReadFile(filepath.Join(filepath.Dir(testutil.PixieBinary(t)), hookcmd.Name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lone, src, 0o755); err != nil {
		t.Fatal(err)
	}
	input := hookFixture(t, "pre_tool_use", nil)
	env := append(hookEnv(), "PIXIE_TOKEN=t", "PIXIE_HOME="+t.TempDir())
	r := runArgv(t, []string{lone}, "", input, env, "claude", "--url", "https://127.0.0.1:1", "--timeout", "5s", "--fail-closed")
	if r.code != 2 || !strings.Contains(r.stderr, "needs `pixie hook`") || !strings.Contains(r.stderr, "blocked (fail-closed)") {
		t.Fatalf("fail closed: exit %d stderr %q", r.code, r.stderr)
	}
	r = runArgv(t, []string{lone}, "", input, env, "claude", "--url", "https://127.0.0.1:1", "--timeout", "5s", "--fail-open")
	if r.code != 0 || !strings.Contains(r.stdout, "went on unchecked") {
		t.Fatalf("fail open: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}

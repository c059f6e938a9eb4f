package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/internal/testutil/fakemodel"
)

// The real Claude Code and Codex CLIs, set up with `pixie init … --proxy --write`, run through
// a real `pixie serve` against fake model APIs. A tap in front of Pixie records the exact bytes
// each CLI sent, so the test can compare them with what the upstream received. A person queues
// a hint while the task runs (when the first model request arrives); it must reach the upstream
// in exactly one request (the next step), be absent from every later request and from the
// host's own transcript, and the run must finish normally. Run:
//
//	go test ./cmd/pixie -run 'ThroughTheProxy' -v

// tap is a recording reverse proxy in front of the Pixie server.
type tap struct {
	srv   *httptest.Server
	mu    sync.Mutex
	order [][]byte // the model requests' bodies, in order
}

func newTap(t *testing.T, target string) *tap {
	u, _ := url.Parse(target)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	tp := &tap{}
	tp.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/proxy/") && r.Method == http.MethodPost &&
			(strings.HasSuffix(r.URL.Path, "/messages") || strings.HasSuffix(r.URL.Path, "/responses")) {
			b, _ := io.ReadAll(r.Body)
			tp.mu.Lock()
			tp.order = append(tp.order, b)
			tp.mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(tp.srv.Close)
	return tp
}

func (tp *tap) sent() [][]byte {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([][]byte(nil), tp.order...)
}

// queueHint posts a hint for session to the server.
func queueHint(t *testing.T, srv *testutil.Proc, token, session, text string) {
	body, _ := json.Marshal(map[string]string{"text": text, "sessionId": session})
	r, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/hints", bytes.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+token)
	r.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Error(err)
		return
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("queueing the hint: %d", res.StatusCode)
	}
}

// filesContaining lists the files under dir whose bytes contain s.
func filesContaining(t *testing.T, dir, s string) []string {
	var out []string
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return nil
		}
		if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(s)) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// checkCarried checks the upstream's model requests against what the host sent: the hint in
// exactly one (the one carrying the second tool result's step), and every other request byte
// for byte as the host sent it. It returns how many upstream requests carried the hint.
func checkCarried(t *testing.T, got []fakemodel.Request, sent [][]byte, hintText string, wantAt int) int {
	t.Helper()
	var model []fakemodel.Request
	for _, r := range got {
		if r.Method == http.MethodPost && (strings.HasSuffix(r.Path, "/messages") || strings.HasSuffix(r.Path, "/responses")) {
			model = append(model, r)
		}
	}
	if len(model) != len(sent) {
		t.Fatalf("the host sent %d model requests, the upstream got %d", len(sent), len(model))
	}
	carried := 0
	for i, r := range model {
		if r.Contains(hintText) {
			carried++
			if len(r.Tools) == 0 || len(r.Results) != wantAt {
				t.Errorf("request %d carried the hint: tools %d, results %d (want the step after %d tool results)", i, len(r.Tools), len(r.Results), wantAt)
			}
			if bytes.Contains(sent[i], []byte(hintText)) {
				t.Errorf("request %d: the host itself sent the hint (it is in its history)", i)
			}
			continue
		}
		if !bytes.Equal(r.Body, sent[i]) {
			t.Errorf("request %d without hints changed on the way (%d bytes sent, %d received)", i, len(sent[i]), len(r.Body))
		}
		if bytes.Contains(sent[i], []byte(hintText)) {
			t.Errorf("request %d: the host sent the hint again (it entered its history)", i)
		}
	}
	return carried
}

func TestClaudeCodeThroughTheProxy(t *testing.T) {
	claude := testutil.Tool(t, testutil.ToolClaude)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	home := t.TempDir()
	pixieHome := filepath.Join(home, ".pixie")
	project := filepath.Join(home, "proj")
	configDir := filepath.Join(home, ".claude")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	const hintText = "HINT-7f3a: run the tests before you commit"
	const userKey = "sk-ant-e2e-user-key-31"
	// The script runs on the fake server's goroutines: it reads the server and token through atomics.
	var srvP atomic.Pointer[testutil.Proc]
	var tokenV atomic.Value
	var queued atomic.Bool
	var session atomic.Value
	fake := fakemodel.NewAnthropic(t, func(r fakemodel.Request) fakemodel.Reply {
		if len(r.Tools) == 0 {
			return fakemodel.Reply{Text: "ok"}
		}
		switch len(r.Results) {
		case 0:
			if queued.CompareAndSwap(false, true) {
				s := r.Header.Get("X-Claude-Code-Session-Id")
				session.Store(s)
				queueHint(t, srvP.Load(), tokenV.Load().(string), s, hintText) // a person drops a line while the task runs
			}
			return fakemodel.Reply{Text: "Checking.", Calls: []fakemodel.Call{{Name: "Bash", Input: map[string]any{"command": "echo first-step", "description": "first"}}}}
		case 1:
			return fakemodel.Reply{Text: "Again.", Calls: []fakemodel.Call{{Name: "Bash", Input: map[string]any{"command": "echo second-step", "description": "second"}}}}
		}
		return fakemodel.Reply{Text: "All done: proxied run finished."}
	})
	srv := testutil.StartServer(t, pixieHome, []string{"PIXIE_PROXY_ANTHROPIC_URL=" + fake.URL})
	token := srv.Token(t)
	srvP.Store(srv)
	tokenV.Store(token)
	tp := newTap(t, srv.URL)
	out, code := testutil.RunPixie(t, ctx, []string{"HOME=" + home}, "init", "claude", "--proxy", "--write",
		"--dir", project, "--home", pixieHome, "--url", tp.srv.URL)
	if code != 0 {
		t.Fatalf("pixie init: %d\n%s", code, out)
	}
	cmd := exec.CommandContext(ctx, claude, "-p", "check the build", "--output-format", "json", "--allowedTools", "Bash",
		"--strict-mcp-config") // the MCP entry init wrote is not under test here
	cmd.Dir = project
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "CLAUDE_CONFIG_DIR=" + configDir, "TERM=dumb",
		"PIXIE_TOKEN=" + token, "ANTHROPIC_API_KEY=" + userKey, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Offline, Claude Code spends about 18 s retrying its remote managed-settings fetch before
	// the first request (it reads the base URL from the settings file only after that).
	start := time.Now()
	err := cmd.Run()
	t.Logf("claude -p ran for %v", time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("claude: %v\nstdout: %s\nstderr: %s\nserver: %s", err, stdout.String(), stderr.String(), srv.Stderr)
	}
	var res struct {
		Result    string `json:"result"`
		IsError   bool   `json:"is_error"`
		SessionID string `json:"session_id"`
		NumTurns  int    `json:"num_turns"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || res.IsError || !strings.Contains(res.Result, "proxied run finished") {
		t.Fatalf("the run did not finish normally: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	if s, _ := session.Load().(string); s == "" || s != res.SessionID {
		t.Fatalf("the session header %q is not the run's session %q", s, res.SessionID)
	}
	n := checkCarried(t, fake.Requests(), tp.sent(), hintText, 1)
	if n != 1 {
		t.Fatalf("%d upstream requests carried the hint, want 1", n)
	}
	t.Logf("Claude Code: %d of %d upstream model requests carried the hint", n, len(tp.sent()))
	for _, r := range fake.Requests() {
		if r.Header.Get("X-Api-Key") != userKey || r.Header.Get("Authorization") != "" {
			t.Errorf("upstream credentials: x-api-key %q, authorization %q (want the user's key only)", r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"))
		}
	}
	// The host's transcript never held the hint; it does hold the run (a control).
	if f := filesContaining(t, configDir, hintText); len(f) != 0 {
		t.Fatalf("the hint is in Claude Code's files: %v", f)
	}
	if f := filesContaining(t, configDir, "second-step"); len(f) == 0 {
		t.Fatal("no transcript found under the config dir (the check above would prove nothing)")
	}
	if f := filesContaining(t, home, token); len(f) != 1 || f[0] != filepath.Join(pixieHome, "token") {
		t.Fatalf("the admin token is in files other than the home's token file: %v", f)
	}
	waitConsumed(t, srv, token, hintText)
}

func TestCodexThroughTheProxy(t *testing.T) {
	codex := testutil.Tool(t, testutil.ToolCodex)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	home := t.TempDir()
	pixieHome := filepath.Join(home, ".pixie")
	project := filepath.Join(home, "proj")
	codexHome := filepath.Join(home, ".codex")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	const hintText = "HINT-c0d3: prefer the staging database"
	// The script runs on the fake server's goroutines: it reads the server and token through atomics.
	var srvP atomic.Pointer[testutil.Proc]
	var tokenV atomic.Value
	var queued atomic.Bool
	var session atomic.Value
	fake := fakemodel.NewOpenAI(t, func(r fakemodel.Request) fakemodel.Reply {
		if len(r.Tools) == 0 {
			return fakemodel.Reply{Text: "ok"}
		}
		switch len(r.Results) {
		case 0:
			if queued.CompareAndSwap(false, true) {
				s := r.Header.Get("Session-Id")
				session.Store(s)
				queueHint(t, srvP.Load(), tokenV.Load().(string), s, hintText)
			}
			return fakemodel.Reply{Calls: []fakemodel.Call{{Name: "exec_command", Input: map[string]any{"cmd": "echo first-step"}}}}
		case 1:
			return fakemodel.Reply{Calls: []fakemodel.Call{{Name: "exec_command", Input: map[string]any{"cmd": "echo second-step"}}}}
		}
		return fakemodel.Reply{Text: "All done: proxied run finished."}
	})
	srv := testutil.StartServer(t, pixieHome, []string{"PIXIE_PROXY_OPENAI_URL=" + fake.URL})
	token := srv.Token(t)
	srvP.Store(srv)
	tokenV.Store(token)
	tp := newTap(t, srv.URL)
	env := []string{"HOME=" + home, "CODEX_HOME=" + codexHome}
	out, code := testutil.RunPixie(t, ctx, env, "init", "codex", "--proxy", "--write", "--dir", project, "--home", pixieHome, "--url", tp.srv.URL)
	if code != 0 {
		t.Fatalf("pixie init: %d\n%s", code, out)
	}
	cmd := exec.CommandContext(ctx, codex, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "-m", "gpt-test", "check the build")
	cmd.Dir = project
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "CODEX_HOME=" + codexHome, "TERM=dumb", "PIXIE_TOKEN=" + token, "NO_COLOR=1"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("codex exec ran for %v", time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("codex: %v\nstdout: %s\nstderr: %s\nserver: %s", err, stdout.String(), stderr.String(), srv.Stderr)
	}
	if !strings.Contains(stdout.String(), "proxied run finished") {
		t.Fatalf("the run did not finish normally:\n%s\n%s", stdout.String(), stderr.String())
	}
	if s, _ := session.Load().(string); s == "" {
		t.Fatal("Codex sent no Session-Id")
	}
	n := checkCarried(t, fake.Requests(), tp.sent(), hintText, 1)
	if n != 1 {
		t.Fatalf("%d upstream requests carried the hint, want 1", n)
	}
	t.Logf("Codex: %d of %d upstream model requests carried the hint", n, len(tp.sent()))
	if f := filesContaining(t, filepath.Join(codexHome, "sessions"), hintText); len(f) != 0 {
		t.Fatalf("the hint is in Codex's session rollouts: %v", f)
	}
	if f := filesContaining(t, filepath.Join(codexHome, "sessions"), "second-step"); len(f) == 0 {
		t.Fatal("no rollout found (the check above would prove nothing)")
	}
	if f := filesContaining(t, home, token); len(f) != 1 || f[0] != filepath.Join(pixieHome, "token") {
		t.Fatalf("the admin token is in files other than the home's token file: %v", f)
	}
	waitConsumed(t, srv, token, hintText)
}

// waitConsumed checks the queue: the hint is consumed, confirmed (no open take).
func waitConsumed(t *testing.T, srv *testutil.Proc, token, text string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/hints/state", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		var snap struct {
			Pending  []struct{ Text string }
			Consumed []struct{ Text, TakeID string }
		}
		_ = json.NewDecoder(res.Body).Decode(&snap)
		res.Body.Close()
		for _, h := range snap.Consumed {
			if h.Text == text && h.TakeID == "" && len(snap.Pending) == 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hint is not consumed and confirmed: %+v", snap)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// codexRig is a pixie serve in front of a fake OpenAI API, with Codex set up by
// `pixie init codex --proxy --write` in its own CODEX_HOME.
type codexRig struct {
	codex, home, codexHome, token string
	srv                           *testutil.Proc
	fake                          *fakemodel.Server
}

func newCodexRig(t *testing.T, ctx context.Context, script fakemodel.Script) *codexRig {
	t.Helper()
	r := &codexRig{codex: testutil.Tool(t, testutil.ToolCodex), home: t.TempDir()}
	r.codexHome = filepath.Join(r.home, ".codex")
	r.fake = fakemodel.NewOpenAI(t, script)
	pixieHome := filepath.Join(r.home, ".pixie")
	r.srv = testutil.StartServer(t, pixieHome, []string{"PIXIE_PROXY_OPENAI_URL=" + r.fake.URL, "PIXIE_HINTS_DELIVERY=proxy"})
	r.token = r.srv.Token(t)
	out, code := testutil.RunPixie(t, ctx, []string{"HOME=" + r.home, "CODEX_HOME=" + r.codexHome}, "init", "codex", "--proxy", "--write",
		"--dir", r.home, "--home", pixieHome, "--url", r.srv.URL)
	if code != 0 {
		t.Fatalf("pixie init: %d\n%s", code, out)
	}
	return r
}

// run runs `codex exec prompt` in a project of its own and returns its output.
func (r *codexRig) run(t *testing.T, ctx context.Context, name, prompt string) string {
	t.Helper()
	project := filepath.Join(r.home, name)
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Error(err)
		return ""
	}
	cmd := exec.CommandContext(ctx, r.codex, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "-m", "gpt-test", prompt)
	cmd.Dir = project
	cmd.Env = []string{"HOME=" + r.home, "PATH=" + os.Getenv("PATH"), "CODEX_HOME=" + r.codexHome, "TERM=dumb", "PIXIE_TOKEN=" + r.token, "NO_COLOR=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("codex: %v\n%s\nserver: %s", err, out, r.srv.Stderr)
	}
	return string(out)
}

// An upstream 500 on the request that carries the hint: the take is rolled back, Codex retries,
// and the retry carries the hint again; the model sees it in exactly one answered request.
func TestCodexThroughTheProxyRetriesAfter500(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const hintText = "HINT-500: read the error log first"
	// The script runs on the fake server's goroutines: it reaches the rig through an atomic.
	var rig atomic.Pointer[codexRig]
	var queued, failed atomic.Bool
	r := newCodexRig(t, ctx, func(q fakemodel.Request) fakemodel.Reply {
		r := rig.Load()
		if len(q.Tools) == 0 {
			return fakemodel.Reply{Text: "ok"}
		}
		switch len(q.Results) {
		case 0:
			if queued.CompareAndSwap(false, true) {
				queueHint(t, r.srv, r.token, q.Header.Get("Session-Id"), hintText)
			}
			return fakemodel.Reply{Calls: []fakemodel.Call{{Name: "exec_command", Input: map[string]any{"cmd": "echo step"}}}}
		}
		if q.Contains(hintText) && failed.CompareAndSwap(false, true) {
			return fakemodel.Reply{Status: http.StatusInternalServerError}
		}
		return fakemodel.Reply{Text: "All done after a retry."}
	})
	rig.Store(r)
	if out := r.run(t, ctx, "proj", "check the build"); !strings.Contains(out, "All done after a retry.") {
		t.Fatalf("the run did not finish normally:\n%s", out)
	}
	if !failed.Load() {
		t.Fatal("the upstream never failed the hint-carrying request")
	}
	// The failed attempt (500, rolled back) and its retry (answered, confirmed) carried the hint;
	// no later request did.
	carried := 0
	for _, q := range r.fake.Requests() {
		if q.Contains(hintText) {
			carried++
		}
	}
	if carried != 2 {
		t.Fatalf("the hint travelled in %d requests, want the failed one and its retry", carried)
	}
	t.Logf("Codex after a 500: the hint reached the upstream in %d requests (the failed one and its answered retry)", carried)
	waitConsumed(t, r.srv, r.token, hintText)
}

// Two Codex sessions at once, each with a hint of its own and one global hint between them:
// every hint reaches exactly one request, a session's only its own session.
func TestCodexConcurrentSessionsThroughTheProxy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The script runs on the fake server's goroutines: it reaches the rig through an atomic.
	var rig atomic.Pointer[codexRig]
	var mu sync.Mutex
	queued := map[string]bool{}
	want := map[string]string{} // hint text → session ("" global)
	r := newCodexRig(t, ctx, func(q fakemodel.Request) fakemodel.Reply {
		r := rig.Load()
		if len(q.Tools) == 0 {
			return fakemodel.Reply{Text: "ok"}
		}
		s := q.Header.Get("Session-Id")
		if len(q.Results) == 0 {
			mu.Lock()
			if !queued[s] {
				queued[s] = true
				text := "HINT-for-" + s
				want[text] = s
				queueHint(t, r.srv, r.token, s, text)
				if len(queued) == 2 {
					want["HINT-global"] = ""
					queueHint(t, r.srv, r.token, "", "HINT-global")
				}
			}
			mu.Unlock()
		}
		if len(q.Results) < 3 {
			return fakemodel.Reply{Calls: []fakemodel.Call{{Name: "exec_command", Input: map[string]any{"cmd": "echo step"}}}}
		}
		return fakemodel.Reply{Text: "All done."}
	})
	rig.Store(r)
	var wg sync.WaitGroup
	for _, name := range []string{"a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if out := r.run(t, ctx, name, "check the build"); !strings.Contains(out, "All done.") {
				t.Errorf("session %s did not finish normally:\n%s", name, out)
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(want) != 3 {
		t.Fatalf("queued %d hints, want 3", len(want))
	}
	reqs := r.fake.Requests()
	for text, session := range want {
		n := 0
		for _, q := range reqs {
			if q.Contains(text) {
				n++
				if session != "" && q.Header.Get("Session-Id") != session {
					t.Errorf("%s reached session %s", text, q.Header.Get("Session-Id"))
				}
			}
		}
		if n != 1 {
			t.Errorf("%s is in %d requests, want 1", text, n)
		}
	}
	t.Logf("two Codex sessions: %d model requests, each of the 3 hints in exactly one", len(reqs))
}

// A Codex subagent's requests (X-OpenAI-Subagent, its own Thread-Id) never take the session's
// hints: the hint queued at the main agent's first step reaches the main agent's next request
// only.
func TestCodexSubagentTakesNoHints(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const hintText = "HINT-sub: the main agent only"
	var rig atomic.Pointer[codexRig]
	var queued atomic.Bool
	// The main agent's turn ends only after the subagent asked the model once: spawn_agent
	// returns at once, and a main agent that answered first ended the run before its child
	// sent anything (the test then proved nothing, and failed so).
	childAsked := make(chan struct{})
	var childOnce sync.Once
	r := newCodexRig(t, ctx, func(q fakemodel.Request) fakemodel.Reply {
		r := rig.Load()
		if q.Header.Get("X-Openai-Subagent") != "" {
			childOnce.Do(func() { close(childAsked) })
		}
		if len(q.Tools) == 0 {
			return fakemodel.Reply{Text: "ok"}
		}
		if q.Header.Get("X-Openai-Subagent") != "" {
			return fakemodel.Reply{Text: "child done"}
		}
		if len(q.Results) == 0 {
			if queued.CompareAndSwap(false, true) {
				queueHint(t, r.srv, r.token, q.Header.Get("Session-Id"), hintText)
			}
			return fakemodel.Reply{Calls: []fakemodel.Call{{Name: "spawn_agent", Input: map[string]any{"message": "CHILD say hello"}}}}
		}
		select {
		case <-childAsked:
		case <-time.After(time.Minute):
		case <-ctx.Done():
		}
		return fakemodel.Reply{Text: "All done."}
	})
	rig.Store(r)
	if out := r.run(t, ctx, "proj", "delegate it"); !strings.Contains(out, "All done.") {
		t.Fatalf("the run did not finish normally:\n%s", out)
	}
	children, carried := 0, 0
	for _, q := range r.fake.Requests() {
		child := q.Header.Get("X-Openai-Subagent") != ""
		if child {
			children++
		}
		if q.Contains(hintText) {
			carried++
			if child || q.Header.Get("Thread-Id") != q.Header.Get("Session-Id") {
				t.Errorf("a subagent request carried the hint (X-OpenAI-Subagent %q, Thread-Id %q)", q.Header.Get("X-Openai-Subagent"), q.Header.Get("Thread-Id"))
			}
		}
	}
	if children == 0 {
		t.Fatal("Codex sent no subagent request (the check proves nothing)")
	}
	if carried != 1 {
		t.Fatalf("the hint is in %d requests, want 1", carried)
	}
	t.Logf("Codex with a subagent: %d subagent requests, the hint in %d main-agent request", children, carried)
}

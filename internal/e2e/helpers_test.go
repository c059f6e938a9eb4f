package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pixie-dev/pixie/internal/testutil"
)

// modelServer is an OpenAI-compatible chat.completions endpoint (the real wire format the
// openai-go SDK speaks). A request whose prompt asks for the gate output (it names the
// "verdict" field) gets gateAnswer; any other request (an instruction Skill) gets skillAnswer.
type modelServer struct {
	srv         *httptest.Server
	gateAnswer  string
	skillAnswer string
	mu          sync.Mutex
	calls       int
}

func newModelServer(t *testing.T, gateAnswer, skillAnswer string) *modelServer {
	m := &modelServer{gateAnswer: gateAnswer, skillAnswer: skillAnswer}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *modelServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	if r.Header.Get("Authorization") != "Bearer k" {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":{"message":"bad key","type":"invalid_request_error","code":"invalid_api_key"}}`)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Content any `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.calls++
	m.mu.Unlock()
	answer := m.skillAnswer
	if bytes.Contains(body, []byte(`verdict`)) {
		answer = m.gateAnswer
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-e2e", "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": answer}}},
		"usage": map[string]any{"prompt_tokens": 120, "completion_tokens": 24, "total_tokens": 144},
	})
}

// modelArgs are the serve flags that point the Pixie model at m.
func (m *modelServer) modelArgs() []string {
	return []string{"--set", "model.provider=openai", "--set", "model.baseUrl=" + m.srv.URL + "/v1",
		"--set", "model.model=m", "--set", "model.apiKey=k"}
}

// adminAPI calls a route with the admin token, as an agent host would, and decodes the answer.
func adminAPI(t *testing.T, p *testutil.Proc, method, path string, body, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, p.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+p.Token(t))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
}

// viewport sets the page's size (the window's outer size includes no chrome in headless mode,
// but the emulated viewport makes screenshots exactly w×h).
func viewport(t *testing.T, b *Browser, w, h int64) {
	t.Helper()
	b.Run(t, fmt.Sprintf("viewport %dx%d", w, h), chromedp.EmulateViewport(w, h))
}

// open goes to a Studio route (a hash such as "#/scope") in the loaded page and waits for sel.
func open(t *testing.T, b *Browser, hash, sel string) {
	t.Helper()
	b.Run(t, "open "+hash, chromedp.Evaluate[chromedp.Void](`location.hash = `+jsq(hash)), chromedp.WaitVisible(chromedp.CSS(sel)))
}

// waitFor polls a JavaScript condition until it is true.
func waitFor(t *testing.T, b *Browser, what, cond string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool]("!!("+cond+")", chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		b.Shot(t, "FAILED-wait-"+sanitize(what))
		t.Fatalf("waiting for %s (%s): %v", what, cond, err)
	}
}

// jsq quotes s as a JavaScript string literal.
func jsq(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// textOf returns the text of the first element matching css (empty when none does).
func textOf(t *testing.T, b *Browser, css string) string {
	t.Helper()
	return Eval[string](t, b, fmt.Sprintf(`(document.querySelector(%s)||{}).innerText||""`, jsq(css)))
}

func mustContain(t *testing.T, what, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Fatalf("%s: %q does not contain %q", what, got, w)
		}
	}
}

// noConsoleErrors fails on uncaught exceptions and CSP violations the page reported.
func noConsoleErrors(t *testing.T, b *Browser) {
	t.Helper()
	errs := Eval[[]string](t, b, `window.__pixieErrors || []`)
	if len(errs) > 0 {
		t.Fatalf("page errors: %q", errs)
	}
}

// watchErrors records uncaught errors, rejected promises and CSP violations in the page.
func watchErrors(t *testing.T, b *Browser) {
	t.Helper()
	Eval[bool](t, b, `(() => {
		if (window.__pixieErrors) return true;
		window.__pixieErrors = [];
		window.addEventListener('error', (e) => window.__pixieErrors.push('error: ' + e.message));
		window.addEventListener('unhandledrejection', (e) => window.__pixieErrors.push('rejection: ' + (e.reason && e.reason.message || e.reason)));
		document.addEventListener('securitypolicyviolation', (e) => window.__pixieErrors.push('csp: ' + e.violatedDirective + ' ' + e.blockedURI));
		return true;
	})()`)
}

// shot writes a screenshot of the whole page: the viewport is stretched to the document's
// height for the capture (Chromium's beyond-viewport capture is not reliable after the
// viewport was changed), then put back.
func shot(t *testing.T, b *Browser, name string) {
	t.Helper()
	size := Eval[[]int64](t, b, `[window.innerWidth, window.innerHeight, Math.max(document.documentElement.scrollHeight, document.body.scrollHeight)]`)
	w, h, full := size[0], size[1], size[2]
	if full > h {
		viewport(t, b, w, full)
		defer viewport(t, b, w, h)
	}
	b.Shot(t, name)
}

// click is chromedp.Click that survives a re-render. The Studio redraws a list when a server
// event arrives, so the node the query found can be gone by the time the mouse is sent
// ("Could not find node with given id"); the query is then run again on the new DOM.
func click[S chromedp.Selectable](sel S, opts ...chromedp.QueryOption) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		for {
			_, err := chromedp.Click(sel, opts...)(ctx, tg)
			if err == nil || !nodeGone(err) {
				return err
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
}

// nodeGone reports whether err says the node was removed from the page between the query and
// the use.
func nodeGone(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Could not find node with given id") || strings.Contains(s, "Node is detached") || strings.Contains(s, "No node with given id")
}

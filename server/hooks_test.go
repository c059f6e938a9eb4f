package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/hint"
	"github.com/pixie-dev/pixie/internal/hooks"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// hookEnv is a server with the real hook adapter over a real store, hint queue and gate
// service; the Pixie model is the real OpenAI provider talking to a test server whose answer
// the test sets.
type hookEnv struct {
	st     *store.Store
	ts     *httptest.Server
	hints  *hint.Queue
	answer atomic.Value // string: the model's answer
	cwd    string
}

func newHookEnv(t *testing.T) *hookEnv {
	t.Helper()
	ctx := context.Background()
	st, err := badgerstore.Open(ctx, badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	q, err := hint.New(context.Background(), hint.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close(context.Background()) })
	e := &hookEnv{st: st, hints: q, cwd: t.TempDir()}
	e.answer.Store("{}")
	ms := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		content, _ := json.Marshal(e.answer.Load().(string))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1717000000,"model":"m",
"choices":[{"index":0,"finish_reason":"stop","logprobs":null,"message":{"role":"assistant","content":%s}}],
"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`, content)
	}))
	t.Cleanup(ms.Close)
	m, err := model.New(model.Config{Provider: "openai", BaseURL: ms.URL + "/v1", Model: "m", APIKey: "sk-test"})
	if err != nil {
		t.Fatal(err)
	}
	gs, err := gate.New(t.Context(), gate.Config{Store: st, Model: m, Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var set gate.Set
	p := gate.Preset{Name: "p"}
	for _, pt := range abi.Points {
		name := "g-" + pt
		set.Gates = append(set.Gates, gate.Gate{Name: name, Enabled: true, Point: pt, Task: "Check it.",
			Advanced: gate.Options{ShowInChat: true, OnError: gate.OnErrorContinue, Targets: gate.TargetsAll, TimeoutSeconds: 30, RedoLimit: 1}})
		p.Gates = append(p.Gates, gate.Attachment{Gate: name, Enabled: true})
	}
	set.Presets = []gate.Preset{p, {Name: "empty"}}
	if _, err := gs.Save(ctx, set); err != nil {
		t.Fatal(err)
	}
	hs, err := hooks.New(t.Context(), hooks.Config{Store: st, Gates: gs, Hints: q, DefaultPreset: "empty"})
	if err != nil {
		t.Fatal(err)
	}
	s := serverFor(t, Config{Token: testToken}, Deps{Store: st, Hints: q, Gates: gs, Hooks: hs})
	e.ts = httptest.NewServer(s.Handler())
	t.Cleanup(e.ts.Close)
	return e
}

func (e *hookEnv) model(o abi.GateOutput) {
	raw, _ := json.Marshal(o)
	e.answer.Store(string(raw))
}

// fixture reads a hook input from internal/hooks/testdata, with overrides.
func (e *hookEnv) fixture(t testing.TB, name string, set map[string]any) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "internal", "hooks", "testdata", "input", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m["cwd"] = e.cwd
	for k, v := range set {
		m[k] = v
	}
	out, _ := json.Marshal(m)
	return string(out)
}

// post sends a hook call the way Claude Code's http hook does and returns status and body.
func (e *hookEnv) post(t testing.TB, query, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.ts.URL+"/v1/hooks/claude-code"+query, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testToken)
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Errorf("answer Content-Type %q", resp.Header.Get("Content-Type"))
	}
	if resp.StatusCode == http.StatusOK {
		checkSentWhole(t, resp, raw)
	}
	return resp.StatusCode, string(raw)
}

func TestHookRoute(t *testing.T) {
	e := newHookEnv(t)
	tests := []struct {
		name    string
		query   string
		fixture string
		model   abi.GateOutput
		want    string
	}{
		{"tool-before deny", "?preset=p", "pre_tool_use", abi.GateOutput{Verdict: "stop", Reason: "Move it to ./trash instead."},
			`{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"Move it to ./trash instead."}}`},
		{"tool-before pass", "?preset=p", "pre_tool_use", abi.GateOutput{Verdict: "pass"}, `{}`},
		{"user-message block", "?preset=p", "user_prompt_submit", abi.GateOutput{Verdict: "stop", Reason: "Say why.", Replace: "delete ./victim (build output)"},
			`{"systemMessage":"Pixie: Suggested message (not sent to the agent):\ndelete ./victim (build output)","decision":"block","reason":"Say why."}`},
		{"user-message addition", "?preset=p", "user_prompt_submit", abi.GateOutput{Append: "Measured: 21 bytes"},
			`{"hookSpecificOutput":{"hookEventName":"UserPromptSubmit","additionalContext":"Measured: 21 bytes"}}`},
		{"agent-message replaced", "?preset=p", "pre_tool_use_agent", abi.GateOutput{Replace: "TASK: callers of Map"},
			`{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInput":{"description":"Find callers","prompt":"TASK: callers of Map","subagent_type":"Explore"}}}`},
		{"tool-after block", "?preset=p", "post_tool_use", abi.GateOutput{Verdict: "stop", Reason: "Withheld: a credential."},
			`{"decision":"block","reason":"Withheld: a credential.","hookSpecificOutput":{"hookEventName":"PostToolUse","updatedToolOutput":{"interrupted":false,"isImage":false,"stderr":"","stdout":"[Pixie withheld this tool result: Withheld: a credential.]"}}}`},
		{"tool-after block, Codex", "?preset=p&host=codex", "post_tool_use", abi.GateOutput{Verdict: "stop", Reason: "Withheld: a credential."},
			`{"decision":"block","reason":"Withheld: a credential."}`},
		{"tool-after replaced, Codex", "?preset=p&host=codex", "post_tool_use_text", abi.GateOutput{Replace: "Two results."},
			`{"decision":"block","reason":"Two results."}`},
		{"tool-after replaced", "?preset=p", "post_tool_use_text", abi.GateOutput{Replace: "Two results."},
			`{"hookSpecificOutput":{"hookEventName":"PostToolUse","updatedToolOutput":"Two results."}}`},
		{"turn-end redo", "?preset=p", "stop", abi.GateOutput{Verdict: "stop", Reason: "Run the tests."},
			`{"decision":"block","reason":"Run the tests."}`},
		{"turn-end note", "?preset=p", "subagent_stop", abi.GateOutput{Note: "checked"}, `{"systemMessage":"Pixie: checked"}`},
		{"default preset has no gates", "", "pre_tool_use", abi.GateOutput{Verdict: "stop", Reason: "x"}, `{}`},
		{"unhandled event", "?preset=p", "notification", abi.GateOutput{Verdict: "stop", Reason: "x"}, `{}`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.model(tt.model)
			st, body := e.post(t, tt.query, e.fixture(t, tt.fixture, map[string]any{"session_id": fmt.Sprintf("route-%d", i)}), nil)
			if st != http.StatusOK || body != tt.want {
				t.Errorf("got %d %s\nwant 200 %s", st, body, tt.want)
			}
		})
	} // A Codex input (turn_id) with no ?host= is answered in Codex's fields: a hook that an old
	// init wrote as "pixie hook claude" still gets answers Codex applies.
	e.model(abi.GateOutput{Replace: "Two results."})
	st, body := e.post(t, "?preset=p", e.fixture(t, "post_tool_use_text", map[string]any{"session_id": "route-codex", "turn_id": "t1", "model": "gpt-5"}), nil)
	if st != http.StatusOK || body != `{"decision":"block","reason":"Two results."}` {
		t.Errorf("Codex inferred: got %d %s", st, body)
	}
}

func TestHookRouteErrors(t *testing.T) {
	e := newHookEnv(t)
	stop := e.fixture(t, "stop", nil)
	tests := []struct {
		name   string
		query  string
		body   string
		header map[string]string
		status int
		code   string
	}{
		{"no token, from the adapter", "", stop, map[string]string{"Authorization": "", AdapterHeader: "1"}, 401, "unauthorized"},
		{"wrong token, from the adapter", "", stop, map[string]string{"Authorization": "Bearer nope", AdapterHeader: "1"}, 401, "unauthorized"},
		{"bad host", "?host=vim", stop, nil, 400, "invalid"},
		{"bad proxy", "?proxy=yes", stop, nil, 400, "invalid"},
		{"not JSON", "", "hello", nil, 400, "invalid"},
		{"wrong content type", "", stop, map[string]string{"Content-Type": "text/plain"}, 400, "invalid"},
		{"missing session", "", `{"hook_event_name":"Stop"}`, nil, 400, "invalid"},
		{"bad preset", "?preset=..%2Fx", stop, nil, 400, "invalid"},
		{"over the body limit", "", `{"hook_event_name":"Stop","session_id":"s","last_assistant_message":"` + strings.Repeat("x", 1<<20) + `"}`, nil, 413, "too_large"},
	}
	// An http hook host drops a 401 without a word: a call without a valid token gets 200 and a
	// systemMessage only (nothing ran: no record, no turn, no hint taken).
	for _, hdr := range []map[string]string{{"Authorization": ""}, {"Authorization": "Bearer nope"}} {
		st, body := e.post(t, "?preset=p", stop, hdr)
		var out hooks.Output
		if st != 200 || json.Unmarshal([]byte(body), &out) != nil || out.Decision != "" || out.HookSpecificOutput != nil ||
			!strings.Contains(out.SystemMessage, "no valid token") || !strings.Contains(out.SystemMessage, "pixie doctor") {
			t.Errorf("%v: got %d %s", hdr, st, body)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, body := e.post(t, tt.query, tt.body, tt.header)
			var eb ErrorBody
			if err := json.Unmarshal([]byte(body), &eb); err != nil || st != tt.status || eb.Error.Code != tt.code {
				t.Errorf("got %d %s, want %d %s", st, body, tt.status, tt.code)
			}
		})
	}
}

// TestHookHintsOverHTTP: PostToolUse calls from many connections deliver each hint exactly once.
func TestHookHintsOverHTTP(t *testing.T) {
	e := newHookEnv(t)
	ctx := context.Background()
	const n = 20 // the per-session pending cap: none is evicted
	for i := 0; i < n; i++ {
		if _, err := e.hints.Put(ctx, "http-hints", fmt.Sprintf("hint %02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	body := e.fixture(t, "post_tool_use_text", map[string]any{"session_id": "http-hints"})
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		wg   sync.WaitGroup
	)
	for c := 0; c < 6; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5; i++ {
				st, raw := e.post(t, "?preset=empty", body, nil)
				if st != 200 {
					t.Errorf("status %d: %s", st, raw)
					return
				}
				var out hooks.Output
				if err := json.Unmarshal([]byte(raw), &out); err != nil {
					t.Error(err)
					return
				}
				if out.HookSpecificOutput == nil {
					continue
				}
				for _, line := range strings.Split(out.HookSpecificOutput.AdditionalContext, "\n") {
					if j := strings.Index(line, "hint "); j >= 0 && len(line) >= j+7 {
						mu.Lock()
						seen[line[j:]]++
						mu.Unlock()
					}
				}
			}
		}()
	}
	wg.Wait()
	for i := 0; i < n; i++ {
		if c := seen[fmt.Sprintf("hint %02d", i)]; c != 1 {
			t.Errorf("hint %02d delivered %d times", i, c)
		}
	}
	snap, err := e.hints.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Pending) != 0 {
		t.Errorf("%d hints left pending", len(snap.Pending))
	}
}

// TestHookRouteHoldsTheTakeWhenAsked: with X-Pixie-Hint-Hold the answer names its hint take
// (X-Pixie-Hint-Take) and leaves it open for the caller to confirm or roll back; without it the
// route confirms the take itself once the answer is written, and names none.
func TestHookRouteHoldsTheTakeWhenAsked(t *testing.T) {
	e := newHookEnv(t)
	ctx := context.Background()
	call := func(hold bool) (string, string) {
		body := e.fixture(t, "post_tool_use_text", map[string]any{"session_id": "held"})
		req, _ := http.NewRequest(http.MethodPost, e.ts.URL+"/v1/hooks/claude-code", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+testToken)
		if hold {
			req.Header.Set(HintHoldHeader, "1")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, raw)
		}
		return resp.Header.Get(HintTakeHeader), string(raw)
	}
	if _, err := e.hints.Put(ctx, "held", "held hint"); err != nil {
		t.Fatal(err)
	}
	take, body := call(true)
	if take == "" || !strings.Contains(body, "held hint") {
		t.Fatalf("held call: take %q body %s", take, body)
	}
	snap, _ := e.hints.Snapshot(ctx)
	if len(snap.Consumed) != 1 || snap.Consumed[0].TakeID != take {
		t.Fatalf("the held take is not open: %+v", snap)
	}
	if n, err := e.hints.Rollback(ctx, take); err != nil || n != 1 {
		t.Fatalf("rollback: %d %v", n, err)
	}
	// The rolled-back hint comes with the next call; without the header it is confirmed.
	take, body = call(false)
	if take != "" || !strings.Contains(body, "held hint") {
		t.Fatalf("unheld call: take %q body %s", take, body)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		snap, _ = e.hints.Snapshot(ctx)
		if len(snap.Consumed) == 1 && snap.Consumed[0].TakeID == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the route did not confirm its take: %+v", snap)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// No hints, no take header even when asked.
	if take, _ = call(true); take != "" {
		t.Fatalf("a take named with nothing taken: %q", take)
	}
}

// TestHookRouteReleasesItsDeferredWork: the work a hook call's evaluation leaves for after the
// answer (starting the run-record writer: hooks.Call.After) is released once the answer is
// sent, so the record reaches the store with nothing reading it.
func TestHookRouteReleasesItsDeferredWork(t *testing.T) {
	e := newHookEnv(t)
	// Run records are indexed under gate-run-id/<run id> (internal/gate's key layout).
	records := func() int {
		n := 0
		err := e.st.View(context.Background(), func(tx *store.Tx) error {
			return tx.ScanRaw("gate-run-id/", store.ScanOptions{}, func(string, []byte) error { n++; return nil })
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	e.model(abi.GateOutput{Verdict: "pass"})
	if code, body := e.post(t, "?preset=p", e.fixture(t, "user_prompt_submit", nil), nil); code != http.StatusOK {
		t.Fatalf("hook call: %d %s", code, body)
	}
	deadline := time.Now().Add(5 * time.Second)
	for records() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d run records in the store, want 1: the deferred work was not released", records())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

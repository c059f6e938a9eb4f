package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/hint"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
)

// The spec's behaviour list (tests/behavior.spec.ts, 19 cases) re-expressed over the real HTTP
// routes, plus the SSE stream read by an SSE parser, and the trust fence.

type hintEnv struct {
	srv    *Server
	url    string
	stop   context.CancelFunc
	served chan error
	q      *hint.Queue
	st     *store.Store
	dir    string
	token  string
}

func newHintEnv(t testing.TB, qcfg hint.Config, scfg Config) *hintEnv {
	t.Helper()
	dir := t.TempDir()
	env := &hintEnv{dir: dir, token: testToken}
	env.open(t, qcfg, scfg)
	t.Cleanup(env.close)
	return env
}

func (e *hintEnv) open(t testing.TB, qcfg hint.Config, scfg Config) {
	t.Helper()
	st, err := badgerstore.Open(context.Background(), badgerstore.Options{Dir: e.dir, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	qcfg.Store = st
	q, err := hint.New(context.Background(), qcfg)
	if err != nil {
		t.Fatal(err)
	}
	scfg.Token = e.token
	e.st, e.q = st, q
	e.srv = serverFor(t, scfg, Deps{Store: st, Hints: q})
	// Serve through Server.Serve (not httptest), so the server's own timeouts apply.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.url = "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	e.stop, e.served = cancel, make(chan error, 1)
	go func() { e.served <- e.srv.Serve(ctx, ln, 5*time.Second) }()
}

func (e *hintEnv) close() {
	if e.stop == nil {
		return
	}
	e.stop()
	<-e.served
	e.q.Close(context.Background())
	e.st.Close()
	e.stop = nil
}

// call sends a JSON request with the admin token and decodes the answer into out. It returns
// the status and the error code of an error answer.
func (e *hintEnv) call(t testing.TB, method, path string, body any, out any) (int, string) {
	t.Helper()
	return e.callWith(t, method, path, body, map[string]string{"Authorization": "Bearer " + e.token}, out)
}

func (e *hintEnv) callWith(t testing.TB, method, path string, body any, header map[string]string, out any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		var eb ErrorBody
		if err := json.Unmarshal(raw, &eb); err != nil || eb.Error.Code == "" {
			t.Fatalf("%s %s: %d with a body outside the error shape: %s", method, path, resp.StatusCode, raw)
		}
		return resp.StatusCode, eb.Error.Code
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode, ""
}

func (e *hintEnv) put(t testing.TB, session, text string) hintPutResponse {
	t.Helper()
	var r hintPutResponse
	if st, code := e.call(t, "POST", "/v1/hints", map[string]any{"text": text, "sessionId": session}, &r); st != 200 {
		t.Fatalf("put: %d %s", st, code)
	}
	return r
}

func (e *hintEnv) take(t testing.TB, session string, confirm bool) hint.Take {
	t.Helper()
	var tk hint.Take
	if st, code := e.call(t, "POST", "/v1/hints/take", map[string]any{"sessionId": session, "confirm": confirm}, &tk); st != 200 {
		t.Fatalf("take: %d %s", st, code)
	}
	return tk
}

func (e *hintEnv) state(t testing.TB) hint.Snapshot {
	t.Helper()
	var s hint.Snapshot
	if st, code := e.call(t, "GET", "/v1/hints/state", nil, &s); st != 200 {
		t.Fatalf("state: %d %s", st, code)
	}
	return s
}

func hintTexts(hs []hint.Hint) string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Text)
	}
	return strings.Join(out, ",")
}

func TestHintRoutesEnqueueStateCancel(t *testing.T) {
	e := newHintEnv(t, hint.Config{}, Config{})
	// Enqueue answers {ok, hintId, running, dropped}.
	var raw map[string]any
	if st, _ := e.call(t, "POST", "/v1/hints", map[string]any{"text": "  use the staging db  ", "sessionId": "s1"}, &raw); st != 200 {
		t.Fatal(st)
	}
	for _, k := range []string{"ok", "hintId", "running", "dropped"} {
		if _, ok := raw[k]; !ok {
			t.Fatalf("answer %v lacks %q", raw, k)
		}
	}
	if raw["ok"] != true || raw["running"] != false || len(raw["dropped"].([]any)) != 0 {
		t.Fatalf("answer = %v", raw)
	}
	id := raw["hintId"].(string)
	// The snapshot shows it, trimmed, with a revision.
	snap := e.state(t)
	if snap.Revision != 1 || len(snap.Pending) != 1 || snap.Pending[0].ID != id || snap.Pending[0].Text != "use the staging db" {
		t.Fatalf("snapshot = %+v", snap)
	}
	e.put(t, "s1", "also consumed")
	consumed := e.put(t, "s1", "consumed, then cancelled by path")
	if tk := e.take(t, "s1", true); len(tk.Hints) != 3 {
		t.Fatalf("took %d hints, want 3", len(tk.Hints))
	}

	fresh := e.put(t, "s1", "cancel me")
	tests := []struct {
		name, method, path string
		body               any
		status             int
		code               string
	}{
		{name: "body-form", method: "DELETE", path: "/v1/hints", body: map[string]any{"id": fresh.HintID}, status: 200},
		{name: "cancelled-again", method: "DELETE", path: "/v1/hints/" + fresh.HintID, status: 409, code: "conflict"},
		{name: "path-form-consumed", method: "DELETE", path: "/v1/hints/" + consumed.HintID, status: 409, code: "conflict"},
		{name: "unknown", method: "DELETE", path: "/v1/hints/h00000000000000000001ffffffff", status: 404, code: "not_found"},
		{name: "no-id", method: "DELETE", path: "/v1/hints", body: map[string]any{}, status: 400, code: "invalid"},
		{name: "ids-differ", method: "DELETE", path: "/v1/hints/" + fresh.HintID, body: map[string]any{"id": consumed.HintID}, status: 400, code: "invalid"},
		{name: "blank-text", method: "POST", path: "/v1/hints", body: map[string]any{"text": " \n "}, status: 400, code: "invalid"},
		{name: "missing-text", method: "POST", path: "/v1/hints", body: map[string]any{"sessionId": "s1"}, status: 400, code: "invalid"},
		{name: "unknown-field", method: "POST", path: "/v1/hints", body: map[string]any{"text": "x", "session": "s1"}, status: 400, code: "invalid"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, code := e.call(t, tc.method, tc.path, tc.body, nil)
			if st != tc.status || code != tc.code {
				t.Fatalf("%d %q, want %d %q", st, code, tc.status, tc.code)
			}
		})
	}
	if snap := e.state(t); len(snap.Pending) != 0 {
		t.Fatalf("pending after the cancels: %+v", snap.Pending)
	}
}

// Injection: session and global hints merged, numbered, in the spec's message; nothing is
// consumed twice; sessions are isolated; an unknown session takes global hints only.
func TestHintRoutesInjection(t *testing.T) {
	e := newHintEnv(t, hint.Config{Locale: "zh"}, Config{})
	e.put(t, "a", "先跑测试")
	e.put(t, "", "回答用中文")
	e.put(t, "b", "b 的提示")

	tk := e.take(t, "a", true)
	want := "📌 旁路提示（用户在任务执行过程中插入）\n" +
		"请在本步参考下面的要求，然后继续原来的任务；不要停下来等待确认，也不要把它当作新的用户回合。\n" +
		"1. 先跑测试\n2. 回答用中文"
	if tk.Message != want || !tk.Confirmed || tk.ID != "" {
		t.Fatalf("take = %+v\nmessage:\n%s", tk, tk.Message)
	}
	if again := e.take(t, "a", true); len(again.Hints) != 0 || again.Message != "" {
		t.Fatalf("re-consumed: %+v", again)
	}
	e.put(t, "", "global 2")
	if g := e.take(t, "", true); hintTexts(g.Hints) != "global 2" {
		t.Fatalf("unknown session took %q, want only the global hint", hintTexts(g.Hints))
	}
	if b := e.take(t, "b", true); hintTexts(b.Hints) != "b 的提示" {
		t.Fatalf("session b took %q", hintTexts(b.Hints))
	}
}

// A downstream hook rejects the step: the take is rolled back and the next step gets the hints.
// Confirm closes a take; an unconfirmed take comes back after the lease.
func TestHintRoutesTakeConfirmRollback(t *testing.T) {
	e := newHintEnv(t, hint.Config{Lease: 300 * time.Millisecond}, Config{})
	e.put(t, "s", "one")
	tk := e.take(t, "s", false)
	if tk.ID == "" || tk.Confirmed || len(tk.Hints) != 1 || tk.ExpiresAt.IsZero() {
		t.Fatalf("take = %+v", tk)
	}
	var rb map[string]any
	if st, _ := e.call(t, "POST", "/v1/hints/rollback", map[string]any{"takeId": tk.ID}, &rb); st != 200 || rb["restored"] != 1.0 {
		t.Fatalf("rollback: %d %v", st, rb)
	}
	// Repeats answer as the first call did (a retry whose answer was lost); a confirm of a
	// rolled-back take is a conflict; an unknown take is 404.
	if st, _ := e.call(t, "POST", "/v1/hints/rollback", map[string]any{"takeId": tk.ID}, &rb); st != 200 || rb["restored"] != 1.0 {
		t.Fatalf("second rollback: %d %v", st, rb)
	}
	if st, code := e.call(t, "POST", "/v1/hints/confirm", map[string]any{"takeId": tk.ID}, nil); st != 409 || code != "conflict" {
		t.Fatalf("confirm after rollback: %d %s", st, code)
	}
	if st, code := e.call(t, "POST", "/v1/hints/confirm", map[string]any{"takeId": "t" + strings.Repeat("0", 28)}, nil); st != 404 || code != "not_found" {
		t.Fatalf("unknown take: %d %s", st, code)
	}
	next := e.take(t, "s", false)
	if hintTexts(next.Hints) != "one" {
		t.Fatalf("next step took %q", hintTexts(next.Hints))
	}
	var cf map[string]any
	if st, _ := e.call(t, "POST", "/v1/hints/confirm", map[string]any{"takeId": next.ID}, &cf); st != 200 || cf["confirmed"] != 1.0 {
		t.Fatalf("confirm: %d %v", st, cf)
	}
	if st, _ := e.call(t, "POST", "/v1/hints/confirm", map[string]any{"takeId": next.ID}, &cf); st != 200 || cf["confirmed"] != 1.0 {
		t.Fatalf("repeated confirm: %d %v", st, cf)
	}
	if st, _ := e.call(t, "POST", "/v1/hints/confirm", map[string]any{"takeId": ""}, nil); st != 400 {
		t.Fatalf("confirm without takeId: %d", st)
	}
	// An abandoned take returns after the lease.
	e.put(t, "s", "two")
	if abandoned := e.take(t, "s", false); len(abandoned.Hints) != 1 {
		t.Fatal("nothing taken")
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(e.state(t).Pending) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the abandoned take did not return within 5s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHintConfirmAfterExpiryIsAClearConflict: a confirm that comes after the lease ran out is
// not "not found" (which a client would read as "already done") but a 409 whose details say the
// take expired, so the caller knows the hints are pending again and will be delivered again.
func TestHintConfirmAfterExpiryIsAClearConflict(t *testing.T) {
	e := newHintEnv(t, hint.Config{Lease: 50 * time.Millisecond}, Config{})
	e.put(t, "s", "late")
	tk := e.take(t, "s", false)
	deadline := time.Now().Add(5 * time.Second)
	for len(e.state(t).Pending) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the lease did not expire within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	hr, _ := http.NewRequest("POST", e.url+"/v1/hints/confirm", strings.NewReader(`{"takeId":"`+tk.ID+`"}`))
	hr.Header.Set("Authorization", "Bearer "+testToken)
	hr.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb struct {
		Error struct {
			Code, Message string
			Details       map[string]any
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&eb); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 409 || eb.Error.Code != "conflict" || eb.Error.Details["take"] != "expired" || !strings.Contains(eb.Error.Message, "delivered again") {
		t.Fatalf("%d %+v", resp.StatusCode, eb)
	}
}

// Concurrent takes over HTTP never hand out a hint twice.
func TestHintRoutesConcurrentTakes(t *testing.T) {
	e := newHintEnv(t, hint.Config{}, Config{})
	want := map[string]bool{}
	for i := 0; i < 20; i++ {
		want[e.put(t, "s", fmt.Sprint("s-", i)).HintID] = true
		want[e.put(t, "", fmt.Sprint("g-", i)).HintID] = true
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 4; k++ {
				tk := e.take(t, "s", k%2 == 0)
				if tk.ID != "" {
					e.call(t, "POST", "/v1/hints/confirm", map[string]any{"takeId": tk.ID}, nil)
				}
				mu.Lock()
				for _, h := range tk.Hints {
					seen[h.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for id, n := range seen {
		if n != 1 || !want[id] {
			t.Errorf("hint %s handed out %d times (known: %v)", id, n, want[id])
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("%d of %d handed out", len(seen), len(want))
	}
}

// The backlog cap reports the dropped hint; over-long text is truncated.
func TestHintRoutesCapAndTruncation(t *testing.T) {
	e := newHintEnv(t, hint.Config{MaxPendingPerSession: 2, MaxContentChars: 10}, Config{})
	first := e.put(t, "s", "first")
	e.put(t, "s", "second")
	r := e.put(t, "s", "third, and longer than ten")
	if len(r.Dropped) != 1 || r.Dropped[0].ID != first.HintID || r.Hint.Text != "third, and" {
		t.Fatalf("answer = %+v", r)
	}
}

// No re-injection after a restart; the revision carries on.
func TestHintRoutesRestart(t *testing.T) {
	e := newHintEnv(t, hint.Config{}, Config{})
	e.put(t, "s", "consumed before the restart")
	e.take(t, "s", true)
	e.put(t, "s", "pending across the restart")
	rev := e.state(t).Revision
	e.close()
	e.open(t, hint.Config{}, Config{})
	if got := e.state(t).Revision; got != rev {
		t.Fatalf("revision %d after restart, want %d", got, rev)
	}
	if tk := e.take(t, "s", true); hintTexts(tk.Hints) != "pending across the restart" {
		t.Fatalf("after restart took %q", hintTexts(tk.Hints))
	}
}

// A damaged record does not take the routes down.
func TestHintRoutesDamagedRecord(t *testing.T) {
	e := newHintEnv(t, hint.Config{}, Config{})
	e.put(t, "s", "good")
	if err := e.st.Update(context.Background(), func(tx *store.Tx) error {
		return tx.SetRaw("hint/h00000000000000000009deadbeef", []byte("\x00garbage"), 0)
	}); err != nil {
		t.Fatal(err)
	}
	if s := e.state(t); hintTexts(s.Pending) != "good" {
		t.Fatalf("state = %+v", s)
	}
	if tk := e.take(t, "s", true); hintTexts(tk.Hints) != "good" {
		t.Fatalf("take = %+v", tk)
	}
}

// The model-side tools and the turn routes.
func TestHintRoutesToolsAndTurns(t *testing.T) {
	e := newHintEnv(t, hint.Config{}, Config{})
	auth := map[string]string{"Authorization": "Bearer " + e.token, SessionHeader: "me"}
	var turn map[string]any
	if st, _ := e.call(t, "POST", "/v1/turns/start", map[string]any{"sessionId": "me"}, &turn); st != 200 || turn["running"] != true {
		t.Fatalf("turn start: %d %v", st, turn)
	}
	var sent hint.SendResult
	if st, code := e.callWith(t, "POST", "/v1/tools/hint_send", map[string]any{"text": "check the logs"}, auth, &sent); st != 200 {
		t.Fatalf("hint_send: %d %s", st, code)
	}
	if !sent.OK || sent.SessionID != "me" || !sent.Running || sent.Evicted || sent.HintID == "" {
		t.Fatalf("hint_send = %+v", sent)
	}
	if st, _ := e.callWith(t, "POST", "/v1/tools/hint_send", map[string]any{"text": "for them", "sessionId": "them"}, auth, &sent); st != 200 || sent.SessionID != "them" || sent.Running {
		t.Fatalf("hint_send to another session = %+v", sent)
	}
	var status hint.StatusResult
	if st, _ := e.callWith(t, "POST", "/v1/tools/hint_status", nil, auth, &status); st != 200 {
		t.Fatal(st)
	}
	if status.SessionID != "me" || !status.Running || hintTexts(status.Pending) != "check the logs" {
		t.Fatalf("hint_status = %+v", status)
	}
	if st, _ := e.callWith(t, "POST", "/v1/tools/hint_status", map[string]any{"sessionId": "*"}, auth, &status); st != 200 || len(status.Pending) != 2 {
		t.Fatalf("hint_status * = %d %+v", st, status)
	}
	if st, code := e.callWith(t, "POST", "/v1/tools/hint_send", map[string]any{"text": ""}, auth, nil); st != 400 || code != "invalid" {
		t.Fatalf("blank hint_send: %d %s", st, code)
	}
	if st, _ := e.call(t, "POST", "/v1/turns/end", map[string]any{"sessionId": "me"}, &turn); st != 200 || turn["running"] != false {
		t.Fatalf("turn end: %d %v", st, turn)
	}
	if st, code := e.call(t, "POST", "/v1/turns/start", map[string]any{}, nil); st != 400 || code != "invalid" {
		t.Fatalf("turn start without a session: %d %s", st, code)
	}
}

// The trust fence: every hint route refuses unauthenticated requests with 401 and requests
// from a disallowed Host or a cross-site cookie write with 403, and a refused write persists
// nothing.
func TestHintRoutesTrustFence(t *testing.T) {
	e := newHintEnv(t, hint.Config{}, Config{})
	// A UI session cookie, obtained through the real login route.
	var login *http.Cookie
	{
		resp, err := http.Post(e.url+"/login", "application/json", strings.NewReader(`{"token":"`+e.token+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for _, c := range resp.Cookies() {
			if c.Name == CookieName {
				login = c
			}
		}
		if login == nil {
			t.Fatal("no login cookie")
		}
	}
	cookie := map[string]string{"Cookie": login.Name + "=" + login.Value}
	withOrigin := map[string]string{"Cookie": login.Name + "=" + login.Value, "Origin": e.url}
	routes := []struct {
		method, path string
		body         any
	}{
		{"GET", "/v1/hints/state", nil},
		{"GET", "/v1/hints/events", nil},
		{"POST", "/v1/hints", map[string]any{"text": "injected"}},
		{"DELETE", "/v1/hints", map[string]any{"id": "h00000000000000000001ffffffff"}},
		{"DELETE", "/v1/hints/h00000000000000000001ffffffff", nil},
		{"POST", "/v1/hints/take", map[string]any{"sessionId": "s"}},
		{"POST", "/v1/hints/confirm", map[string]any{"takeId": "x"}},
		{"POST", "/v1/hints/rollback", map[string]any{"takeId": "x"}},
		{"POST", "/v1/turns/start", map[string]any{"sessionId": "s"}},
		{"POST", "/v1/turns/end", map[string]any{"sessionId": "s"}},
		{"POST", "/v1/tools/hint_send", map[string]any{"text": "injected"}},
		{"POST", "/v1/tools/hint_status", nil},
	}
	for _, r := range routes {
		t.Run(r.method+r.path, func(t *testing.T) {
			cases := []struct {
				name   string
				header map[string]string
				status int
			}{
				{name: "no-credentials", header: nil, status: 401},
				{name: "wrong-token", header: map[string]string{"Authorization": "Bearer nope"}, status: 401},
				{name: "foreign-host", header: map[string]string{"Authorization": "Bearer " + e.token, "Host": "evil.example"}, status: 403},
			}
			if r.method != "GET" {
				cases = append(cases,
					struct {
						name   string
						header map[string]string
						status int
					}{name: "cookie-write-without-origin", header: cookie, status: 403},
					struct {
						name   string
						header map[string]string
						status int
					}{name: "cookie-write-cross-origin", header: map[string]string{"Cookie": cookie["Cookie"], "Origin": "http://evil.example"}, status: 403})
			}
			for _, c := range cases {
				if st, _ := e.callWith(t, r.method, r.path, r.body, c.header, nil); st != c.status {
					t.Errorf("%s: %d, want %d", c.name, st, c.status)
				}
			}
		})
	}
	// Nothing refused was persisted, and the turn routes changed nothing.
	if s := e.state(t); s.Revision != 0 || len(s.Pending) != 0 {
		t.Fatalf("a refused write persisted: %+v", s)
	}
	if e.q.Running("s") {
		t.Fatal("a refused turn start took effect")
	}
	// The allowed paths: the admin token, and the same-origin UI cookie.
	if st, _ := e.callWith(t, "GET", "/v1/hints/state", nil, cookie, nil); st != 200 {
		t.Fatalf("cookie read: %d", st)
	}
	var r hintPutResponse
	if st, _ := e.callWith(t, "POST", "/v1/hints", map[string]any{"text": "from the UI"}, withOrigin, &r); st != 200 || !r.OK {
		t.Fatalf("same-origin cookie write: %d", st)
	}
}

// sseFrame is one block of an event stream, parsed by the rules of the SSE specification:
// lines up to a blank line; "field: value" (one leading space stripped); data lines joined with
// "\n"; lines starting with ":" are comments.
type sseFrame struct {
	Comments []string
	Event    string
	Data     string
	Retry    string
}

type sseReader struct {
	br *bufio.Reader
}

func (r *sseReader) next() (sseFrame, error) {
	var f sseFrame
	var data []string
	hasData := false
	for {
		line, err := r.br.ReadString('\n')
		if err != nil {
			return f, err
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line == "" {
			f.Data = strings.Join(data, "\n")
			if !hasData && f.Event == "" && f.Retry == "" && len(f.Comments) == 0 {
				continue
			}
			return f, nil
		}
		if strings.HasPrefix(line, ":") {
			f.Comments = append(f.Comments, strings.TrimPrefix(strings.TrimPrefix(line, ":"), " "))
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			f.Event = value
		case "data":
			data = append(data, value)
			hasData = true
		case "retry":
			f.Retry = value
		}
	}
}

// openStream connects to the events stream and returns its reader and a closer.
func (e *hintEnv) openStream(t testing.TB) (*sseReader, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", e.url+"/v1/hints/events", nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return &sseReader{br: bufio.NewReader(resp.Body)}, func() { cancel(); resp.Body.Close() }
}

// frames reads frames in the background, so tests can wait with a timeout.
func frames(r *sseReader) <-chan sseFrame {
	ch := make(chan sseFrame, 64)
	go func() {
		defer close(ch)
		for {
			f, err := r.next()
			if err != nil {
				return
			}
			ch <- f
		}
	}()
	return ch
}

func nextFrame(t *testing.T, ch <-chan sseFrame) sseFrame {
	t.Helper()
	select {
	case f, ok := <-ch:
		if !ok {
			t.Fatal("the stream ended")
		}
		return f
	case <-time.After(5 * time.Second):
		t.Fatal("no frame within 5s")
	}
	return sseFrame{}
}

func TestHintEventsStream(t *testing.T) {
	// Short server timeouts: the stream must outlive them.
	e := newHintEnv(t, hint.Config{HeartbeatInterval: time.Hour},
		Config{ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
	r, stop := e.openStream(t)
	defer stop()
	ch := frames(r)

	open := nextFrame(t, ch)
	if len(open.Comments) != 1 || open.Retry != "3000" || open.Event != "" {
		t.Fatalf("opening = %+v, want a comment and a retry", open)
	}
	first := nextFrame(t, ch)
	var snap hint.Snapshot
	if first.Event != "state" || json.Unmarshal([]byte(first.Data), &snap) != nil || snap.Revision != 0 {
		t.Fatalf("initial state = %+v", first)
	}

	time.Sleep(400 * time.Millisecond) // past both server timeouts

	expect := func(kind hint.ActionKind, pending int) hint.Action {
		t.Helper()
		st := nextFrame(t, ch)
		var s hint.Snapshot
		if st.Event != "state" || json.Unmarshal([]byte(st.Data), &s) != nil || len(s.Pending) != pending || s.Revision <= snap.Revision {
			t.Fatalf("state frame = %+v", st)
		}
		snap = s
		if kind == "" {
			return hint.Action{}
		}
		hf := nextFrame(t, ch)
		var a hint.Action
		if hf.Event != "hint" || json.Unmarshal([]byte(hf.Data), &a) != nil || a.Kind != kind || a.Revision != s.Revision {
			t.Fatalf("hint frame = %+v, want %s", hf, kind)
		}
		return a
	}
	p := e.put(t, "s", "line one\nline two")
	if a := expect(hint.ActionAdded, 1); a.Hint.ID != p.HintID || a.Hint.Text != "line one\nline two" {
		t.Fatalf("added = %+v", a)
	}
	tk := e.take(t, "s", false)
	expect("", 0) // taken, not yet confirmed: state only
	e.call(t, "POST", "/v1/hints/confirm", map[string]any{"takeId": tk.ID}, nil)
	if a := expect(hint.ActionConsumed, 0); a.Hint.ID != p.HintID {
		t.Fatalf("consumed = %+v", a)
	}
	c := e.put(t, "s", "to cancel")
	expect(hint.ActionAdded, 1)
	e.call(t, "DELETE", "/v1/hints/"+c.HintID, nil, nil)
	expect(hint.ActionCancelled, 0)
}

// An idle stream carries nothing but a ping per heartbeat.
func TestHintEventsIdleStreamOnlyPings(t *testing.T) {
	const beat = 50 * time.Millisecond
	e := newHintEnv(t, hint.Config{HeartbeatInterval: beat}, Config{})
	e.put(t, "s", "before the streams")
	const streams = 5
	var readers []<-chan sseFrame
	for i := 0; i < streams; i++ {
		r, stop := e.openStream(t)
		defer stop()
		readers = append(readers, frames(r))
	}
	time.Sleep(12 * beat)
	for i, ch := range readers {
		var got []sseFrame
	drain:
		for {
			select {
			case f := <-ch:
				got = append(got, f)
			default:
				break drain
			}
		}
		if len(got) < 2 || got[0].Retry == "" || got[1].Event != "state" {
			t.Fatalf("stream %d opened with %+v", i, got)
		}
		pings := 0
		for _, f := range got[2:] {
			if f.Event != "" || f.Data != "" || f.Retry != "" || len(f.Comments) != 1 || f.Comments[0] != "ping" {
				t.Fatalf("stream %d carried %+v while idle", i, f)
			}
			pings++
		}
		if pings < 5 || pings > 13 {
			t.Fatalf("stream %d: %d pings in %v at a %v heartbeat", i, pings, 12*beat, beat)
		}
	}
}

// Server shutdown ends open streams, so a graceful shutdown does not wait for them.
func TestHintEventsEndOnShutdown(t *testing.T) {
	st, err := badgerstore.Open(context.Background(), badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	q, err := hint.New(context.Background(), hint.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close(context.Background())
	s := serverFor(t, Config{Token: testToken}, Deps{Store: st, Hints: q})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln, 5*time.Second) }()

	req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/v1/hints/events", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := &sseReader{br: bufio.NewReader(resp.Body)}
	if _, err := r.next(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cancel()
	for {
		if _, err := r.next(); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Logf("stream ended with %v", err)
			}
			break
		}
	}
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("shutdown took %v with an open stream", d)
	}
	if q.Subscribers() != 0 {
		t.Fatalf("%d subscriptions left open", q.Subscribers())
	}
}

package proxy_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/pixie-dev/pixie/internal/hint"
	"github.com/pixie-dev/pixie/internal/proxy"
	"github.com/pixie-dev/pixie/internal/rewrite"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
	"github.com/pixie-dev/pixie/internal/testutil/fakemodel"
)

// lockedBuffer is a log sink safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// rig is a proxy in front of upstreams, with a real hint queue over Badger.
type rig struct {
	t     *testing.T
	q     *hint.Queue
	st    *store.Store
	p     *proxy.Proxy
	rw    *rewrite.Rules
	front *httptest.Server
	logs  *lockedBuffer
}

// newRig starts the proxy; cfg's upstream URLs point at the test's upstreams.
func newRig(t *testing.T, cfg proxy.Config, qcfg hint.Config) *rig {
	t.Helper()
	st, err := badgerstore.Open(context.Background(), badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	qcfg.Store = st
	q, err := hint.New(context.Background(), qcfg)
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rw, err := rewrite.New(context.Background(), rewrite.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store, cfg.Hints, cfg.Rewrites = st, q, rw
	p, err := proxy.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, api := range []proxy.API{proxy.Anthropic, proxy.OpenAI} {
			if rest, ok := strings.CutPrefix(r.URL.Path, "/v1/proxy/"+string(api)); ok {
				p.Serve(w, r, api, rest, nil)
				return
			}
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(func() { front.Close(); q.Close(context.Background()); st.Close() })
	return &rig{t: t, q: q, st: st, p: p, rw: rw, front: front, logs: logs}
}

func (r *rig) url(api proxy.API) string { return r.front.URL + "/v1/proxy/" + string(api) }

func (r *rig) put(session, text string) hint.Hint {
	r.t.Helper()
	res, err := r.q.Put(context.Background(), session, text)
	if err != nil {
		r.t.Fatal(err)
	}
	return res.Hint
}

// state returns the hint's state, and whether an open take holds it.
func (r *rig) state(id string) (hint.State, bool) {
	r.t.Helper()
	snap, err := r.q.Snapshot(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	for _, h := range snap.Pending {
		if h.ID == id {
			return hint.Pending, false
		}
	}
	for _, h := range snap.Consumed {
		if h.ID == id {
			return hint.Consumed, h.TakeID != ""
		}
	}
	return "", false
}

// waitState waits until the hint is in state want (takes close after the answer's headers).
func (r *rig) waitState(id string, want hint.State) {
	r.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, open := r.state(id)
		if st == want && !open {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("hint %s is %s (take open: %v), want %s", id, st, open, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func countContaining(reqs []fakemodel.Request, s string) int {
	n := 0
	for _, q := range reqs {
		if q.Contains(s) {
			n++
		}
	}
	return n
}

var bashTool = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "Bash",
	InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"command": map[string]any{"type": "string"}}}}}}

func anthropicClient(base string, opts ...aoption.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]aoption.RequestOption{aoption.WithBaseURL(base), aoption.WithAPIKey("sk-ant-client-secret-1"),
		aoption.WithMaxRetries(0)}, opts...)...)
}

func streamMessage(t *testing.T, c anthropic.Client, text string) (anthropic.Message, error) {
	t.Helper()
	var msg anthropic.Message
	s := c.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 100,
		Tools: bashTool, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))}})
	for s.Next() {
		if err := msg.Accumulate(s.Current()); err != nil {
			return msg, err
		}
	}
	return msg, s.Err()
}

// A queued hint reaches the upstream in exactly one request (the next step of its session),
// appended to the last user turn, and is absent from every later one; the client's answers
// stream back intact; the take is confirmed.
func TestHintInExactlyOneAnthropicRequest(t *testing.T) {
	up := fakemodel.NewAnthropic(t, fakemodel.Steps(fakemodel.Reply{Text: "done ✓"}))
	r := newRig(t, proxy.Config{AnthropicURL: up.URL}, hint.Config{})
	h := r.put("s1", "use the staging database")
	other := r.put("s2", "not for s1")
	c := anthropicClient(r.url(proxy.Anthropic), aoption.WithHeader("X-Pixie-Session-Id", "s1"))
	for i := range 3 {
		msg, err := streamMessage(t, c, fmt.Sprintf("step %d", i))
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Content) != 1 || msg.Content[0].Text != "done ✓" {
			t.Fatalf("answer %d = %+v", i, msg.Content)
		}
	}
	reqs := up.Requests()
	if len(reqs) != 3 || countContaining(reqs, h.Text) != 1 || !reqs[0].Contains(h.Text) {
		t.Fatalf("the hint is in %d of %d requests (want exactly the first)", countContaining(reqs, h.Text), len(reqs))
	}
	if countContaining(reqs, other.Text) != 0 {
		t.Fatal("another session's hint was injected")
	}
	if !strings.Contains(reqs[0].LastUser, "step 0") || !strings.Contains(reqs[0].LastUser, h.Text) {
		t.Fatalf("the hint is not in the last user turn: %q", reqs[0].LastUser)
	}
	r.waitState(h.ID, hint.Consumed)
	if st, _ := r.state(other.ID); st != hint.Pending {
		t.Fatalf("the other session's hint is %s", st)
	}
	if strings.Contains(r.logs.String(), "sk-ant-client-secret-1") {
		t.Fatal("the client's API key reached the log")
	}
}

// With nothing pending (or nothing for this session) the upstream receives the client's body
// byte for byte, headers and query included, and the answer comes back with its status and
// headers.
func TestNoHintsForwardsBytesUnchanged(t *testing.T) {
	var got struct {
		sync.Mutex
		bodies  [][]byte
		headers []http.Header
		queries []string
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Lock()
		got.bodies = append(got.bodies, b)
		got.headers = append(got.headers, r.Header.Clone())
		got.queries = append(got.queries, r.URL.RawQuery)
		got.Unlock()
		w.Header().Set("X-Upstream", "yes")
		w.Header().Set("Request-Id", "req_123")
		w.WriteHeader(http.StatusTeapot)
		_, _ = w.Write([]byte(`{"teapot":true}`))
	}))
	defer up.Close()
	r := newRig(t, proxy.Config{AnthropicURL: up.URL, OpenAIURL: up.URL}, hint.Config{})
	r.put("someone-else", "not for these requests")
	bodies := []struct {
		api  proxy.API
		path string
		body string
	}{
		{proxy.Anthropic, "/v1/messages?beta=true", "{ \"model\" :\"m\", \"messages\":[{\"role\":\"user\",\"content\":\"h\\u00e9llo \\u003c\"}],\n \"max_tokens\": 1.0e3 }"},
		{proxy.Anthropic, "/v1/messages/count_tokens", `{"messages":[{"role":"user","content":"x"}]}`},
		{proxy.OpenAI, "/v1/responses", `{"input":"hi","z":[1,2,3],"a":{"b":null}}`},
		{proxy.OpenAI, "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}` + "\n"},
		{proxy.OpenAI, "/v1/responses", `not even json`},
	}
	for _, b := range bodies {
		req, _ := http.NewRequest(http.MethodPost, r.url(b.api)+b.path, strings.NewReader(b.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Api-Key", "sk-client")
		req.Header.Set("Anthropic-Beta", "a,b")
		req.Header.Set("X-Pixie-Session-Id", "s1")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusTeapot || string(out) != `{"teapot":true}` || res.Header.Get("X-Upstream") != "yes" || res.Header.Get("Request-Id") != "req_123" {
			t.Fatalf("%s: answer %d %s %v", b.path, res.StatusCode, out, res.Header)
		}
	}
	got.Lock()
	defer got.Unlock()
	for i, b := range bodies {
		if string(got.bodies[i]) != b.body {
			t.Errorf("%s: the upstream got\n%q\nwant\n%q", b.path, got.bodies[i], b.body)
		}
		if got.headers[i].Get("X-Api-Key") != "sk-client" || got.headers[i].Get("Anthropic-Beta") != "a,b" {
			t.Errorf("%s: headers not passed: %v", b.path, got.headers[i])
		}
	}
	if got.queries[0] != "beta=true" {
		t.Errorf("query = %q", got.queries[0])
	}
}

// An upstream that answers 500 gets the hint rolled back, the client sees the upstream's own
// error unchanged (never a success), and the next step carries the hint.
func TestRollbackWhenUpstreamFails(t *testing.T) {
	var n int
	var mu sync.Mutex
	up := fakemodel.NewAnthropic(t, func(fakemodel.Request) fakemodel.Reply {
		mu.Lock()
		defer mu.Unlock()
		n++
		if n == 1 {
			return fakemodel.Reply{Status: http.StatusInternalServerError}
		}
		return fakemodel.Reply{Text: "ok"}
	})
	r := newRig(t, proxy.Config{AnthropicURL: up.URL}, hint.Config{})
	h := r.put("s1", "retry me")
	c := anthropicClient(r.url(proxy.Anthropic), aoption.WithHeader("X-Pixie-Session-Id", "s1"))
	_, err := streamMessage(t, c, "first")
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusInternalServerError {
		t.Fatalf("err = %v, want the upstream's 500", err)
	}
	r.waitState(h.ID, hint.Pending)
	if _, err := streamMessage(t, c, "second"); err != nil {
		t.Fatal(err)
	}
	reqs := up.Requests()
	if len(reqs) != 2 || !reqs[0].Contains(h.Text) || !reqs[1].Contains(h.Text) {
		t.Fatalf("want the hint in the failed request and in its retry: %d requests", len(reqs))
	}
	r.waitState(h.ID, hint.Consumed)
	// A 4xx (a client error) is passed through the same way.
	r2 := newRig(t, proxy.Config{AnthropicURL: fakemodel.NewAnthropic(t, func(fakemodel.Request) fakemodel.Reply {
		return fakemodel.Reply{Status: http.StatusBadRequest}
	}).URL}, hint.Config{})
	h2 := r2.put("", "global")
	_, err = streamMessage(t, anthropicClient(r2.url(proxy.Anthropic)), "x")
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
		t.Fatalf("err = %v, want the upstream's 400", err)
	}
	r2.waitState(h2.ID, hint.Pending)
}

// An unreachable upstream is a 502 in the API's own error shape; the hint goes back.
func TestUnreachableUpstream(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	r := newRig(t, proxy.Config{AnthropicURL: dead, OpenAIURL: dead}, hint.Config{})
	h := r.put("", "for anyone")
	for _, tc := range []struct {
		api  proxy.API
		path string
		want string
	}{
		{proxy.Anthropic, "/v1/messages", `"type":"error","error":{"type":"api_error","message":"Pixie could not reach the anthropic upstream`},
		{proxy.OpenAI, "/v1/responses", `{"error":{"message":"Pixie could not reach the openai upstream`},
	} {
		body := `{"messages":[{"role":"user","content":"hi"}],"input":"hi"}`
		res, err := http.Post(r.url(tc.api)+tc.path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusBadGateway || !strings.Contains(string(out), tc.want) || res.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %d %s", tc.api, res.StatusCode, out)
		}
		r.waitState(h.ID, hint.Pending)
	}
	// The official SDKs read it as an API error with the status.
	_, err = streamMessage(t, anthropicClient(r.url(proxy.Anthropic)), "x")
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadGateway {
		t.Fatalf("SDK err = %v", err)
	}
	oc := openai.NewClient(ooption.WithBaseURL(r.url(proxy.OpenAI)+"/v1"), ooption.WithAPIKey("k"), ooption.WithMaxRetries(0))
	_, err = oc.Responses.New(context.Background(), responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")}})
	var oErr *openai.Error
	if !errors.As(err, &oErr) || oErr.StatusCode != http.StatusBadGateway || !strings.Contains(oErr.Message, "could not reach") {
		t.Fatalf("SDK err = %v", err)
	}
}

// gatedStream is an upstream that sends its headers and a first SSE event, then waits for
// release (or the request's end) before finishing. It records whether the proxy ended the
// upstream request when the client left.
type gatedStream struct {
	srv      *httptest.Server
	release  chan struct{}
	canceled chan struct{}
	bodies   chan []byte
	before   time.Duration // wait before the status line
}

func newGatedStream(t *testing.T, before time.Duration) *gatedStream {
	g := &gatedStream{release: make(chan struct{}), canceled: make(chan struct{}, 4), bodies: make(chan []byte, 16), before: before}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		g.bodies <- b
		if g.before > 0 {
			select {
			case <-time.After(g.before):
			case <-r.Context().Done():
				g.canceled <- struct{}{}
				return
			}
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\"}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-g.release:
			fmt.Fprint(w, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
		case <-r.Context().Done():
			g.canceled <- struct{}{}
		}
	}))
	t.Cleanup(func() { g.srv.Close() })
	return g
}

// A client that disconnects mid-stream, after the 2xx status line, leaves the hint consumed
// (the model saw it); the proxy ends the upstream request too.
func TestClientDisconnectMidStreamKeepsHintConsumed(t *testing.T) {
	g := newGatedStream(t, 0)
	r := newRig(t, proxy.Config{AnthropicURL: g.srv.URL}, hint.Config{})
	h := r.put("s1", "seen once")
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.url(proxy.Anthropic)+"/v1/messages",
		strings.NewReader(`{"stream":true,"messages":[{"role":"user","content":"go"}]}`))
	req.Header.Set("X-Pixie-Session-Id", "s1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(res.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "event: message_start") {
		t.Fatalf("first line %q, %v (the first event must arrive before the upstream finishes)", line, err)
	}
	if b := <-g.bodies; !bytes.Contains(b, []byte("seen once")) {
		t.Fatalf("no hint upstream: %s", b)
	}
	cancel()
	res.Body.Close()
	select {
	case <-g.canceled:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request was not ended when the client left")
	}
	r.waitState(h.ID, hint.Consumed)
}

// A client that leaves before the upstream's status line gets the hint rolled back.
func TestClientDisconnectBeforeStatusRollsBack(t *testing.T) {
	g := newGatedStream(t, time.Hour)
	r := newRig(t, proxy.Config{AnthropicURL: g.srv.URL}, hint.Config{})
	h := r.put("s1", "not seen yet")
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.url(proxy.Anthropic)+"/v1/messages",
		strings.NewReader(`{"messages":[{"role":"user","content":"go"}]}`))
	req.Header.Set("X-Pixie-Session-Id", "s1")
	done := make(chan error, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	<-g.bodies
	if st, open := r.state(h.ID); st != hint.Consumed || !open {
		t.Fatalf("while waiting for the upstream the hint is %s (open %v)", st, open)
	}
	cancel()
	<-done
	<-g.canceled
	r.waitState(h.ID, hint.Pending)
}

// An upstream that takes longer than the lease to send its status line keeps the take: the
// proxy renews it, so the hint is neither swept back nor handed to a concurrent step.
func TestSlowStatusLineRenewsTheLease(t *testing.T) {
	g := newGatedStream(t, 900*time.Millisecond)
	close(g.release)
	lease := 300 * time.Millisecond
	r := newRig(t, proxy.Config{AnthropicURL: g.srv.URL, Lease: lease}, hint.Config{Lease: lease})
	h := r.put("s1", "slow but once")
	send := func(text string) {
		req, _ := http.NewRequest(http.MethodPost, r.url(proxy.Anthropic)+"/v1/messages",
			strings.NewReader(`{"messages":[{"role":"user","content":"`+text+`"}]}`))
		req.Header.Set("X-Pixie-Session-Id", "s1")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); send("first") }()
	first := <-g.bodies
	time.Sleep(2 * lease) // past the lease: a sweep would have returned the hint by now
	send("second")
	wg.Wait()
	second := <-g.bodies
	if !bytes.Contains(first, []byte(h.Text)) || bytes.Contains(second, []byte(h.Text)) {
		t.Fatalf("want the hint in the first request only:\n%s\n%s", first, second)
	}
	r.waitState(h.ID, hint.Consumed)
}

// Concurrent steps of several sessions: every session hint reaches exactly one request of its
// own session, and every global hint exactly one request of any session.
func TestConcurrentSessionsTakeDifferentHints(t *testing.T) {
	up := fakemodel.NewOpenAI(t, fakemodel.Steps(fakemodel.Reply{Text: "ok"}))
	r := newRig(t, proxy.Config{OpenAIURL: up.URL}, hint.Config{MaxPerStep: 2})
	const sessions, perSession, globals = 6, 4, 6
	want := map[string]string{} // hint text → its session ("" global)
	for s := range sessions {
		for i := range perSession {
			h := r.put(fmt.Sprintf("s%d", s), fmt.Sprintf("hint-s%d-%d", s, i))
			want[h.Text] = h.SessionID
		}
	}
	for i := range globals {
		h := r.put("", fmt.Sprintf("hint-global-%d", i))
		want[h.Text] = ""
	}
	var wg sync.WaitGroup
	for s := range sessions {
		for range 2 { // two concurrent clients per session
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := openai.NewClient(ooption.WithBaseURL(r.url(proxy.OpenAI)+"/v1"), ooption.WithAPIKey("k"), ooption.WithMaxRetries(0),
					ooption.WithHeader("Session-Id", fmt.Sprintf("s%d", s)))
				for range 6 {
					st := c.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: "m",
						Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("step")},
						Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "shell", Parameters: map[string]any{"type": "object"}}}}})
					for st.Next() {
					}
					if err := st.Err(); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	reqs := up.Requests()
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
	snap, _ := r.q.Snapshot(context.Background())
	if len(snap.Pending) != 0 {
		t.Errorf("%d hints still pending", len(snap.Pending))
	}
}

// A stream of 1,000 SSE events arrives intact, byte for byte, and each event is flushed as it
// comes (the first arrives while the upstream still holds the rest).
func TestThousandEventStreamPassesIntact(t *testing.T) {
	var sent bytes.Buffer
	for i := range 1000 {
		fmt.Fprintf(&sent, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"%d ünï\\n\"}}\n\n", i)
	}
	firstSeen := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		b := sent.Bytes()
		first := bytes.Index(b, []byte("\n\n")) + 2
		_, _ = w.Write(b[:first])
		w.(http.Flusher).Flush()
		select {
		case <-firstSeen:
		case <-time.After(5 * time.Second):
		}
		for i := first; i < len(b); i += 97 { // odd write sizes split events
			_, _ = w.Write(b[i:min(i+97, len(b))])
			w.(http.Flusher).Flush()
		}
	}))
	defer up.Close()
	r := newRig(t, proxy.Config{AnthropicURL: up.URL}, hint.Config{})
	res, err := http.Post(r.url(proxy.Anthropic)+"/v1/messages", "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	var got bytes.Buffer
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	got.WriteString(line)
	close(firstSeen)
	if _, err := io.Copy(&got, br); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), sent.Bytes()) {
		t.Fatalf("the stream changed: got %d bytes, want %d", got.Len(), sent.Len())
	}
	if n := strings.Count(got.String(), "event: content_block_delta"); n != 1000 {
		t.Fatalf("%d events", n)
	}
}

// A body over the injection limit is forwarded as it is, without hints, with a note in the log;
// the hint waits for a step that fits.
func TestBodyOverLimitIsForwardedWithoutHints(t *testing.T) {
	up := fakemodel.NewAnthropic(t, nil)
	r := newRig(t, proxy.Config{AnthropicURL: up.URL, InjectLimit: 1024}, hint.Config{})
	h := r.put("s1", "too big to carry")
	for _, size := range []int{1024, 1025, 64 << 10} {
		body := `{"messages":[{"role":"user","content":"` + strings.Repeat("x", size) + `"}]}`
		body = body[:len(body)-len(`"}]}`)-(len(body)-size)] + `"}]}`
		if len(body) != size {
			t.Fatalf("built %d bytes, want %d", len(body), size)
		}
		req, _ := http.NewRequest(http.MethodPost, r.url(proxy.Anthropic)+"/v1/messages", strings.NewReader(body))
		req.Header.Set("X-Pixie-Session-Id", "s1")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		reqs := up.Requests()
		last := reqs[len(reqs)-1]
		if size <= 1024 {
			if !last.Contains(h.Text) {
				t.Fatalf("a %d-byte body (at the limit) did not carry the hint", size)
			}
			// Put it back for the next case.
			r.waitState(h.ID, hint.Consumed)
			h = r.put("s1", "too big to carry")
			continue
		}
		if string(last.Body) != body {
			t.Fatalf("a %d-byte body changed on the way", size)
		}
		if st, _ := r.state(h.ID); st != hint.Pending {
			t.Fatalf("the hint is %s after a %d-byte body", st, size)
		}
	}
	if !strings.Contains(r.logs.String(), "over the injection limit") {
		t.Fatalf("no note in the log:\n%s", r.logs)
	}
}

// Requests that are not a step of the session's main agent take nothing, and reach the
// upstream unchanged.
func TestNonStepsTakeNoHints(t *testing.T) {
	upA := fakemodel.NewAnthropic(t, nil)
	upO := fakemodel.NewOpenAI(t, nil)
	r := newRig(t, proxy.Config{AnthropicURL: upA.URL, OpenAIURL: upO.URL}, hint.Config{})
	h := r.put("s1", "main agent only")
	g := r.put("", "global too")
	tools := `"tools":[{"name":"Bash","input_schema":{"type":"object"}}]`
	for _, tc := range []struct {
		name, path, body string
		api              proxy.API
		hdr              []string
	}{
		{"claude subagent", "/v1/messages", `{` + tools + `,"messages":[{"role":"user","content":"child"}]}`, proxy.Anthropic,
			[]string{"X-Claude-Code-Session-Id", "s1", "X-Claude-Code-Agent-Id", "a1"}},
		{"claude title", "/v1/messages", `{"tools":[],"messages":[{"role":"user","content":"title"}],"output_config":{"format":{"type":"json_schema"}}}`, proxy.Anthropic,
			[]string{"X-Claude-Code-Session-Id", "s1"}},
		{"claude compaction", "/v1/messages", `{` + tools + `,"messages":[{"role":"user","content":"Your task is to create a detailed summary of the conversation so far."}]}`, proxy.Anthropic,
			[]string{"X-Claude-Code-Session-Id", "s1"}},
		{"count tokens", "/v1/messages/count_tokens", `{"messages":[{"role":"user","content":"x"}]}`, proxy.Anthropic,
			[]string{"X-Claude-Code-Session-Id", "s1"}},
		{"codex subagent", "/v1/responses", `{"input":"child"}`, proxy.OpenAI,
			[]string{"Session-Id", "s1", "Thread-Id", "t2", "X-Openai-Subagent", "collab_spawn", "X-Codex-Parent-Thread-Id", "s1"}},
		{"codex title", "/v1/responses", `{"input":"title"}`, proxy.OpenAI,
			[]string{"Session-Id", "s1", "X-Codex-Turn-Metadata", `{"thread_source":"thread_title"}`}},
		{"codex compaction endpoint", "/v1/responses/compact", `{"input":"x"}`, proxy.OpenAI, []string{"Session-Id", "s1"}},
		{"stored conversation", "/v1/responses", `{"input":"x","previous_response_id":"resp_1"}`, proxy.OpenAI, []string{"Session-Id", "s1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, r.url(tc.api)+tc.path, strings.NewReader(tc.body))
			for i := 0; i+1 < len(tc.hdr); i += 2 {
				req.Header.Set(tc.hdr[i], tc.hdr[i+1])
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			reqs := append(upA.Requests(), upO.Requests()...)
			found := false
			for _, q := range reqs {
				if string(q.Body) == tc.body {
					found = true
				}
				if q.Contains(h.Text) || q.Contains(g.Text) {
					t.Fatalf("a hint was injected into %s", tc.name)
				}
			}
			if !found {
				t.Fatalf("the upstream did not get the body unchanged")
			}
		})
	}
	for _, id := range []string{h.ID, g.ID} {
		if st, _ := r.state(id); st != hint.Pending {
			t.Fatalf("hint %s is %s", id, st)
		}
	}
}

// hints.delivery: hooks — the proxy forwards, never injects.
func TestNoInjectForwardsOnly(t *testing.T) {
	up := fakemodel.NewAnthropic(t, nil)
	r := newRig(t, proxy.Config{AnthropicURL: up.URL, NoInject: true}, hint.Config{})
	h := r.put("", "left to the hooks")
	if _, err := streamMessage(t, anthropicClient(r.url(proxy.Anthropic)), "x"); err != nil {
		t.Fatal(err)
	}
	if countContaining(up.Requests(), h.Text) != 0 {
		t.Fatal("injected with NoInject")
	}
	if st, _ := r.state(h.ID); st != hint.Pending {
		t.Fatalf("hint is %s", st)
	}
}

// A gzip-encoded body is decoded to carry a hint (and sent plain); without hints it travels
// compressed as it came.
func TestCompressedRequestBody(t *testing.T) {
	up := fakemodel.NewAnthropic(t, nil)
	var raw []struct {
		enc  string
		body []byte
	}
	var mu sync.Mutex
	tap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		raw = append(raw, struct {
			enc  string
			body []byte
		}{r.Header.Get("Content-Encoding"), b})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	defer tap.Close()
	_ = up
	r := newRig(t, proxy.Config{AnthropicURL: tap.URL}, hint.Config{})
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	_, _ = zw.Write([]byte(`{"messages":[{"role":"user","content":"zipped"}]}`))
	zw.Close()
	send := func() {
		req, _ := http.NewRequest(http.MethodPost, r.url(proxy.Anthropic)+"/v1/messages", bytes.NewReader(zb.Bytes()))
		req.Header.Set("Content-Encoding", "gzip")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	send()
	h := r.put("", "through gzip")
	send()
	mu.Lock()
	defer mu.Unlock()
	if raw[0].enc != "gzip" || !bytes.Equal(raw[0].body, zb.Bytes()) {
		t.Fatalf("without hints the compressed body changed: %q", raw[0].enc)
	}
	if raw[1].enc != "" || !bytes.Contains(raw[1].body, []byte(h.Text)) || !bytes.Contains(raw[1].body, []byte("zipped")) {
		t.Fatalf("with a hint: enc %q body %s", raw[1].enc, raw[1].body)
	}
}

// Chat Completions through the official SDK: the hint goes into the last user message.
func TestChatCompletionsWithTheSDK(t *testing.T) {
	var bodies [][]byte
	var mu sync.Mutex
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"fine"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`))
	}))
	defer up.Close()
	r := newRig(t, proxy.Config{OpenAIURL: up.URL}, hint.Config{})
	h := r.put("chat-1", "answer in French")
	c := openai.NewClient(ooption.WithBaseURL(r.url(proxy.OpenAI)+"/v1"), ooption.WithAPIKey("k"), ooption.WithMaxRetries(0),
		ooption.WithHeader("X-Pixie-Session-Id", "chat-1"))
	for range 2 {
		res, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "m",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("hello")}})
		if err != nil || res.Choices[0].Message.Content != "fine" {
			t.Fatalf("%v %v", res, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !bytes.Contains(bodies[0], []byte(h.Text)) || bytes.Contains(bodies[1], []byte(h.Text)) {
		t.Fatalf("want the hint in the first request only:\n%s\n%s", bodies[0], bodies[1])
	}
	r.waitState(h.ID, hint.Consumed)
}

// Carries remembers the sessions whose steps went through the proxy, in the store too, so a
// new process (a restart, another replica) knows them.
func TestCarriesRemembersSessions(t *testing.T) {
	up := fakemodel.NewAnthropic(t, nil)
	r := newRig(t, proxy.Config{AnthropicURL: up.URL}, hint.Config{})
	ctx := context.Background()
	if r.p.Carries(ctx, "cc-1") {
		t.Fatal("carries a session it never saw")
	}
	if _, err := streamMessage(t, anthropicClient(r.url(proxy.Anthropic), aoption.WithHeader("X-Claude-Code-Session-Id", "cc-1")), "x"); err != nil {
		t.Fatal(err)
	}
	if !r.p.Carries(ctx, "cc-1") {
		t.Fatal("does not carry the session it forwarded")
	}
	other, err := proxy.New(context.Background(), proxy.Config{Store: r.st, Hints: r.q})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !other.Carries(ctx, "cc-1") {
		if time.Now().After(deadline) {
			t.Fatal("another proxy over the same store does not know the session")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if other.Carries(ctx, "cc-2") || other.Carries(ctx, "") {
		t.Fatal("carries unknown sessions")
	}
}

func TestNewRefusesBadUpstreams(t *testing.T) {
	for _, u := range []string{"ftp://x", "not a url", "http://", "https://api.example.com/?q=1"} {
		if _, err := proxy.New(context.Background(), proxy.Config{AnthropicURL: u}); err == nil {
			t.Errorf("accepted upstream %q", u)
		}
	}
	p, err := proxy.New(context.Background(), proxy.Config{})
	if err != nil || p.Upstream(proxy.Anthropic) != proxy.DefaultAnthropicURL || p.Upstream(proxy.OpenAI) != proxy.DefaultOpenAIURL {
		t.Fatalf("defaults: %v %v", p, err)
	}
}

// A path cannot climb out of the upstream's base path.
func TestPathStaysUnderTheUpstreamBase(t *testing.T) {
	var got []string
	var mu sync.Mutex
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.Path)
		mu.Unlock()
	}))
	defer up.Close()
	r := newRig(t, proxy.Config{OpenAIURL: up.URL + "/base"}, hint.Config{})
	for _, p := range []string{"/v1/models", "/../../admin", "/v1/../../x", "/v1/files/"} {
		req, _ := http.NewRequest(http.MethodGet, r.url(proxy.OpenAI), nil)
		req.URL.Opaque = "/v1/proxy/openai" + p // sent as written, not cleaned by the client
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"/base/v1/models", "/base/admin", "/base/x", "/base/v1/files/"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("upstream paths %v, want %v", got, want)
	}
}

// A request whose session cannot be told takes only global hints, never a session's.
func TestUnknownSessionTakesOnlyGlobalHints(t *testing.T) {
	up := fakemodel.NewAnthropic(t, nil)
	r := newRig(t, proxy.Config{AnthropicURL: up.URL}, hint.Config{})
	mine := r.put("s1", "for s1 only")
	global := r.put("", "for whoever steps first")
	if _, err := streamMessage(t, anthropicClient(r.url(proxy.Anthropic)), "no session header"); err != nil {
		t.Fatal(err)
	}
	reqs := up.Requests()
	if !reqs[0].Contains(global.Text) || reqs[0].Contains(mine.Text) {
		t.Fatalf("a request without a session got: global %v, s1's %v", reqs[0].Contains(global.Text), reqs[0].Contains(mine.Text))
	}
	r.waitState(global.ID, hint.Consumed)
	if st, _ := r.state(mine.ID); st != hint.Pending {
		t.Fatalf("s1's hint is %s", st)
	}
}

// TestCloseClosesIdleUpstreamConnections: the upstream connection an exchange leaves idle in
// the proxy's own transport stays open until Close, and Close closes it.
func TestCloseClosesIdleUpstreamConnections(t *testing.T) {
	var mu sync.Mutex
	opened, closed := 0, 0
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		switch s {
		case http.StateNew:
			opened++
		case http.StateClosed:
			closed++
		}
	}
	up.Start()
	defer up.Close()
	r := newRig(t, proxy.Config{AnthropicURL: up.URL}, hint.Config{})
	counts := func() (int, int) { mu.Lock(); defer mu.Unlock(); return opened, closed }

	req, _ := http.NewRequest(http.MethodPost, r.url(proxy.Anthropic)+"/v1/messages", strings.NewReader(`{"messages":[]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Pixie-Session-Id", "s1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	time.Sleep(100 * time.Millisecond)
	if o, c := counts(); o != 1 || c != 0 {
		t.Fatalf("before Close: %d upstream connections opened, %d closed; want 1 open", o, c)
	}
	if err := r.p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, c := counts(); c == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Close did not close the idle upstream connection")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The message the proxy injects is the spec's, word for word: through the proxy the hint is in
// one request and never in the chat history, so with hints.locale zh its header is the spec's
// whole sentence ("…，不占对话历史，仅本条可见"), where the hooks' header leaves that claim out.
func TestProxyMessageIsTheSpecsZh(t *testing.T) {
	const spec = "📌 旁路提示（用户在任务执行过程中插入，不占对话历史，仅本条可见）\n" +
		"请在本步参考下面的要求，然后继续原来的任务；不要停下来等待确认，也不要把它当作新的用户回合。\n" +
		"1. 先跑测试"
	up := fakemodel.NewAnthropic(t, fakemodel.Steps(fakemodel.Reply{Text: "好"}))
	r := newRig(t, proxy.Config{AnthropicURL: up.URL}, hint.Config{Locale: "zh"})
	r.put("s1", "先跑测试")
	c := anthropicClient(r.url(proxy.Anthropic), aoption.WithHeader("X-Pixie-Session-Id", "s1"))
	if _, err := streamMessage(t, c, "step"); err != nil {
		t.Fatal(err)
	}
	reqs := up.Requests()
	if len(reqs) != 1 || reqs[0].LastUser != "step\n"+spec {
		t.Fatalf("the last user turn is %q, want the prompt and then\n%s", reqs[0].LastUser, spec)
	}
	// The hooks' rendering of the same hint keeps the shorter header (the claim is false there).
	if got := r.q.Render([]hint.Hint{{Text: "先跑测试"}}); strings.Contains(got, "不占对话历史") || !strings.HasPrefix(got, "📌 旁路提示（用户在任务执行过程中插入）\n") {
		t.Fatalf("the hooks' message: %q", got)
	}
}

// post sends a raw Messages request for session through the proxy and returns the status and
// the answer.
func (r *rig) post(session, body string) (int, string) {
	r.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.url(proxy.Anthropic)+"/v1/messages", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("X-Api-Key", "sk-ant-client-secret-1")
	if session != "" {
		req.Header.Set("X-Pixie-Session-Id", session)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// A session's replacements reach the upstream in every request that holds the original: the
// replaced prompt in the step after the hook and in every later step (where it is no longer the
// latest message), a built-in tool's replaced result wherever it appears; another session's
// identical prompt is untouched, and so is every byte the rules do not name. Replacements and
// hints go together.
func TestRewritesInEveryRequest(t *testing.T) {
	up := fakemodel.NewAnthropic(t, fakemodel.Steps(fakemodel.Reply{Text: "ok"}))
	r := newRig(t, proxy.Config{AnthropicURL: up.URL}, hint.Config{})
	ctx := context.Background()
	if err := r.rw.ReplaceMessage(ctx, "s1", "ORIG-PROMPT: delete the build", "NEW-PROMPT: move ./build to ./trash"); err != nil {
		t.Fatal(err)
	}
	if err := r.rw.ReplaceToolResult(ctx, "s1", "toolu_7", "TA-DIGEST: two files"); err != nil {
		t.Fatal(err)
	}
	h := r.put("s1", "HINT-R: keep the logs")
	const tools = `,"tools":[{"name":"Bash","input_schema":{"type":"object"}}],"max_tokens":10,"model":"m"}`
	first := `{"messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>r</system-reminder>"},{"type":"text","text":"ORIG-PROMPT: delete the build"}]}]` + tools
	later := `{"messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>r</system-reminder>"},{"type":"text","text":"ORIG-PROMPT: delete the build"}]},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_7","name":"Bash","input":{"command":"ls"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_7","content":[{"type":"text","text":"SECRET-OUTPUT a.txt b.txt"}]}]}]` + tools
	for i, body := range []string{first, later, later} {
		if st, out := r.post("s1", body); st != 200 || !strings.Contains(out, "ok") {
			t.Fatalf("request %d: %d %s", i, st, out)
		}
	}
	if st, _ := r.post("s2", first); st != 200 {
		t.Fatalf("s2: %d", st)
	}
	reqs := up.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d upstream requests", len(reqs))
	}
	for i, q := range reqs[:3] {
		if q.Contains("ORIG-PROMPT") || !q.Contains("NEW-PROMPT: move ./build to ./trash") || q.Contains("SECRET-OUTPUT") {
			t.Fatalf("request %d of s1:\n%s", i, q.Body)
		}
		if i > 0 && (len(q.Results) != 1 || q.Results[0].CallID != "toolu_7" || !q.Contains(`"content":"TA-DIGEST: two files"`)) {
			t.Fatalf("request %d: the tool result %+v", i, q.Results)
		}
	}
	// The edits touch only the values they replace (and the hint only the last user turn).
	want := strings.Replace(first, "ORIG-PROMPT: delete the build", "NEW-PROMPT: move ./build to ./trash", 1)
	if got := string(reqs[0].Body); !strings.HasPrefix(got, strings.TrimSuffix(want, "]}]"+tools)) {
		t.Fatalf("request 0 changed more than the prompt:\n%s\nwant the start of\n%s", got, want)
	}
	if string(reqs[2].Body) != strings.Replace(strings.Replace(later, "ORIG-PROMPT: delete the build", "NEW-PROMPT: move ./build to ./trash", 1),
		`[{"type":"text","text":"SECRET-OUTPUT a.txt b.txt"}]`, `"TA-DIGEST: two files"`, 1) {
		t.Fatalf("request 2 changed more than the replacements:\n%s", reqs[2].Body)
	}
	if countContaining(reqs, h.Text) != 1 || !reqs[0].Contains(h.Text) {
		t.Fatalf("the hint is in %d requests, want the first only", countContaining(reqs, h.Text))
	}
	if string(reqs[3].Body) != first {
		t.Fatalf("another session's request changed:\n%s", reqs[3].Body)
	}
	// The prompt rule is bound to its place, and kept.
	rs, err := r.rw.For(ctx, "s1")
	if err != nil || len(rs) != 2 || !rs[0].Bound || rs[0].Index != 0 || rs[1].AppliedAt.IsZero() {
		t.Fatalf("rules after the requests: %+v %v", rs, err)
	}
}

// When the session's replacements cannot be read, the request is refused (in the API's error
// shape) rather than forwarded with what a gate replaced.
func TestRewritesUnreadableRefuses(t *testing.T) {
	up := fakemodel.NewAnthropic(t, fakemodel.Steps(fakemodel.Reply{Text: "ok"}))
	r := newRig(t, proxy.Config{AnthropicURL: up.URL}, hint.Config{})
	if err := r.rw.ReplaceMessage(context.Background(), "s1", "ORIG", "NEW"); err != nil {
		t.Fatal(err)
	}
	r.st.Close()
	st, out := r.post("s1", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"ORIG"}]}`)
	if st != http.StatusServiceUnavailable || !strings.Contains(out, `"type":"error"`) || len(up.Requests()) != 0 {
		t.Fatalf("%d %s; the upstream got %d requests", st, out, len(up.Requests()))
	}
}

// A body over the injection limit is forwarded unread, unless its session has replacements to
// make in it: that request is refused (413), while another session's goes through.
func TestRewritesBodyOverTheLimit(t *testing.T) {
	up := fakemodel.NewAnthropic(t, fakemodel.Steps(fakemodel.Reply{Text: "ok"}))
	r := newRig(t, proxy.Config{AnthropicURL: up.URL, InjectLimit: 200}, hint.Config{})
	if err := r.rw.ReplaceMessage(context.Background(), "s1", "ORIG", "NEW"); err != nil {
		t.Fatal(err)
	}
	big := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"ORIG ` + strings.Repeat("x", 300) + `"}]}`
	if st, out := r.post("s1", big); st != http.StatusRequestEntityTooLarge || !strings.Contains(out, "replacements") {
		t.Fatalf("s1: %d %s", st, out)
	}
	if st, _ := r.post("s2", big); st != 200 {
		t.Fatalf("s2: %d", st)
	}
	if reqs := up.Requests(); len(reqs) != 1 || string(reqs[0].Body) != big {
		t.Fatalf("the upstream got %d requests", len(reqs))
	}
}

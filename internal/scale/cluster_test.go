package scale

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/store/pgstore/pgtest"
	"github.com/pixie-dev/pixie/internal/testutil"
)

// cluster is N `pixie serve` replicas on one database, and a round-robin balancer in front.
type cluster struct {
	t     testing.TB
	url   string // the database
	reps  []*testutil.Proc
	lb    *balancer
	token string
}

type clusterOptions struct {
	n    int
	env  []string // added to every replica's environment
	args []string // added to every replica's command line
	// homeSetup runs on each home before its replica starts.
	homeSetup func(home string)
}

// startCluster starts opts.n replicas on a fresh database: the first alone (it creates the
// admin token), the others after it.
func startCluster(t testing.TB, opts clusterOptions) *cluster {
	t.Helper()
	c := &cluster{t: t, url: pgtest.NewDatabase(t)}
	addrs := make([]string, opts.n)
	for i := range addrs {
		addrs[i] = testutil.FreeAddr(t)
	}
	c.lb = newBalancer(t, addrs)
	env := append([]string{"PIXIE_STORE_DRIVER=postgres", "PIXIE_STORE_POSTGRES_URL=" + c.url,
		"PIXIE_STORE_POSTGRES_MAX_CONNS=6", "PIXIE_PUBLIC_URL=" + c.lb.srv.URL}, opts.env...)
	start := func(i int) *testutil.Proc {
		home := filepath.Join(t.TempDir(), fmt.Sprintf("home-%c", 'a'+i))
		if err := os.MkdirAll(filepath.Join(home, "commands"), 0o700); err != nil {
			t.Fatal(err)
		}
		if opts.homeSetup != nil {
			opts.homeSetup(home)
		}
		return testutil.StartServerAt(t, addrs[i], home, env, opts.args...)
	}
	c.reps = append(c.reps, start(0))
	var wg sync.WaitGroup
	rest := make([]*testutil.Proc, opts.n-1)
	for i := 1; i < opts.n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rest[i-1] = start(i)
		}()
	}
	wg.Wait()
	c.reps = append(c.reps, rest...)
	c.token = c.reps[0].Token(t)
	return c
}

// call sends one API request to replica i (or to the balancer when i < 0) and decodes the
// answer; it returns the status and the raw body. A transport error is returned as is (a
// killed replica).
func (c *cluster) call(i int, method, path string, in, out any) (int, []byte, error) {
	base := c.lb.srv.URL
	if i >= 0 {
		base = c.reps[i].URL
	}
	var body io.Reader
	ct := "application/json"
	switch v := in.(type) {
	case nil:
	case []byte:
		body, ct = bytes.NewReader(v), "application/wasm"
	default:
		raw, err := json.Marshal(v)
		if err != nil {
			return 0, nil, err
		}
		body = bytes.NewReader(raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, body)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if in != nil {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, raw, err
	}
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, raw, fmt.Errorf("decode %s: %w", raw, err)
		}
	}
	return resp.StatusCode, raw, nil
}

// must is call that fails the test on anything but a 2xx.
func (c *cluster) must(i int, method, path string, in, out any) {
	c.t.Helper()
	st, raw, err := c.call(i, method, path, in, out)
	if err != nil || st/100 != 2 {
		c.t.Fatalf("replica %d: %s %s: %d %s %v", i, method, path, st, raw, err)
	}
}

// balancer is a round-robin reverse proxy over the replicas, recording which replica served
// each request path.
type balancer struct {
	srv   *httptest.Server
	next  atomic.Uint64
	mu    sync.Mutex
	down  map[int]bool
	seen  map[string][]int
	backs []*httputil.ReverseProxy
}

func newBalancer(t testing.TB, addrs []string) *balancer {
	b := &balancer{down: map[int]bool{}, seen: map[string][]int{}}
	for _, a := range addrs {
		u, _ := url.Parse("http://" + a)
		b.backs = append(b.backs, httputil.NewSingleHostReverseProxy(u))
	}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for range len(b.backs) {
			i := int(b.next.Add(1) % uint64(len(b.backs)))
			b.mu.Lock()
			skip := b.down[i]
			if !skip {
				b.seen[r.URL.Path] = append(b.seen[r.URL.Path], i)
			}
			b.mu.Unlock()
			if !skip {
				b.backs[i].ServeHTTP(w, r)
				return
			}
		}
		http.Error(w, "no replica", http.StatusBadGateway)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *balancer) served(path string) []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int(nil), b.seen[path]...)
}

func (b *balancer) markDown(i int) {
	b.mu.Lock()
	b.down[i] = true
	b.mu.Unlock()
}

// sseEvent is one frame of a hint stream.
type sseEvent struct {
	name string
	data []byte
	at   time.Time
}

// stream opens GET /v1/hints/events on replica i; frames arrive on the channel until the test
// ends.
func (c *cluster) stream(i int) <-chan sseEvent {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.reps[i].URL+"/v1/hints/events", nil)
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		c.t.Fatalf("stream on replica %d: %v", i, err)
	}
	out := make(chan sseEvent, 4096)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					ev.at = time.Now()
					out <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = append(ev.data, strings.TrimPrefix(line, "data: ")...)
			}
		}
	}()
	return out
}

// fakeModel is an OpenAI-compatible chat.completions endpoint: every answer is "answer: " and
// the last user message's first line.
func fakeModel(t testing.TB) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer k" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`)
			return
		}
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role    string `json:"role"`
				Content any    `json:"content"`
			} `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		last := ""
		for _, m := range req.Messages {
			if s, ok := m.Content.(string); ok && m.Role == "user" {
				last = s
			}
		}
		last, _, _ = strings.Cut(last, "\n")
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-scale", "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": "answer: " + last}}},
			"usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
		})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func modelEnv(srv *httptest.Server) []string {
	return []string{"PIXIE_MODEL_PROVIDER=openai", "PIXIE_MODEL_BASE_URL=" + srv.URL + "/v1", "PIXIE_MODEL_MODEL=m", "PIXIE_MODEL_API_KEY=k"}
}

// fakeLark speaks Lark's open API wire format for the calls the channel makes here (tenant
// token, bot info, reply, reactions, chat members), checks the bearer token, and records the
// calls. (internal/channel/lark's own tests have a fuller one, private to that package.)
type fakeLark struct {
	srv *httptest.Server
	mu  sync.Mutex
	log []string
	n   int
}

const (
	larkSecret = "app-secret-scale"
	larkToken  = "verification-token-scale"
	larkBot    = "ou_bot_scale"
)

func newFakeLark(t testing.TB) *fakeLark {
	f := &fakeLark{}
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_ = json.NewEncoder(w).Encode(v)
	}
	auth := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer t-cli_") {
				w.WriteHeader(http.StatusUnauthorized)
				writeJSON(w, map[string]any{"code": 99991663, "msg": "invalid access token"})
				return
			}
			h(w, r)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /open-apis/auth/v3/tenant_access_token/internal", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			AppID     string `json:"app_id"`
			AppSecret string `json:"app_secret"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.AppSecret != larkSecret {
			writeJSON(w, map[string]any{"code": 10014, "msg": "app secret invalid"})
			return
		}
		writeJSON(w, map[string]any{"code": 0, "msg": "ok", "tenant_access_token": "t-" + req.AppID, "expire": 7200})
	})
	mux.HandleFunc("GET /open-apis/bot/v3/info", auth(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"code": 0, "msg": "ok", "bot": map[string]any{"activate_status": 2, "app_name": "Pixie", "open_id": larkBot}})
	}))
	mux.HandleFunc("POST /open-apis/im/v1/messages/{id}/reply", auth(func(w http.ResponseWriter, r *http.Request) {
		f.record("reply " + r.PathValue("id"))
		writeJSON(w, map[string]any{"code": 0, "msg": "success", "data": map[string]any{"message_id": "om_reply" + f.id(), "msg_type": "text"}})
	}))
	mux.HandleFunc("POST /open-apis/im/v1/messages/{id}/reactions", auth(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ReactionType struct {
				EmojiType string `json:"emoji_type"`
			} `json:"reaction_type"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.record("react " + r.PathValue("id") + " " + req.ReactionType.EmojiType)
		writeJSON(w, map[string]any{"code": 0, "msg": "success", "data": map[string]any{"reaction_id": "r" + f.id(),
			"reaction_type": map[string]string{"emoji_type": req.ReactionType.EmojiType}}})
	}))
	mux.HandleFunc("DELETE /open-apis/im/v1/messages/{id}/reactions/{rid}", auth(func(w http.ResponseWriter, r *http.Request) {
		f.record("unreact " + r.PathValue("id"))
		writeJSON(w, map[string]any{"code": 0, "msg": "success", "data": map[string]any{"reaction_id": r.PathValue("rid")}})
	}))
	mux.HandleFunc("GET /open-apis/im/v1/chats/{chat}/members", auth(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"code": 0, "msg": "success", "data": map[string]any{"items": []any{}, "has_more": false, "member_total": 0}})
	}))
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeLark) id() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	return fmt.Sprint(f.n)
}

func (f *fakeLark) record(s string) {
	f.mu.Lock()
	f.log = append(f.log, s)
	f.mu.Unlock()
}

// count counts the recorded calls that start with prefix.
func (f *fakeLark) count(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, l := range f.log {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// larkEvent is an im.message.receive_v1 event (plain mode: no encrypt key is bound) of text
// from sender in a group chat, mentioning the bot.
func larkEvent(appID, eventID, messageID, sender, chat, text string) []byte {
	now := time.Now()
	content, _ := json.Marshal(map[string]string{"text": "@_user_1 " + text})
	ms := fmt.Sprint(now.UnixMilli())
	env := map[string]any{
		"schema": "2.0",
		"header": map[string]string{"event_id": eventID, "event_type": "im.message.receive_v1", "app_id": appID,
			"tenant_key": "tk", "create_time": ms, "token": larkToken},
		"event": map[string]any{
			"sender": map[string]any{"sender_id": map[string]string{"open_id": sender}, "sender_type": "user", "tenant_key": "tk"},
			"message": map[string]any{"message_id": messageID, "chat_id": chat, "chat_type": "group", "message_type": "text",
				"content": string(content), "create_time": ms,
				"mentions": []any{map[string]any{"key": "@_user_1", "name": "Pixie",
					"id": map[string]string{"open_id": larkBot, "union_id": "on_bot", "user_id": ""}}}},
		},
	}
	b, _ := json.Marshal(env)
	return b
}

// eventually polls cond until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/hint"
	"github.com/pixie-dev/pixie/internal/proxy"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
	"github.com/pixie-dev/pixie/internal/testutil/fakemodel"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

type proxyEnv struct {
	url      string
	st       *store.Store
	dataDir  string
	q        *hint.Queue
	anth     *fakemodel.Server
	oai      *fakemodel.Server
	logs     *syncBuffer
	closeAll func()
}

// newProxyEnv runs the real server (its own http.Server, with cfg's timeouts) in front of fake
// model APIs, with a hint queue over Badger in dataDir.
func newProxyEnv(t *testing.T, cfg Config, anthScript fakemodel.Script) *proxyEnv {
	t.Helper()
	dir := t.TempDir()
	st, err := badgerstore.Open(context.Background(), badgerstore.Options{Dir: dir, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	q, err := hint.New(context.Background(), hint.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	anth := fakemodel.NewAnthropic(t, anthScript)
	oai := fakemodel.NewOpenAI(t, nil)
	p, err := proxy.New(context.Background(), proxy.Config{Store: st, Hints: q, AnthropicURL: anth.URL, OpenAIURL: oai.URL, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Token, cfg.Logger = testToken, log
	if cfg.BodyLimit == 0 {
		cfg.BodyLimit = 1024
	}
	s := serverFor(t, cfg, Deps{Store: st, Hints: q, Proxy: p})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln, time.Second) }()
	env := &proxyEnv{url: "http://" + ln.Addr().String(), st: st, dataDir: dir, q: q, anth: anth, oai: oai, logs: logs}
	var once sync.Once
	env.closeAll = func() {
		once.Do(func() {
			cancel()
			<-done
			q.Close(context.Background())
			st.Close()
		})
	}
	t.Cleanup(env.closeAll)
	return env
}

func (e *proxyEnv) post(t *testing.T, path, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	r, _ := http.NewRequest(http.MethodPost, e.url+path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(b)
}

const msgBody = `{"model":"m","stream":true,"tools":[{"name":"Bash","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"hi"}]}`

// The proxy routes take the admin token the ways the hosts send it, remove it before the
// request goes upstream, pass the client's own credential through, and refuse everything else in
// the API's error shape.
func TestProxyAuth(t *testing.T) {
	env := newProxyEnv(t, Config{}, nil)
	const userKey = "sk-ant-user-key-77"
	for _, tc := range []struct {
		name       string
		path       string
		hdr        []string
		status     int
		wantKey    string // x-api-key the upstream gets
		wantAuth   string // Authorization the upstream gets
		errPattern string
	}{
		{name: "no token", path: "/v1/proxy/anthropic/v1/messages", hdr: []string{"X-Api-Key", userKey}, status: 401,
			errPattern: `{"type":"error","error":{"type":"authentication_error","message":"Pixie: the model-API proxy needs Pixie's token`},
		{name: "no token, openai shape", path: "/v1/proxy/openai/v1/responses", hdr: []string{"Authorization", "Bearer " + userKey}, status: 401,
			errPattern: `{"error":{"message":"Pixie: the model-API proxy needs Pixie's token`},
		{name: "wrong X-Pixie-Token", path: "/v1/proxy/anthropic/v1/messages", hdr: []string{"X-Pixie-Token", "nope", "X-Api-Key", testToken}, status: 401,
			errPattern: `invalid token in X-Pixie-Token`},
		{name: "wrong bearer is the user's", path: "/v1/proxy/anthropic/v1/messages", hdr: []string{"Authorization", "Bearer " + testToken + "x"}, status: 401},
		{name: "X-Pixie-Token", path: "/v1/proxy/anthropic/v1/messages", hdr: []string{"X-Pixie-Token", testToken, "X-Api-Key", userKey},
			status: 200, wantKey: userKey},
		{name: "helper as bearer, user key", path: "/v1/proxy/anthropic/v1/messages", hdr: []string{"Authorization", "Bearer " + testToken, "X-Api-Key", userKey},
			status: 200, wantKey: userKey},
		{name: "helper as key, user bearer", path: "/v1/proxy/anthropic/v1/messages", hdr: []string{"X-Api-Key", testToken, "Authorization", "Bearer " + userKey},
			status: 200, wantAuth: "Bearer " + userKey},
		{name: "helper in both", path: "/v1/proxy/anthropic/v1/messages", hdr: []string{"X-Api-Key", testToken, "Authorization", "Bearer " + testToken},
			status: 200},
		{name: "openai with X-Pixie-Token", path: "/v1/proxy/openai/v1/responses", hdr: []string{"X-Pixie-Token", testToken, "Authorization", "Bearer " + userKey},
			status: 200, wantAuth: "Bearer " + userKey},
		{name: "a disallowed host", path: "/v1/proxy/anthropic/v1/messages", hdr: []string{"X-Pixie-Token", testToken, "Host", "evil.example"}, status: 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(env.anth.Requests()) + len(env.oai.Requests())
			body := msgBody
			if strings.Contains(tc.path, "openai") {
				body = `{"model":"m","input":"hi","stream":true}`
			}
			r, _ := http.NewRequest(http.MethodPost, env.url+tc.path, strings.NewReader(body))
			for i := 0; i+1 < len(tc.hdr); i += 2 {
				if tc.hdr[i] == "Host" {
					r.Host = tc.hdr[i+1]
					continue
				}
				r.Header.Set(tc.hdr[i], tc.hdr[i+1])
			}
			res, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tc.status || !strings.Contains(string(out), tc.errPattern) {
				t.Fatalf("%d %s", res.StatusCode, out)
			}
			reqs := append(env.anth.Requests(), env.oai.Requests()...)
			if tc.status != 200 {
				if len(reqs) != before {
					t.Fatal("a refused request reached the upstream")
				}
				return
			}
			last := reqs[len(reqs)-1]
			if len(env.oai.Requests()) > 0 && strings.Contains(tc.path, "openai") {
				last = env.oai.Requests()[len(env.oai.Requests())-1]
			} else {
				last = env.anth.Requests()[len(env.anth.Requests())-1]
			}
			if got := last.Header.Get("X-Api-Key"); got != tc.wantKey {
				t.Errorf("upstream x-api-key = %q, want %q", got, tc.wantKey)
			}
			if got := last.Header.Get("Authorization"); got != tc.wantAuth {
				t.Errorf("upstream Authorization = %q, want %q", got, tc.wantAuth)
			}
			for k, vs := range last.Header {
				for _, v := range vs {
					if strings.Contains(v, testToken) || strings.EqualFold(k, "X-Pixie-Token") {
						t.Errorf("Pixie's token reached the upstream in %s", k)
					}
				}
			}
		})
	}
}

// The client's credentials are never logged or stored: after requests that carried a hint (and
// one whose upstream failed), neither the log nor any file of the data directory holds them.
func TestProxyCredentialsNeverLoggedOrStored(t *testing.T) {
	var n int
	var mu sync.Mutex
	env := newProxyEnv(t, Config{}, func(fakemodel.Request) fakemodel.Reply {
		mu.Lock()
		defer mu.Unlock()
		n++
		if n == 1 {
			return fakemodel.Reply{Status: 500}
		}
		return fakemodel.Reply{Text: "ok"}
	})
	const userKey = "sk-ant-api03-NEVER-LOG-ME-4f1d"
	const userBearer = "oauth-NEVER-STORE-ME-9c2e"
	if _, err := env.q.Put(context.Background(), "s1", "a hint to carry"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		res, _ := env.post(t, "/v1/proxy/anthropic/v1/messages?beta=true", msgBody,
			"X-Pixie-Token", testToken, "X-Api-Key", userKey, "X-Claude-Code-Session-Id", "s1")
		if res.StatusCode != 200 && res.StatusCode != 500 {
			t.Fatalf("status %d", res.StatusCode)
		}
		res, _ = env.post(t, "/v1/proxy/openai/v1/responses", `{"model":"m","input":"hi"}`,
			"X-Pixie-Token", testToken, "Authorization", "Bearer "+userBearer, "Session-Id", "s2")
		if res.StatusCode != 200 {
			t.Fatalf("status %d", res.StatusCode)
		}
	}
	if got := env.anth.Requests(); len(got) != 3 || countContaining(got, "a hint to carry") != 2 {
		t.Fatalf("the hint travelled in %d of %d requests (want the failed one and its retry)", countContaining(got, "a hint to carry"), len(got))
	}
	logs := env.logs.String()
	if !strings.Contains(logs, "hints carried") {
		t.Fatalf("the log has no injection note:\n%s", logs)
	}
	// Every key and value in the store, read through the store.
	var kv bytes.Buffer
	if err := env.st.View(context.Background(), func(tx *store.Tx) error {
		return tx.ScanRaw("", store.ScanOptions{}, func(k string, v []byte) error {
			kv.WriteString(k)
			kv.Write(v)
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(kv.Bytes(), []byte("a hint to carry")) {
		t.Fatalf("the store scan misses the hint: it would prove nothing")
	}
	// A control: the data directory holds plain text (the hint is found), so the search below
	// would find a key if one had been written.
	control := false
	_ = filepath.WalkDir(env.dataDir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte("a hint to carry")) {
				control = true
			}
		}
		return nil
	})
	if !control {
		t.Fatal("the hint text is in no file of the data directory: the search would prove nothing")
	}
	var err error
	for _, secret := range []string{userKey, userBearer, testToken} {
		if bytes.Contains(kv.Bytes(), []byte(secret)) {
			t.Errorf("the store holds %q", secret)
		}
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds %q", secret)
		}
		err = filepath.WalkDir(env.dataDir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds %q", path, secret)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func countContaining(reqs []fakemodel.Request, s string) int {
	n := 0
	for _, r := range reqs {
		if r.Contains(s) {
			n++
		}
	}
	return n
}

// The proxy routes are not held to the server's body limit (the proxy reads up to its own
// injection limit and streams the rest) nor to its write timeout (a model's answer streams for
// as long as it takes).
func TestProxyBodyLimitAndWriteTimeout(t *testing.T) {
	slow := fakemodel.NewAnthropic(t, nil)
	_ = slow
	// An upstream that streams for longer than the server's write timeout.
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 8 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(100 * time.Millisecond)
		}
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = up.Serve(ln) }()
	t.Cleanup(func() { up.Close() })

	dir := t.TempDir()
	st, err := badgerstore.Open(context.Background(), badgerstore.Options{Dir: dir, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := proxy.New(context.Background(), proxy.Config{Store: st, AnthropicURL: "http://" + ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	s := serverFor(t, Config{Token: testToken, BodyLimit: 1024, WriteTimeout: 300 * time.Millisecond}, Deps{Store: st, Proxy: p})
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = s.Serve(ctx, sl, time.Second) }()
	big := `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 64<<10) + `"}]}`
	r, _ := http.NewRequest(http.MethodPost, "http://"+sl.Addr().String()+"/v1/proxy/anthropic/v1/messages", strings.NewReader(big))
	r.Header.Set("X-Pixie-Token", testToken)
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != 200 || strings.Count(string(out), "data: ") != 8 {
		t.Fatalf("%d %q %v", res.StatusCode, out, err)
	}
}

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/pixie-dev/pixie/internal/store/badgerstore"
)

const testToken = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// newTestServer starts a server on a real Badger store and an httptest listener. logs collects
// every log line.
func newTestServer(t *testing.T) (*Server, *httptest.Server, *bytes.Buffer) {
	t.Helper()
	st, err := badgerstore.Open(context.Background(), badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logs := &bytes.Buffer{}
	s := serverFor(t, Config{Token: testToken, BodyLimit: 1024, Version: "test",
		Logger: slog.New(slog.NewJSONHandler(logs, nil))}, Deps{Store: st})
	// A write route of the test's own, to exercise the auth middleware on writes.
	s.v1.POST("/test-write", func(c echo.Context) error {
		var body map[string]any
		if err := bind(c, &body); err != nil {
			return err
		}
		return c.JSON(http.StatusOK, map[string]any{"ok": true})
	})
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts, logs
}

type req struct {
	method, path, body string
	header             map[string]string
	cookie             *http.Cookie
}

func do(t *testing.T, ts *httptest.Server, r req) (*http.Response, ErrorBody) {
	t.Helper()
	if r.method == "" {
		r.method = http.MethodGet
	}
	hr, err := http.NewRequest(r.method, ts.URL+r.path, strings.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	if r.body != "" {
		hr.Header.Set("Content-Type", "application/json")
	}
	for k, v := range r.header {
		if k == "Host" {
			hr.Host = v
			continue
		}
		hr.Header.Set(k, v)
	}
	if r.cookie != nil {
		hr.AddCookie(r.cookie)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var eb ErrorBody
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(raw, &eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
			t.Fatalf("%s %s: status %d with a body not in the error shape: %s", r.method, r.path, resp.StatusCode, raw)
		}
	}
	return resp, eb
}

func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

func TestAuth(t *testing.T) {
	_, ts, logs := newTestServer(t)
	cases := []struct {
		name     string
		r        req
		status   int
		wantCode string
	}{
		{"healthz-open", req{path: "/healthz"}, 200, ""},
		{"no-token", req{path: "/v1/info"}, 401, "unauthorized"},
		{"wrong-token", req{path: "/v1/info", header: bearer("nope")}, 401, "unauthorized"},
		{"not-bearer", req{path: "/v1/info", header: map[string]string{"Authorization": "Basic " + testToken}}, 401, "unauthorized"},
		{"good-token", req{path: "/v1/info", header: bearer(testToken)}, 200, ""},
		{"metrics-needs-auth", req{path: "/metrics"}, 401, "unauthorized"},
		{"metrics-with-token", req{path: "/metrics", header: bearer(testToken)}, 200, ""},
		{"foreign-host", req{path: "/v1/info", header: map[string]string{"Authorization": "Bearer " + testToken, "Host": "evil.example:7777"}}, 403, "forbidden"},
		{"foreign-host-healthz", req{path: "/healthz", header: map[string]string{"Host": "rebind.example"}}, 403, "forbidden"},
		{"localhost-name", req{path: "/v1/info", header: map[string]string{"Authorization": "Bearer " + testToken, "Host": "localhost:7777"}}, 200, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, eb := do(t, ts, c.r)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d (%+v)", resp.StatusCode, c.status, eb)
			}
			if eb.Error.Code != c.wantCode {
				t.Fatalf("code %q, want %q", eb.Error.Code, c.wantCode)
			}
		})
	}
	if strings.Contains(logs.String(), testToken) {
		t.Fatal("the admin token appeared in the logs")
	}
}

func TestErrorShape(t *testing.T) {
	_, ts, _ := newTestServer(t)
	cases := []struct {
		name   string
		r      req
		status int
		code   string
	}{
		{"unknown-route", req{path: "/v1/nothing-here", header: bearer(testToken)}, 404, "not_found"},
		// Unauthenticated requests learn nothing about which routes exist.
		{"unknown-route-unauthenticated", req{path: "/nothing"}, 401, "unauthorized"},
		{"body-over-limit", req{method: "POST", path: "/v1/test-write", header: bearer(testToken), body: `{"x":"` + strings.Repeat("a", 2000) + `"}`}, 413, "too_large"},
		{"body-at-limit-ok", req{method: "POST", path: "/v1/test-write", header: bearer(testToken), body: `{"x":"` + strings.Repeat("a", 1024-8) + `"}`}, 200, ""},
		{"bad-json", req{method: "POST", path: "/v1/test-write", header: bearer(testToken), body: `{"x":`}, 400, "invalid"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, eb := do(t, ts, c.r)
			if resp.StatusCode != c.status || eb.Error.Code != c.code {
				t.Fatalf("got %d %q, want %d %q", resp.StatusCode, eb.Error.Code, c.status, c.code)
			}
			if c.status >= 400 && resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
			}
		})
	}
}

func TestCookieLogin(t *testing.T) {
	_, ts, logs := newTestServer(t)
	resp, eb := do(t, ts, req{method: "POST", path: "/login", body: `{"token":"wrong"}`})
	if resp.StatusCode != 401 {
		t.Fatalf("wrong token login: %d %+v", resp.StatusCode, eb)
	}
	resp, _ = do(t, ts, req{method: "POST", path: "/login", body: `{"token":"` + testToken + `"}`})
	if resp.StatusCode != 200 {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	var ck *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == CookieName {
			ck = c
		}
	}
	if ck == nil {
		t.Fatal("no session cookie")
	}
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookie flags: HttpOnly=%v SameSite=%v", ck.HttpOnly, ck.SameSite)
	}
	if strings.Contains(ck.Value, testToken) {
		t.Fatal("cookie carries the token")
	}
	tampered := *ck
	tampered.Value = ck.Value[:len(ck.Value)-2] + "xx"
	host := strings.TrimPrefix(ts.URL, "http://")
	cases := []struct {
		name   string
		r      req
		status int
	}{
		{"cookie-read", req{path: "/v1/info", cookie: ck}, 200},
		{"tampered-cookie", req{path: "/v1/info", cookie: &tampered}, 401},
		{"cookie-write-no-origin", req{method: "POST", path: "/v1/test-write", body: `{}`, cookie: ck}, 403},
		{"cookie-write-foreign-origin", req{method: "POST", path: "/v1/test-write", body: `{}`, cookie: ck, header: map[string]string{"Origin": "http://evil.example"}}, 403},
		{"cookie-write-allowed-origin", req{method: "POST", path: "/v1/test-write", body: `{}`, cookie: ck, header: map[string]string{"Origin": "http://" + host}}, 200},
		{"token-write-needs-no-origin", req{method: "POST", path: "/v1/test-write", body: `{}`, header: bearer(testToken)}, 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, eb := do(t, ts, c.r)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d (%+v)", resp.StatusCode, c.status, eb)
			}
		})
	}
	resp, _ = do(t, ts, req{method: "POST", path: "/logout", cookie: ck, header: map[string]string{"Origin": "http://" + host}})
	if resp.StatusCode != 200 {
		t.Fatalf("logout: %d", resp.StatusCode)
	}
	for _, c := range resp.Cookies() {
		if c.Name == CookieName && c.MaxAge >= 0 {
			t.Fatal("logout did not clear the cookie")
		}
	}
	if strings.Contains(logs.String(), testToken) {
		t.Fatal("the admin token appeared in the logs")
	}
}

// login returns a fresh UI session cookie.
func login(t *testing.T, ts *httptest.Server) *http.Cookie {
	t.Helper()
	resp, eb := do(t, ts, req{method: "POST", path: "/login", body: `{"token":"` + testToken + `"}`})
	if resp.StatusCode != 200 {
		t.Fatalf("login: %d %+v", resp.StatusCode, eb)
	}
	for _, c := range resp.Cookies() {
		if c.Name == CookieName {
			return c
		}
	}
	t.Fatal("no session cookie")
	return nil
}

// TestLogoutRevokesTheCookieOnTheServer is the attack where a copy of the cookie kept working
// after /logout, and /logout needed neither auth nor Origin: a logout now needs the cookie and
// an allowed Origin, ends that session on the server (the old cookie is refused afterwards,
// also by a server restarted on the same store), and leaves other sessions open.
func TestLogoutRevokesTheCookieOnTheServer(t *testing.T) {
	st, err := badgerstore.Open(context.Background(), badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	start := func() *httptest.Server {
		ts := httptest.NewServer(serverFor(t, Config{Token: testToken}, Deps{Store: st}).Handler())
		t.Cleanup(ts.Close)
		return ts
	}
	ts := start()
	host := strings.TrimPrefix(ts.URL, "http://")
	origin := map[string]string{"Origin": "http://" + host}
	ck, other := login(t, ts), login(t, ts)

	refusals := []struct {
		name   string
		r      req
		status int
	}{
		{"no cookie", req{method: "POST", path: "/logout", header: origin}, 401},
		{"the bearer token is not a UI session", req{method: "POST", path: "/logout", header: map[string]string{"Origin": "http://" + host, "Authorization": "Bearer " + testToken}}, 401},
		{"no Origin", req{method: "POST", path: "/logout", cookie: ck}, 403},
		{"foreign Origin", req{method: "POST", path: "/logout", cookie: ck, header: map[string]string{"Origin": "http://evil.example"}}, 403},
		{"Origin null", req{method: "POST", path: "/logout", cookie: ck, header: map[string]string{"Origin": "null"}}, 403},
		{"forged cookie", req{method: "POST", path: "/logout", cookie: &http.Cookie{Name: CookieName, Value: "v2." + strings.Repeat("0", 32) + ".99999999999.sig"}, header: origin}, 401},
	}
	for _, c := range refusals {
		t.Run(c.name, func(t *testing.T) {
			resp, eb := do(t, ts, c.r)
			if resp.StatusCode != c.status || eb.Error.Code == "" {
				t.Fatalf("%d %+v, want %d", resp.StatusCode, eb, c.status)
			}
			if resp, _ := do(t, ts, req{path: "/v1/info", cookie: ck}); resp.StatusCode != 200 {
				t.Fatalf("a refused logout ended the session: %d", resp.StatusCode)
			}
		})
	}

	if resp, eb := do(t, ts, req{method: "POST", path: "/logout", cookie: ck, header: origin}); resp.StatusCode != 200 {
		t.Fatalf("logout: %d %+v", resp.StatusCode, eb)
	}
	// The old cookie, replayed as is, is refused for reads, writes and a second logout.
	for _, r := range []req{
		{path: "/v1/info", cookie: ck},
		{method: "POST", path: "/v1/info", cookie: ck, header: origin},
		{method: "POST", path: "/logout", cookie: ck, header: origin},
	} {
		if resp, eb := do(t, ts, r); resp.StatusCode != 401 || eb.Error.Code != "unauthorized" {
			t.Fatalf("%s %s with the logged-out cookie: %d %+v", r.method, r.path, resp.StatusCode, eb)
		}
	}
	// Other sessions stay open; after a restart on the same store the logout still holds.
	if resp, _ := do(t, ts, req{path: "/v1/info", cookie: other}); resp.StatusCode != 200 {
		t.Fatalf("another session was ended: %d", resp.StatusCode)
	}
	ts2 := start()
	if resp, _ := do(t, ts2, req{path: "/v1/info", cookie: ck}); resp.StatusCode != 401 {
		t.Fatalf("the logged-out cookie works after a restart: %d", resp.StatusCode)
	}
	if resp, _ := do(t, ts2, req{path: "/v1/info", cookie: other}); resp.StatusCode != 200 {
		t.Fatalf("an open session did not survive the restart: %d", resp.StatusCode)
	}
}

func TestMetricsCountRequests(t *testing.T) {
	_, ts, _ := newTestServer(t)
	do(t, ts, req{path: "/healthz"})
	resp, err := http.DefaultClient.Do(func() *http.Request {
		r, _ := http.NewRequest("GET", ts.URL+"/metrics", nil)
		r.Header.Set("Authorization", "Bearer "+testToken)
		return r
	}())
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(raw, []byte(`pixie_http_requests_total{method="GET",route="/healthz",status="200"} 1`)) {
		t.Fatalf("metrics lack the healthz count:\n%s", raw)
	}
	if bytes.Contains(raw, []byte(testToken)) {
		t.Fatal("token in metrics")
	}
}

// serverFor is New over deps, failing t on an error.
func serverFor(t testing.TB, cfg Config, deps Deps) *Server {
	t.Helper()
	cfg.Deps = deps
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCloseEndsLongLivedResponses: Close closes Done (what SSE responses end on), and a second
// Close does nothing more.
func TestCloseEndsLongLivedResponses(t *testing.T) {
	s := serverFor(t, Config{Token: testToken}, Deps{})
	select {
	case <-s.Done():
		t.Fatal("Done is closed before Close")
	default:
	}
	for range 2 {
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-s.Done():
		default:
			t.Fatal("Done is not closed after Close")
		}
	}
}

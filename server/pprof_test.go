package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/store/badgerstore"
)

// TestPprof: the profiles are off unless server.pprof is set; on, the admin token reaches them
// and a Studio login does not.
func TestPprof(t *testing.T) {
	_, off, _ := newTestServer(t)
	if resp, eb := do(t, off, req{path: "/debug/pprof/heap", header: bearer(testToken)}); resp.StatusCode != 404 || eb.Error.Code != "not_found" {
		t.Errorf("profiles off: %d %+v", resp.StatusCode, eb)
	}

	st, err := badgerstore.Open(context.Background(), badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s := serverFor(t, Config{Token: testToken, Pprof: true}, Deps{Store: st})
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	ck := login(t, ts)
	for _, c := range []struct {
		name   string
		r      req
		status int
		want   string
	}{
		{"no auth", req{path: "/debug/pprof/heap"}, 401, ""},
		{"wrong token", req{path: "/debug/pprof/heap", header: bearer("nope")}, 401, ""},
		{"studio login", req{path: "/debug/pprof/heap", cookie: ck}, 403, ""},
		{"index", req{path: "/debug/pprof/", header: bearer(testToken)}, 200, "heap"},
		{"heap as text", req{path: "/debug/pprof/heap?debug=1", header: bearer(testToken)}, 200, "heap profile"},
		{"goroutines", req{path: "/debug/pprof/goroutine?debug=1", header: bearer(testToken)}, 200, "goroutine profile"},
		{"unknown profile", req{path: "/debug/pprof/nosuch", header: bearer(testToken)}, 404, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			hr, _ := http.NewRequest(http.MethodGet, ts.URL+c.r.path, nil)
			for k, v := range c.r.header {
				hr.Header.Set(k, v)
			}
			if c.r.cookie != nil {
				hr.AddCookie(c.r.cookie)
			}
			resp, err := http.DefaultClient.Do(hr)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status || !strings.Contains(string(body), c.want) {
				t.Errorf("%d %.200s, want %d with %q", resp.StatusCode, body, c.status, c.want)
			}
			if c.status >= 400 && !strings.Contains(string(body), `"error"`) {
				t.Errorf("a refusal not in the error shape: %s", body)
			}
		})
	}
}

package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/pixie-dev/pixie/internal/helper"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
)

// fakeReplicas knows one other replica.
type fakeReplicas struct {
	self, other, otherURL string
}

func (f fakeReplicas) Self() string { return f.self }
func (f fakeReplicas) URL(_ context.Context, id string) (string, error) {
	if id == f.other && f.otherURL != "" {
		return f.otherURL, nil
	}
	return "", errors.New("not live")
}

// A helper call carrying another replica's token goes to that replica, with the client's Host
// and body, and its answer comes back as is; a token of a replica that is gone is refused; a
// call forwarded once is never forwarded again.
func TestHelperCallsAreForwardedToTheIssuingReplica(t *testing.T) {
	var mu sync.Mutex
	var got []*http.Request
	var bodies []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, bodies = append(got, r), append(bodies, string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"code":"rate_limited","message":"from the other replica"}}`)
	}))
	defer other.Close()
	st, err := badgerstore.Open(context.Background(), badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc, err := helper.New(t.Context(), helper.Config{Instance: st.Instance()})
	if err != nil {
		t.Fatal(err)
	}
	rs := fakeReplicas{self: svc.Instance(), other: "00ff00ff00ff00ff", otherURL: other.URL}
	s := serverFor(t, Config{Token: testToken, Logger: slog.New(slog.DiscardHandler)}, Deps{Store: st, Helpers: svc, Replicas: rs})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	post := func(tok string, forwarded bool) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/helper/ask", strings.NewReader(`{"instruction":"hi"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		if forwarded {
			req.Header.Set(forwardedHeader, "someone")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tok := "pxr_00ff00ff00ff00ff.abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ"
	code, body := post(tok, false)
	if code != http.StatusTooManyRequests || !strings.Contains(body, "from the other replica") {
		t.Fatalf("forwarded call answered %d %s", code, body)
	}
	mu.Lock()
	if len(got) != 1 || got[0].Host != strings.TrimPrefix(ts.URL, "http://") || got[0].Header.Get("Authorization") != "Bearer "+tok ||
		bodies[0] != `{"instruction":"hi"}` || got[0].Header.Get(forwardedHeader) != svc.Instance() {
		t.Fatalf("the other replica got %+v %q", got, bodies)
	}
	mu.Unlock()
	// Forwarded already: answered here (an unknown token), not sent on.
	if code, _ := post(tok, true); code != http.StatusUnauthorized {
		t.Fatalf("a forwarded call: %d", code)
	}
	// The issuing replica is gone.
	if code, _ := post("pxr_0123456789abcdef.abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ", false); code != http.StatusUnauthorized {
		t.Fatalf("a dead replica's token: %d", code)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("%d calls reached the other replica", len(got))
	}
}

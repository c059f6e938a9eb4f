package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/app"
	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/store"
)

// bodylessWrites are the write routes that read no body at all, so a body of any shape is
// ignored by design; each says what it does instead. Every other PUT, POST and PATCH route must
// refuse a body that is not a JSON object.
var bodylessWrites = map[string]string{
	"POST /v1/gates/scripts/refresh":             "re-lists the script folder",
	"POST /v1/pet/projection/rebuild":            "rebuilds the Skill projection",
	"POST /v1/pet/invocations/:id/retry":         "retries one invocation",
	"POST /v1/pet/tasks/:id/archive":             "archives one task",
	"POST /v1/channel/lark/pairing":              "mints a pairing code",
	"POST /v1/channel/lark/sessions/:id/archive": "archives one session",
}

// rawBodyWrites read a body that is not a JSON object by contract: a WASM module, or a body
// authenticated before it is decoded (Lark's signed events, run-token helper calls). They must
// still refuse a null or a list, but with their own status (401 for an unsigned event).
var rawBodyWrites = map[string]string{
	"POST /v1/modules":             "the module's bytes (application/wasm or multipart)",
	"POST /v1/channel/lark/events": "Lark's signed envelope: anything unsigned is 401 before decoding",
	"POST /v1/helper/ask":          "run-token auth comes first (401 for the admin token)",
	"POST /v1/helper/judge":        "run-token auth comes first (401 for the admin token)",
}

// forwardedPrefix holds the model-API proxy routes (server/proxy.go): transparent by contract,
// they forward any body to the configured upstream, which judges it (internal/proxy's tests
// check that a client error is never turned into a success).
const forwardedPrefix = "/v1/proxy/"

// TestEveryWriteRouteRefusesBodiesThatAreNotObjects walks every PUT, POST and PATCH route of the
// fully wired server (the one `pixie serve` runs) and sends each a null, a list, a string, a
// number, a boolean and an empty body where an object is expected. Each must answer a 4xx in
// the JSON error shape, and the store must hold exactly what it held before, byte for byte.
func TestEveryWriteRouteRefusesBodiesThatAreNotObjects(t *testing.T) {
	ctx := context.Background()
	home := filepath.Join(t.TempDir(), "home")
	cfg, err := config.Load(home, func(string) string { return "" }, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(ctx, app.Config{Config: cfg, Version: version, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Close(ctx) }()
	st, srv := a.Store(), a.Server()
	token, _ := a.Token()
	h := srv.Handler()
	send := func(method, path, body string) (int, []byte) {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Host = "127.0.0.1:7777"
		r.Header.Set("Authorization", "Bearer "+token)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, w.Body.Bytes()
	}
	// Some saved state for the bodies to destroy: gates and a preset, hints, a session switch.
	for _, s := range []struct{ method, path, body string }{
		{"PUT", "/v1/gates", `{"gates":[{"name":"fmt","point":"user-message","task":"Check {{target}}"}],"presets":[{"name":"dev","gates":[{"gate":"fmt"}]}]}`},
		{"POST", "/v1/hints", `{"text":"keep me","sessionId":"s1"}`},
		{"POST", "/v1/hints", `{"text":"global"}`},
		{"PUT", "/v1/gates/sessions/s1/switches/fmt", `{"on":false}`},
	} {
		if code, out := send(s.method, s.path, s.body); code != 200 {
			t.Fatalf("seed %s %s: %d %s", s.method, s.path, code, out)
		}
	}
	before := dumpStore(t, st)

	mounted := map[string]bool{}
	for _, r := range srv.Routes() {
		mounted[r] = true
	}
	for _, list := range []map[string]string{bodylessWrites, rawBodyWrites} {
		for r := range list {
			if !mounted[r] {
				t.Errorf("%s is listed here but not mounted", r)
			}
		}
	}
	param := regexp.MustCompile(`:[a-z]+`)
	bodies := map[string]string{"null": "null", "list": `[{"text":"x"}]`, "string": `"x"`, "number": "1",
		"boolean": "false", "empty": ""}
	swept := 0
	for _, route := range srv.Routes() {
		method, path, _ := strings.Cut(route, " ")
		if method != "PUT" && method != "POST" && method != "PATCH" {
			continue
		}
		if _, ok := bodylessWrites[route]; ok || strings.HasPrefix(path, forwardedPrefix) {
			continue
		}
		_, raw := rawBodyWrites[route]
		url := param.ReplaceAllString(path, "x1")
		if strings.Contains(url, "*") {
			url = strings.ReplaceAll(url, "*", "x1")
		}
		swept++
		for what, body := range bodies {
			if what == "empty" && optionalBody(route) {
				continue // an optional body left out is the route's default request
			}
			code, out := send(method, url, body)
			if raw {
				if code < 400 || code == 500 || !json.Valid(out) {
					t.Errorf("%s with a %s body: %d %s, want a refusal", route, what, code, out)
				}
				continue
			}
			if code == http.StatusServiceUnavailable && bytes.Contains(out, []byte(`"unavailable"`)) {
				continue // the route's service is off here (Lark): nothing is read or written
			}
			if code < 400 || code >= 500 {
				t.Errorf("%s with a %s body: %d %s, want a 4xx refusal", route, what, code, out)
				continue
			}
			var eb struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if err := json.Unmarshal(out, &eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
				t.Errorf("%s with a %s body: %d is not in the error shape: %s", route, what, code, out)
			}
			if !raw && code == http.StatusBadRequest && what != "empty" && !strings.Contains(eb.Error.Message, "JSON object") {
				t.Errorf("%s with a %s body: %q does not say an object was expected", route, what, eb.Error.Message)
			}
		}
	}
	if swept < 40 {
		t.Fatalf("only %d write routes swept; the route listing is broken", swept)
	}
	after := dumpStore(t, st)
	for k, v := range before {
		if w, ok := after[k]; !ok {
			t.Errorf("%s was deleted", k)
		} else if !bytes.Equal(v, w) {
			t.Errorf("%s changed:\n%s\n%s", k, v, w)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s was written", k)
		}
	}
	t.Logf("%d write routes swept with %d bodies each; %d keys unchanged", swept, len(bodies), len(before))
}

// optionalBody lists the routes whose body may be left out.
func optionalBody(route string) bool {
	switch route {
	case "POST /v1/hints/take", "DELETE /v1/hints", "POST /v1/tools/hint_status", "POST /v1/settings/model/test":
		return true
	}
	return false
}

// dumpStore reads every key and value of the store.
func dumpStore(t *testing.T, st *store.Store) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := st.View(context.Background(), func(tx *store.Tx) error {
		return tx.ScanRaw("", store.ScanOptions{}, func(k string, v []byte) error {
			out[k] = append([]byte(nil), v...)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

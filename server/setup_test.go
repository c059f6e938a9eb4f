package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// get sends a GET with the given Authorization header (empty: none) and returns the status and
// the body.
func getWith(t *testing.T, url, auth string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// TestGateSetupRoute: GET /v1/gates/setup lists the presets hook calls asked for that do not
// exist (with their count and last call), whether the default preset exists, and the hook calls
// refused for want of a valid token (never the token they sent); it is behind the admin token
// like every /v1 route, and a created preset leaves the list.
func TestGateSetupRoute(t *testing.T) {
	e := newHookEnv(t) // presets p and empty; hooks.defaultPreset is empty
	stop := e.fixture(t, "stop", nil)
	setup := func() SetupReport {
		t.Helper()
		st, raw := getWith(t, e.ts.URL+"/v1/gates/setup", "Bearer "+testToken)
		var r SetupReport
		if st != http.StatusOK || json.Unmarshal(raw, &r) != nil {
			t.Fatalf("setup: %d %s", st, raw)
		}
		return r
	}
	r := setup()
	if r.MissingPresets == nil || len(r.MissingPresets) != 0 || r.DefaultPreset == nil || *r.DefaultPreset != (DefaultPreset{Name: "empty", Exists: true}) ||
		r.RefusedHookCalls == nil || r.RefusedHookCalls.NoToken != 0 || r.RefusedHookCalls.WrongToken != 0 || !r.RefusedHookCalls.LastAt.IsZero() || r.RefusedHookCalls.Since.IsZero() {
		t.Fatalf("a fresh server: %+v", r)
	}

	before := time.Now().UTC().Add(-time.Second)
	for _, q := range []string{"?preset=typo", "?preset=typo&host=codex"} {
		if st, body := e.post(t, q, stop, nil); st != 200 || !strings.Contains(body, `the preset \"typo\" does not exist`) {
			t.Fatalf("%s: %d %s", q, st, body)
		}
	}
	e.post(t, "?preset=p", stop, nil)
	const secret = "Bearer not-the-admin-token-7f3a"
	for _, hdr := range []map[string]string{{"Authorization": ""}, {"Authorization": secret}, {"Authorization": secret, AdapterHeader: "1"}} {
		e.post(t, "?preset=typo", stop, hdr)
	}
	st, raw := getWith(t, e.ts.URL+"/v1/gates/setup", "Bearer "+testToken)
	if st != 200 || strings.Contains(string(raw), "not-the-admin-token") {
		t.Fatalf("setup: %d %s", st, raw)
	}
	r = setup()
	if len(r.MissingPresets) != 1 {
		t.Fatalf("missing presets: %+v", r.MissingPresets)
	}
	m := r.MissingPresets[0]
	if m.Name != "typo" || m.Count != 2 || m.LastHost != "codex" || m.LastPoint != "turn-end" || m.LastSession == "" || m.LastSeen.Before(before) || m.FirstSeen.After(m.LastSeen) {
		t.Errorf("typo: %+v", m)
	}
	if rc := r.RefusedHookCalls; rc.NoToken != 1 || rc.WrongToken != 2 || rc.LastAt.Before(before) {
		t.Errorf("refused hook calls: %+v", rc)
	}

	// Creating the preset clears it; deleting the default preset shows, and hook calls that
	// name no preset are listed under its name.
	for _, c := range []struct{ method, path, body string }{
		{http.MethodPut, "/v1/gates/presets/typo", `{"gates":[]}`},
		{http.MethodDelete, "/v1/gates/presets/empty", ""},
	} {
		req, _ := http.NewRequest(c.method, e.ts.URL+c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s %s: %v %v", c.method, c.path, resp, err)
		}
		resp.Body.Close()
	}
	e.post(t, "", stop, nil)
	r = setup()
	if len(r.MissingPresets) != 1 || r.MissingPresets[0].Name != "empty" || *r.DefaultPreset != (DefaultPreset{Name: "empty", Exists: false}) {
		t.Fatalf("after creating typo and deleting empty: %+v %+v", r.MissingPresets, r.DefaultPreset)
	}

	// Behind the admin token, in the JSON error shape.
	for _, auth := range []string{"", "Bearer nope", "Basic abc"} {
		st, raw := getWith(t, e.ts.URL+"/v1/gates/setup", auth)
		var eb ErrorBody
		if st != http.StatusUnauthorized || json.Unmarshal(raw, &eb) != nil || eb.Error.Code != "unauthorized" || eb.Error.Message == "" {
			t.Errorf("auth %q: %d %s", auth, st, raw)
		}
	}
	// A write method is not a route (a 4xx in the error shape).
	req, _ := http.NewRequest(http.MethodPost, e.ts.URL+"/v1/gates/setup", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	var eb ErrorBody
	if resp.StatusCode/100 != 4 || json.Unmarshal(raw, &eb) != nil || eb.Error.Code == "" {
		t.Errorf("POST: %d %s", resp.StatusCode, raw)
	}
}

// TestGateSetupRouteWithoutHooks: without the hook adapter the report has the missing presets
// only (evaluations through /v1/gates/evaluate count too).
func TestGateSetupRouteWithoutHooks(t *testing.T) {
	f := newGateFixture(t, `{"verdict":"pass"}`)
	r := f.session("user-message", "x")
	r.Session.Preset = "nope"
	if res := f.evaluate(t, r); res.Skipped != "no-preset" {
		t.Fatalf("evaluate: %+v", res)
	}
	var raw map[string]json.RawMessage
	if st, eb := f.call(t, http.MethodGet, "/v1/gates/setup", nil, &raw); st != 200 {
		t.Fatalf("setup: %d %+v", st, eb)
	}
	if _, ok := raw["defaultPreset"]; ok || len(raw) != 1 || !strings.Contains(string(raw["missingPresets"]), `"name":"nope"`) {
		t.Fatalf("setup without hooks: %s", raw)
	}
}

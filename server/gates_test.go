package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/helper"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/bash"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// gateFixture is a server with a gate service over a real store, the real bash executor and
// the real OpenAI provider talking to a test model server.
type gateFixture struct {
	st      *store.Store
	ts      *httptest.Server
	svc     *gate.Service
	scripts string
	cwd     string
	modelN  *atomic.Int64
	logs    *bytes.Buffer
}

// openAIServer speaks the chat.completions wire format; every answer is answerText.
func openAIServer(t testing.TB, answerText string, n *atomic.Int64) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		n.Add(1)
		content, _ := json.Marshal(answerText)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1717000000,"model":"m",
"choices":[{"index":0,"finish_reason":"stop","logprobs":null,"message":{"role":"assistant","content":%s}}],
"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`, content)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func newGateFixture(t testing.TB, answerText string) *gateFixture {
	t.Helper()
	st, err := badgerstore.Open(context.Background(), badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &gateFixture{st: st, modelN: &atomic.Int64{}, logs: &bytes.Buffer{}, cwd: t.TempDir()}
	m, err := model.New(model.Config{Provider: "openai", BaseURL: openAIServer(t, answerText, f.modelN), Model: "m", APIKey: "sk-model-secret"})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := bash.New(context.Background(), bash.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close(context.Background()) })
	home := t.TempDir()
	f.scripts = filepath.Join(home, "commands")
	if err := os.Mkdir(f.scripts, 0o755); err != nil {
		t.Fatal(err)
	}
	hs, err := helper.New(t.Context(), helper.Config{Instance: st.Instance(), Model: m})
	if err != nil {
		t.Fatal(err)
	}
	f.svc, err = gate.New(t.Context(), gate.Config{Store: st, Exec: runtime.Dispatcher{runtime.KindScript: ex}, Model: m, Helpers: hs, Home: home})
	if err != nil {
		t.Fatal(err)
	}
	s := serverFor(t, Config{Token: testToken, Logger: slog.New(slog.NewJSONHandler(f.logs, nil))}, Deps{Store: st, Gates: f.svc, Helpers: hs})
	f.ts = httptest.NewServer(s.Handler())
	t.Cleanup(f.ts.Close)
	hs.SetURL(f.ts.URL)
	return f
}

func (f *gateFixture) script(t testing.TB, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(f.scripts, name), []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
}

// call sends an admin request and decodes a 2xx JSON answer into out.
func (f *gateFixture) call(t testing.TB, method, path string, in, out any) (int, ErrorBody) {
	t.Helper()
	body := ""
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		body = string(raw)
	}
	hr, err := http.NewRequest(method, f.ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Authorization", "Bearer "+testToken)
	if in != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if path == "/v1/gates/evaluate" && resp.StatusCode == http.StatusOK {
		checkSentWhole(t, resp, raw)
	}
	var eb ErrorBody
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(raw, &eb); err != nil || eb.Error.Code == "" {
			t.Fatalf("%s %s: %d with a body not in the error shape: %s", method, path, resp.StatusCode, raw)
		}
		return resp.StatusCode, eb
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	return resp.StatusCode, eb
}

func (f *gateFixture) evaluate(t testing.TB, r gate.EvalRequest) gate.Result {
	t.Helper()
	var res gate.Result
	if st, eb := f.call(t, http.MethodPost, "/v1/gates/evaluate", r, &res); st != http.StatusOK {
		t.Fatalf("evaluate: %d %+v", st, eb)
	}
	return res
}

func (f *gateFixture) session(point, target string) gate.EvalRequest {
	return gate.EvalRequest{Point: point, Session: gate.Session{ID: "s1", Preset: "dev", Cwd: f.cwd, Policy: runtime.PolicyFull},
		Turn: 1, Target: target}
}

func TestGateDefinitionRoutes(t *testing.T) {
	f := newGateFixture(t, `{"verdict":"pass"}`)
	// A refused save lists every problem by field, and writes nothing.
	bad := map[string]any{
		"gates": []map[string]any{
			{"name": "a", "point": "user-message", "task": "{{hooks.nope.text}}"},
			{"name": "b", "point": "user-message", "task": ""},
			{"name": "c", "point": "user-message", "task": "x", "rule": map[string]any{"kind": "script", "name": "missing.sh"}},
		},
		"presets": []map[string]any{{"name": "dev", "gates": []map[string]any{{"gate": "a"}, {"gate": "c"}}}},
	}
	st, eb := f.call(t, http.MethodPut, "/v1/gates", bad, nil)
	if st != http.StatusBadRequest || eb.Error.Code != "invalid" {
		t.Fatalf("refusal: %d %+v", st, eb)
	}
	raw, _ := json.Marshal(eb.Error.Details)
	var ps []gate.Problem
	if err := json.Unmarshal(raw, &ps); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, p := range ps {
		got[p.Field] = true
	}
	for _, want := range []string{"gates[0].task", "gates[1].task", "gates[2].rule.name", "presets[0].gates[1].enabled"} {
		if !got[want] {
			t.Errorf("no problem at %s: %+v", want, ps)
		}
	}
	var set gate.Set
	f.call(t, http.MethodGet, "/v1/gates", nil, &set)
	if len(set.Gates) != 0 || set.Revision != 0 {
		t.Errorf("a refused save wrote: %+v", set)
	}

	// Templates are served.
	var tpl struct{ Templates []gate.Template }
	f.call(t, http.MethodGet, "/v1/gates/templates", nil, &tpl)
	if len(tpl.Templates) != 6 || tpl.Templates[5].ID != "blank" {
		t.Errorf("templates: %d", len(tpl.Templates))
	}

	// One gate at a time, then attachments.
	g := tpl.Templates[0].Gate
	if st, eb := f.call(t, http.MethodPut, "/v1/gates/definitions/"+g.Name, g, &set); st != 200 {
		t.Fatalf("save gate: %d %+v", st, eb)
	}
	if st, eb := f.call(t, http.MethodPut, "/v1/gates/definitions/other", g, nil); st != 400 {
		t.Errorf("name mismatch: %d %+v", st, eb)
	}
	if st, _ := f.call(t, http.MethodPut, "/v1/gates/presets/dev/gates/"+g.Name, map[string]bool{"enabled": true}, &set); st != 200 {
		t.Fatal(st)
	}
	if st, _ := f.call(t, http.MethodPut, "/v1/gates/presets/ops/gates/"+g.Name, map[string]bool{"enabled": false}, &set); st != 200 {
		t.Fatal(st)
	}
	if len(set.Presets) != 2 || !set.Presets[0].Gates[0].Enabled || set.Presets[1].Gates[0].Enabled {
		t.Errorf("presets: %+v", set.Presets)
	}
	var one gate.Gate
	if st, _ := f.call(t, http.MethodGet, "/v1/gates/definitions/"+g.Name, nil, &one); st != 200 || one.Task != g.Task {
		t.Errorf("get gate: %d %+v", st, one)
	}
	if st, _ := f.call(t, http.MethodGet, "/v1/gates/definitions/ghost", nil, nil); st != 404 {
		t.Errorf("unknown gate: %d", st)
	}
	if st, _ := f.call(t, http.MethodDelete, "/v1/gates/presets/ops/gates/"+g.Name, nil, &set); st != 200 || len(set.Presets[1].Gates) != 0 {
		t.Errorf("detach: %d %+v", st, set.Presets)
	}
	if st, _ := f.call(t, http.MethodDelete, "/v1/gates/definitions/"+g.Name, nil, &set); st != 200 || len(set.Gates) != 0 {
		t.Errorf("delete: %d %+v", st, set)
	}
}

func TestGateScriptFolderRoutes(t *testing.T) {
	f := newGateFixture(t, `{}`)
	f.script(t, "a.sh", "#!/bin/bash\n")
	var l gate.ScriptListing
	f.call(t, http.MethodGet, "/v1/gates/scripts", nil, &l)
	if l.Folder != f.scripts || len(l.Scripts) != 1 {
		t.Fatalf("listing: %+v", l)
	}
	f.script(t, "b.sh", "#!/bin/bash\n")
	f.call(t, http.MethodPost, "/v1/gates/scripts/refresh", nil, &l)
	if len(l.Scripts) != 2 {
		t.Errorf("refresh: %+v", l)
	}
	other := t.TempDir()
	f.call(t, http.MethodPut, "/v1/gates/scripts", map[string]string{"folder": other}, &l)
	if l.Folder != other || !l.Custom || len(l.Scripts) != 0 {
		t.Errorf("set folder: %+v", l)
	}
	if st, eb := f.call(t, http.MethodPut, "/v1/gates/scripts", map[string]string{"folder": "relative"}, nil); st != 400 {
		t.Errorf("relative folder: %d %+v", st, eb)
	}
	f.call(t, http.MethodPut, "/v1/gates/scripts", map[string]string{"folder": ""}, &l)
	if l.Folder != f.scripts || l.Custom {
		t.Errorf("restore default: %+v", l)
	}
}

func TestGateEvaluateRecordsSwitches(t *testing.T) {
	f := newGateFixture(t, `{"verdict":"stop","reason":"Add a title line.","note":"[Format] missing title"}`)
	set := gate.Set{Gates: []gate.Gate{{Name: "fmt", Enabled: true, Point: "user-message", Task: "Check the format.",
		Advanced: gate.Options{ShowInChat: true, OnError: "continue", TimeoutSeconds: 60, RedoLimit: 1}}},
		Presets: []gate.Preset{{Name: "dev", Gates: []gate.Attachment{{Gate: "fmt", Enabled: true}}}}}
	if st, eb := f.call(t, http.MethodPut, "/v1/gates", set, nil); st != 200 {
		t.Fatalf("save: %d %+v", st, eb)
	}
	res := f.evaluate(t, f.session("user-message", "do it"))
	if res.Action != gate.ActionRejected || res.Reason != "Add a title line." || res.ConcludedBy != gate.ByPixie || res.RunID == "" {
		t.Fatalf("evaluate: %+v", res)
	}
	var page gate.RecordPage
	f.call(t, http.MethodGet, "/v1/gates/sessions/s1/records?limit=10", nil, &page)
	if len(page.Records) != 1 || page.Records[0].ID != res.RunID {
		t.Errorf("records: %+v", page)
	}
	var rec gate.Record
	f.call(t, http.MethodGet, "/v1/gates/records/"+res.RunID, nil, &rec)
	if rec.Original != "do it" || rec.Output.Reason != "Add a title line." || rec.Usage.InputTokens != 7 {
		t.Errorf("record: %+v", rec)
	}
	if st, _ := f.call(t, http.MethodGet, "/v1/gates/sessions/s1/records?limit=x", nil, nil); st != 400 {
		t.Errorf("bad limit: %d", st)
	}
	// A rejected instruction has no chat block.
	var notes struct{ Notes []gate.ChatNote }
	f.call(t, http.MethodGet, "/v1/gates/sessions/s1/notes", nil, &notes)
	if len(notes.Notes) != 0 {
		t.Errorf("notes for a rejected instruction: %+v", notes)
	}
	// Per-session switch: off → nothing runs, no record, no model call.
	var sg gate.SessionGates
	f.call(t, http.MethodPut, "/v1/gates/sessions/s1/switches/fmt", map[string]bool{"on": false}, &sg)
	if len(sg.Gates) != 1 || sg.Gates[0].On {
		t.Errorf("switches: %+v", sg)
	}
	before := f.modelN.Load()
	res = f.evaluate(t, f.session("user-message", "again"))
	if res.Skipped != gate.SkipSwitchedOff || f.modelN.Load() != before {
		t.Errorf("switched off: %+v", res)
	}
	f.call(t, http.MethodGet, "/v1/gates/sessions/s1/switches", nil, &sg)
	if sg.Preset != "dev" || len(sg.Gates) != 1 || sg.Gates[0].On {
		t.Errorf("listing: %+v", sg)
	}
	// Bad requests are coded.
	if st, eb := f.call(t, http.MethodPost, "/v1/gates/evaluate", map[string]any{"point": "x"}, nil); st != 400 || eb.Error.Code != "invalid" {
		t.Errorf("bad evaluate: %d %+v", st, eb)
	}
}

func TestGateTryRecordsNothing(t *testing.T) {
	f := newGateFixture(t, `{"replace":"Better text."}`)
	f.script(t, "boom.sh", "#!/bin/bash\ntouch ran-the-script\nexit 3\n")
	g := gate.Gate{Name: "draft", Enabled: true, Point: "user-message", Task: "Rewrite {{hooks.boom.text}}",
		Rule:     &gate.Rule{Kind: runtime.KindScript, Name: "boom.sh"},
		Advanced: gate.Options{ShowInChat: true, OnError: "stop", TimeoutSeconds: 60, RedoLimit: 1}}
	var res gate.TryResult
	if st, eb := f.call(t, http.MethodPost, "/v1/gates/try", gate.TryRequest{Gate: g, Sample: gate.Sample{Target: "bad text"}}, &res); st != 200 {
		t.Fatalf("try: %d %+v", st, eb)
	}
	if res.Action != gate.ActionReplaced || res.Text != "Better text." || !res.ScriptNotRun || res.RunID != "" || f.modelN.Load() != 1 {
		t.Errorf("try: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(f.cwd, "ran-the-script")); err == nil {
		t.Error("the trial ran the script")
	}
	var page gate.RecordPage
	f.call(t, http.MethodGet, "/v1/gates/sessions/trial/records", nil, &page)
	if len(page.Records) != 0 {
		t.Errorf("the trial was recorded: %+v", page)
	}
	g.Task = ""
	if st, _ := f.call(t, http.MethodPost, "/v1/gates/try", gate.TryRequest{Gate: g}, nil); st != 400 {
		t.Errorf("a draft without a task: %d", st)
	}
}

// helperCurl is a script fragment: helper_call <route> <body file> prints the HTTP status.
const helperCurl = `helper_call() {
  curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $PIXIE_TOKEN" \
    -H 'Content-Type: application/json' --data-binary "@$2" "$PIXIE_URL/v1/helper/$1"
}
`

// TestHelperLimitsOverHTTP checks the helper's limits at their edges, over HTTP from a real
// script run: the 20th call succeeds and the 21st gets 429; 256 KB succeeds and one byte more
// gets 413; the token after its run gets 401; the run token reaches no admin route, and the
// admin token does not reach the helper.
func TestHelperLimitsOverHTTP(t *testing.T) {
	f := newGateFixture(t, "an answer")
	body := func(size int) string {
		prefix, suffix := `{"instruction":"x","input":"`, `"}`
		return prefix + strings.Repeat("a", size-len(prefix)-len(suffix)) + suffix
	}
	for name, content := range map[string]string{
		"small.json": `{"instruction":"Say hi.","useTarget":true}`,
		"max.json":   body(abi.MaxHelperRequestSize),
		"over.json":  body(abi.MaxHelperRequestSize + 1),
		"judge.json": `{"state":"x","questions":{"q":{"type":"noul","instructions":"Is it?","criteria":{}}}}`,
	} {
		if err := os.WriteFile(filepath.Join(f.cwd, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f.script(t, "calls.sh", "#!/bin/bash\n"+helperCurl+`out=""
for i in $(seq 1 21); do out="$out $(helper_call ask small.json)"; done
printf '{"note":"%s"}' "${out# }"; exit 11
`)
	f.script(t, "sizes.sh", "#!/bin/bash\n"+helperCurl+`a=$(helper_call ask max.json); b=$(helper_call ask over.json)
c=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $PIXIE_TOKEN" "$PIXIE_URL/v1/gates")
d=$(helper_call judge judge.json)
printf '%s' "$PIXIE_TOKEN" > token.txt
printf '{"note":"%s %s %s %s"}' "$a" "$b" "$c" "$d"; exit 11
`)
	save := func(script string) {
		t.Helper()
		set := gate.Set{Gates: []gate.Gate{{Name: "h", Enabled: true, Point: "turn-end", Rule: &gate.Rule{Kind: runtime.KindScript, Name: script},
			Advanced: gate.Options{ShowInChat: true, OnError: "continue", TimeoutSeconds: 60, RedoLimit: 1}}},
			Presets: []gate.Preset{{Name: "dev", Gates: []gate.Attachment{{Gate: "h", Enabled: true}}}}}
		if st, eb := f.call(t, http.MethodPut, "/v1/gates", set, nil); st != 200 {
			t.Fatalf("save: %d %+v", st, eb)
		}
	}

	save("calls.sh")
	res := f.evaluate(t, f.session("turn-end", "the answer"))
	want := strings.TrimSpace(strings.Repeat("200 ", 20)) + " 429"
	if len(res.Notes) != 1 || res.Notes[0] != want {
		t.Fatalf("statuses %q, want %q (%+v)", res.Notes, want, res)
	}
	var rec gate.Record
	f.call(t, http.MethodGet, "/v1/gates/records/"+res.RunID, nil, &rec)
	if len(rec.HelperCalls) != 20 || rec.HelperCalls[0].Type != "ask" || rec.Usage.InputTokens != 20*7 || rec.Usage.OutputTokens != 20*3 {
		t.Errorf("helper calls %d, usage %+v", len(rec.HelperCalls), rec.Usage)
	}

	save("sizes.sh")
	res = f.evaluate(t, f.session("turn-end", "the answer"))
	// 256 KB: 200; one byte more: 413; run token on an admin route: 401; judge without an
	// engine: 503.
	if len(res.Notes) != 1 || res.Notes[0] != "200 413 401 503" {
		t.Fatalf("statuses %q (%+v)", res.Notes, res)
	}
	tok, err := os.ReadFile(filepath.Join(f.cwd, "token.txt"))
	if err != nil || !strings.HasPrefix(string(tok), "pxr_") {
		t.Fatalf("token: %q %v", tok, err)
	}
	for name, r := range map[string]req{
		"ended run":   {method: "POST", path: "/v1/helper/ask", body: `{"instruction":"x"}`, header: bearer(string(tok))},
		"admin token": {method: "POST", path: "/v1/helper/ask", body: `{"instruction":"x"}`, header: bearer(testToken)},
		"no token":    {method: "POST", path: "/v1/helper/judge", body: `{}`},
	} {
		resp, eb := do(t, f.ts, r)
		if resp.StatusCode != http.StatusUnauthorized || eb.Error.Code != "unauthorized" {
			t.Errorf("%s: %d %+v", name, resp.StatusCode, eb)
		}
	}
	for _, secret := range []string{string(tok), testToken, "sk-model-secret"} {
		if strings.Contains(f.logs.String(), secret) {
			t.Error("a secret reached the logs")
		}
	}
	f.call(t, http.MethodGet, "/v1/gates/records/"+res.RunID, nil, &rec)
	if raw, _ := json.Marshal(rec); strings.Contains(string(raw), string(tok)) {
		t.Error("the run token reached the record")
	}
}

// rawCall sends body as is (with the admin token and a JSON content type) and returns the
// status and the decoded error (a non-2xx answer must have the error shape).
func (f *gateFixture) rawCall(t testing.TB, method, path, body string) (int, ErrorBody) {
	t.Helper()
	hr, err := http.NewRequest(method, f.ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Authorization", "Bearer "+testToken)
	hr.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var eb ErrorBody
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(raw, &eb); err != nil || eb.Error.Code == "" {
			t.Fatalf("%s %s: %d with a body not in the error shape: %s", method, path, resp.StatusCode, raw)
		}
	}
	return resp.StatusCode, eb
}

// TestGateSavesRefuseBodiesThatAreNotTheirObject is the attack that once deleted every gate
// and preset (PUT /v1/gates with null) or detached every gate (PUT /v1/gates/presets/P with
// null), with its whole class: every body that is not the route's object, a whole-set save
// that leaves out its lists, and a misspelt key at any depth. Each is a 400 that names the
// problem, and the saved set (its revision included) does not change.
func TestGateSavesRefuseBodiesThatAreNotTheirObject(t *testing.T) {
	f := newGateFixture(t, `{"verdict":"pass"}`)
	seed := map[string]any{
		"gates": []map[string]any{
			{"name": "fmt", "point": "user-message", "task": "Check {{target}}"},
			{"name": "end", "point": "turn-end", "task": "Check {{target}}"},
		},
		"presets": []map[string]any{{"name": "dev", "gates": []map[string]any{{"gate": "fmt"}, {"gate": "end"}}}},
	}
	var before gate.Set
	if st, eb := f.call(t, http.MethodPut, "/v1/gates", seed, &before); st != 200 {
		t.Fatalf("seed: %d %+v", st, eb)
	}
	notObjects := map[string]string{"null": "null", "list": "[]", "string": `"gates"`, "number": "0",
		"boolean": "true", "empty": "", "blank": " \n\t", "cut short": `{"gates":[`, "two values": `{"gates":[],"presets":[]} null`}
	cases := []struct {
		name, method, path, body, inMessage string
	}{
		{"set: no lists", "PUT", "/v1/gates", `{}`, "gates: is required"},
		{"set: only a revision", "PUT", "/v1/gates", fmt.Sprintf(`{"revision":%d}`, before.Revision), "presets: is required"},
		{"set: null lists", "PUT", "/v1/gates", `{"gates":null,"presets":null}`, "is required"},
		{"set: misspelt nested key", "PUT", "/v1/gates",
			`{"gates":[{"name":"fmt","point":"user-message","task":"t","advanced":{"onErrror":"stop"}}],"presets":[]}`,
			"gates[0].advanced.onErrror"},
		{"set: misspelt task", "PUT", "/v1/gates", `{"gates":[{"name":"fmt","point":"user-message","taks":"t"}],"presets":[]}`, "gates[0].taks"},
		{"preset: no gates", "PUT", "/v1/gates/presets/dev", `{}`, "gates: is required"},
		{"preset: null gates", "PUT", "/v1/gates/presets/dev", `{"gates":null}`, "gates: is required"},
		{"preset: misspelt key", "PUT", "/v1/gates/presets/dev", `{"gates":[{"gate":"fmt","enabeld":false}]}`, "gates[0].enabeld"},
		{"gate: misspelt key", "PUT", "/v1/gates/definitions/fmt", `{"point":"user-message","task":"t","advanced":{"timeout":5}}`, "advanced.timeout"},
		{"try: misspelt key", "POST", "/v1/gates/try", `{"gate":{"point":"user-message","task":"t","advanced":{"onErrror":"stop"}},"sample":{"target":"x"}}`, "gate.advanced.onErrror"},
	}
	for what, body := range notObjects {
		for _, p := range []struct{ method, path string }{{"PUT", "/v1/gates"}, {"PUT", "/v1/gates/presets/dev"},
			{"PUT", "/v1/gates/definitions/fmt"}, {"PUT", "/v1/gates/presets/dev/gates/fmt"}, {"PUT", "/v1/gates/scripts"},
			{"POST", "/v1/gates/evaluate"}, {"POST", "/v1/gates/try"}, {"PUT", "/v1/gates/sessions/s1/switches/fmt"}} {
			cases = append(cases, struct{ name, method, path, body, inMessage string }{what + " " + p.path, p.method, p.path, body, ""})
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, eb := f.rawCall(t, tc.method, tc.path, tc.body)
			if st != http.StatusBadRequest || eb.Error.Code != "invalid" {
				t.Fatalf("%d %+v, want 400 invalid", st, eb)
			}
			if !strings.Contains(eb.Error.Message, tc.inMessage) {
				t.Fatalf("message %q does not name %q", eb.Error.Message, tc.inMessage)
			}
			var after gate.Set
			f.call(t, http.MethodGet, "/v1/gates", nil, &after)
			if !reflect.DeepEqual(after, before) {
				t.Fatalf("the saved set changed:\nbefore %+v\nafter  %+v", before, after)
			}
		})
	}
	// The object the route expects still works, and an explicit empty list is the way to say
	// "no gates".
	if st, eb := f.rawCall(t, "PUT", "/v1/gates/presets/dev", `{"gates":[]}`); st != 200 {
		t.Fatalf("explicit detach-all: %d %+v", st, eb)
	}
}

func TestGateSessionsRoute(t *testing.T) {
	f := newGateFixture(t, `{"verdict":"stop","reason":"Add a title line."}`)
	set := gate.Set{Gates: []gate.Gate{{Name: "fmt", Enabled: true, Point: "user-message", Task: "Check the format.",
		Advanced: gate.Options{OnError: "continue", TimeoutSeconds: 60, RedoLimit: 1}}},
		Presets: []gate.Preset{{Name: "dev", Gates: []gate.Attachment{{Gate: "fmt", Enabled: true}}}}}
	if st, eb := f.call(t, http.MethodPut, "/v1/gates", set, nil); st != 200 {
		t.Fatalf("save: %d %+v", st, eb)
	}
	var page gate.SessionPage
	if st, _ := f.call(t, http.MethodGet, "/v1/gates/sessions", nil, &page); st != 200 || page.Sessions == nil || len(page.Sessions) != 0 {
		t.Fatalf("empty list: %d %+v", st, page)
	}
	var last gate.Result
	for _, id := range []string{"old", "new"} {
		r := f.session("user-message", "do it")
		r.Session.ID = id
		last = f.evaluate(t, r)
	}
	f.call(t, http.MethodGet, "/v1/gates/sessions?limit=1", nil, &page)
	if len(page.Sessions) != 1 || page.Sessions[0].Session != "new" || page.Sessions[0].LastRun.ID != last.RunID || page.Next == "" {
		t.Fatalf("first page: %+v", page)
	}
	next := page.Next
	page = gate.SessionPage{}
	f.call(t, http.MethodGet, "/v1/gates/sessions?limit=1&cursor="+url.QueryEscape(next), nil, &page)
	if len(page.Sessions) != 1 || page.Sessions[0].Session != "old" || page.Sessions[0].LastRun.Action != gate.ActionRejected || page.Next != "" {
		t.Fatalf("second page: %+v", page)
	}
	for _, q := range []string{"limit=x", "limit=0", "limit=-1", "limit=201", "cursor=nope", "cursor=" + url.QueryEscape("00000000000000000000/a/b")} {
		if st, eb := f.call(t, http.MethodGet, "/v1/gates/sessions?"+q, nil, nil); st != 400 || eb.Error.Code != "invalid" {
			t.Errorf("%s: %d %+v", q, st, eb)
		}
	}
}

// TestGateEvaluateReleasesItsDeferredWork: the work an evaluation leaves for after the answer
// (starting the run-record writer: gate.EvalRequest.After) is released once the answer is sent,
// so the record reaches the store with nothing reading it.
func TestGateEvaluateReleasesItsDeferredWork(t *testing.T) {
	f := newGateFixture(t, `{"verdict":"pass"}`)
	set := gate.Set{Gates: []gate.Gate{{Name: "g", Enabled: true, Point: "user-message", Task: "Check it.",
		Advanced: gate.Options{OnError: "continue", TimeoutSeconds: 60}}},
		Presets: []gate.Preset{{Name: "dev", Gates: []gate.Attachment{{Gate: "g", Enabled: true}}}}}
	if st, eb := f.call(t, http.MethodPut, "/v1/gates", set, nil); st != 200 {
		t.Fatalf("save: %d %+v", st, eb)
	}
	res := f.evaluate(t, f.session("user-message", "do it"))
	if res.RunID == "" {
		t.Fatalf("evaluate: %+v", res)
	}
	// Run records are indexed under gate-run-id/<run id> (internal/gate's key layout).
	stored := func() bool {
		err := f.st.View(context.Background(), func(tx *store.Tx) error {
			_, err := tx.GetRaw("gate-run-id/" + res.RunID)
			return err
		})
		return err == nil
	}
	deadline := time.Now().Add(5 * time.Second)
	for !stored() {
		if time.Now().After(deadline) {
			t.Fatal("the run record never reached the store: the deferred work was not released")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

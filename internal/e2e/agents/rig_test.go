// Package agents holds the end-to-end tests that drive the real agent CLIs (Claude Code and
// Codex, pinned and installed by .ci/tools.sh) offline against fake model APIs
// (internal/testutil/fakemodel) and a real `pixie serve`, set up exactly as `pixie init` writes
// it. Each scenario is one short headless run; what the model was sent is read from the fake's
// recorded request bodies. The CLIs are test tools only: without them the tests skip (and fail
// under PIXIE_REQUIRE_TOOLS=1, as .ci/run sets it).
package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/internal/testutil/fakemodel"
)

// The gates of the tests are legacy bash scripts that conclude themselves (exit 11) on marker
// words, so no Pixie model is needed and each point's action is chosen by the prompt.
var scripts = map[string]string{
	// tool-before: deny a call that names DENY-ME.
	"tb.sh": `#!/bin/bash
in=$(cat)
case "$in" in *DENY-ME*) printf '{"verdict":"stop","reason":"TB-DENIED: that command is not allowed."}'; exit 11 ;; esac
exit 10`,
	// tool-after: withhold SECRET- output, replace REDACT- output, and give a reason without a
	// stop for NOTE-ME output (which must become a note).
	"ta.sh": `#!/bin/bash
in=$(cat)
case "$in" in
  *SECRET-*) printf '{"verdict":"stop","reason":"TA-WITHHELD: the output held a secret."}'; exit 11 ;;
  *REDACT-*) printf '{"replace":"TA-REPLACED: a digest of the output."}'; exit 11 ;;
  *NOTE-ME*) printf '{"reason":"TA-REASON-ONLY"}'; exit 11 ;;
esac
exit 10`,
	// turn-end: send FIRST-ANSWER back once; leave a note on NOTE-SHOWN (this gate shows its
	// results in the chat).
	"te.sh": `#!/bin/bash
in=$(cat)
case "$in" in
  *FIRST-ANSWER*) printf '{"verdict":"stop","reason":"TE-REDO: check your work and answer again."}'; exit 11 ;;
  *NOTE-SHOWN*) printf '{"note":"[Control note]\\nTE-NOTE-SHOWN"}'; exit 11 ;;
esac
exit 10`,
	// user-message: replace a prompt that says ORIG-PROMPT (the replacement keeps the scenario's
	// marker, which the fake model dispatches on).
	"um.sh": `#!/bin/bash
in=$(cat)
case "$in" in *ORIG-PROMPT*) printf '{"replace":"%s: REWRITTEN-PROMPT run the listing"}' "${in%%:*}"; exit 11 ;; esac
exit 10`,
	// agent-message: reject AGENT-BAD with a suggested replacement.
	"am.sh": `#!/bin/bash
in=$(cat)
case "$in" in *AGENT-BAD*) printf '{"verdict":"stop","reason":"AM-REJECT: name the files.","replace":"AM-SUGGESTION: list server/*.go"}'; exit 11 ;; esac
exit 10`,
}

// gatesYAML attaches one script gate per point to the default preset. The agent-message gate
// leaves its target agents at the default (Subagents), which must run on a main agent's call.
// The tool-after gate does not show its results in the chat (showInChat false); the others do.
const gatesYAML = `gates:
  - name: tb
    point: tool-before
    rule: {kind: script, name: tb.sh}
  - name: ta
    point: tool-after
    rule: {kind: script, name: ta.sh}
    advanced: {showInChat: false}
  - name: um
    point: user-message
    rule: {kind: script, name: um.sh}
  - name: te
    point: turn-end
    rule: {kind: script, name: te.sh}
  - name: am
    point: agent-message
    rule: {kind: script, name: am.sh}
presets:
  - name: default
    gates: [{gate: tb}, {gate: ta}, {gate: te}, {gate: am}, {gate: um}]
`

// rig is a running Pixie server with the test gates, and the pixie binary.
type rig struct {
	t     *testing.T
	proc  *testutil.Proc
	pixie string
	home  string
	token string
	api   *http.Client
}

// newRig starts the server with env added to its environment (the model-API proxy's upstream:
// PIXIE_PROXY_ANTHROPIC_URL, PIXIE_PROXY_OPENAI_URL).
func newRig(t *testing.T, env ...string) *rig {
	t.Helper()
	home := filepath.Join(t.TempDir(), "pixie-home")
	if err := os.MkdirAll(filepath.Join(home, "commands"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(home, "commands", name), []byte(body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := testutil.StartServer(t, home, env)
	t.Cleanup(func() { p.Stop(t) })
	r := &rig{t: t, proc: p, pixie: testutil.PixieBinary(t), home: home, token: p.Token(t), api: &http.Client{Timeout: 10 * time.Second}}
	gates := filepath.Join(t.TempDir(), "gates.yaml")
	if err := os.WriteFile(gates, []byte(gatesYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	r.pixieOK(t.TempDir(), nil, "gate", "apply", "-f", gates)
	return r
}

// pixieRun runs the pixie binary in dir with the rig's URL and home on the command line only.
func (r *rig) pixieRun(dir string, env []string, args ...string) (string, int) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.pixie, args...)
	cmd.Dir = dir
	cmd.Env = append(baseEnv(), env...)
	cmd.Env = append(cmd.Env, "PIXIE_SERVER_URL="+r.proc.URL, "PIXIE_HOME="+r.home)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		r.t.Fatal(err)
	}
	return string(out), code
}

func (r *rig) pixieOK(dir string, env []string, args ...string) string {
	r.t.Helper()
	out, code := r.pixieRun(dir, env, args...)
	if code != 0 {
		r.t.Fatalf("pixie %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// call sends an admin API request and decodes the JSON answer.
func (r *rig) call(method, path string, in, out any) {
	r.t.Helper()
	var body *bytes.Reader
	if in != nil {
		raw, _ := json.Marshal(in)
		body = bytes.NewReader(raw)
	} else {
		body = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, r.proc.URL+path, body)
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.api.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		r.t.Fatalf("%s %s: HTTP %d", method, path, resp.StatusCode)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			r.t.Fatal(err)
		}
	}
}

// record is the part of a gate run record the tests read.
type record struct {
	ID         string   `json:"id"`
	Gate       string   `json:"gate"`
	Point      string   `json:"point"`
	Agent      string   `json:"agent"`
	Action     string   `json:"action"`
	Reason     string   `json:"reason"`
	Suggestion string   `json:"suggestion"`
	Notes      []string `json:"notes"`
}

// records returns a session's gate records, oldest first.
func (r *rig) records(session string) []record {
	r.t.Helper()
	var page struct {
		Records []record `json:"records"`
	}
	r.call("GET", "/v1/gates/sessions/"+session+"/records?limit=200", nil, &page)
	for i, j := 0, len(page.Records)-1; i < j; i, j = i+1, j-1 {
		page.Records[i], page.Records[j] = page.Records[j], page.Records[i]
	}
	return page.Records
}

// findRecord returns the session's record of a gate at a point, or fails.
func (r *rig) findRecord(session, point string) record {
	r.t.Helper()
	recs := r.records(session)
	for _, rec := range recs {
		if rec.Point == point {
			var full record
			r.call("GET", "/v1/gates/records/"+rec.ID, nil, &full)
			return full
		}
	}
	r.t.Fatalf("no %s record for %s in %+v", point, session, recs)
	return record{}
}

type hintState struct {
	Pending []struct {
		Text      string `json:"text"`
		SessionID string `json:"sessionId"`
	} `json:"pending"`
	Consumed []struct {
		Text      string `json:"text"`
		SessionID string `json:"sessionId"`
	} `json:"consumed"`
}

func (r *rig) hints() hintState {
	var st hintState
	r.call("GET", "/v1/hints/state", nil, &st)
	return st
}

// baseEnv is a clean environment for the CLIs: PATH, and nothing of Pixie's or a provider's.
func baseEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "TERM=dumb"}
}

// scenario answers the model requests of one run: it is chosen by a marker of the prompt,
// which every request of that session carries.
type scenario struct {
	marker string
	reply  func(r fakemodel.Request) fakemodel.Reply
}

// scripted is a model script that dispatches each request to its scenario.
func scripted(ss ...scenario) fakemodel.Script {
	return func(r fakemodel.Request) fakemodel.Reply {
		if len(r.Tools) == 0 {
			return fakemodel.Reply{Text: "ok"}
		}
		for _, s := range ss {
			if r.Contains(s.marker) {
				return s.reply(r)
			}
		}
		return fakemodel.Reply{Text: "no scenario matched"}
	}
}

// requestsOf returns the recorded model requests of one scenario, oldest first.
func requestsOf(srv *fakemodel.Server, marker string) []fakemodel.Request {
	var out []fakemodel.Request
	for _, r := range srv.ModelRequests() {
		if r.Contains(marker) {
			out = append(out, r)
		}
	}
	return out
}

// count is how often s occurs in the request body (as JSON-escaped text).
func count(r fakemodel.Request, s string) int {
	q, _ := json.Marshal(s)
	return strings.Count(string(r.Body), strings.Trim(string(q), `"`))
}

func dumpRequests(t *testing.T, reqs []fakemodel.Request) string {
	var b strings.Builder
	for _, r := range reqs {
		fmt.Fprintf(&b, "--- request %d (%d bytes)\n%s\n", r.Index, len(r.Body), tail(string(r.Body), 3000))
	}
	return b.String()
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func writeFile(path, text string) error { return os.WriteFile(path, []byte(text), 0o600) }

package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/hookcmd"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime/sandbox"
)

// With the programs make build puts beside pixie, the server's runs start the sandbox init
// and pixie init writes pixie-hook into command hooks; a pixie alone in its folder (go build
// ./cmd/pixie) starts itself for both, says so, and pixie doctor warns of each.
func TestCompanionsAndTheSlowPaths(t *testing.T) {
	for _, tt := range []struct {
		name        string
		bin         string
		start       string // /v1/info sandbox.start
		command     string // what the command hooks run
		initNote    bool
		doctorWarns []string
	}{
		{name: "beside", bin: testutil.PixieBinary(t), start: "init"},
		{name: "alone", bin: testutil.LonePixie(t), start: "pixie", initNote: true, doctorWarns: []string{
			"every hook script run starts the whole pixie binary, about 10 ms of CPU more than the sandbox init (there is no pixie-sandbox beside ",
			" hook, which starts the whole pixie binary for every hook call (about 10 ms of CPU more than pixie-hook); fix: build pixie-hook beside pixie (make build) and run pixie init claude --write",
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Dir(tt.bin)
			home := filepath.Join(t.TempDir(), "home")
			p := testutil.StartServerOf(t, tt.bin, home, nil)
			defer p.Stop(t)
			var info struct {
				Sandbox struct {
					Start, StartReason string
					Command            []string
				}
			}
			raw := getInfo(t, p)
			if err := json.Unmarshal(raw, &info); err != nil {
				t.Fatal(err)
			}
			wantCommand := []string{filepath.Join(dir, sandbox.InitName)}
			if tt.start == "pixie" {
				wantCommand = []string{tt.bin, sandbox.Verb}
			}
			if info.Sandbox.Start != tt.start || strings.Join(info.Sandbox.Command, " ") != strings.Join(wantCommand, " ") || (tt.start == "pixie") != (info.Sandbox.StartReason != "") {
				t.Fatalf("/v1/info sandbox: %s", raw)
			}

			proj := t.TempDir()
			env := append(hookEnv(), "PIXIE_HOME="+home, "HOME="+t.TempDir(), "PIXIE_CODEX_BIN=/nonexistent/codex")
			r := runArgv(t, []string{tt.bin}, proj, nil, env, "init", "claude", "--write", "--command", "--url", p.URL)
			if r.code != 0 || strings.Contains(r.stderr, "note: the command hooks run") != tt.initNote {
				t.Fatalf("init: %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			var settings map[string]any
			readJSON(t, filepath.Join(proj, ".claude", "settings.json"), &settings)
			want := filepath.Join(dir, hookcmd.Name) + " claude --preset default"
			if tt.initNote {
				want = tt.bin + " hook claude --preset default"
			}
			if !strings.Contains(mustJSON(settings), `"`+want) {
				t.Fatalf("the hooks do not run %s: %s", want, mustJSON(settings))
			}
			// Both adapters answer the hook: an unhandled event without the server.
			if r := runArgv(t, strings.Fields(strings.TrimSuffix(want, " claude --preset default")), "", []byte(`{"hook_event_name":"Notification"}`), env, "claude"); r.code != 0 || strings.TrimSpace(r.stdout) != "{}" {
				t.Fatalf("%s: %d %q %q", want, r.code, r.stdout, r.stderr)
			}

			r = runArgv(t, []string{tt.bin}, proj, nil, env, "doctor", "--url", p.URL)
			out := r.stdout + r.stderr
			for _, w := range tt.doctorWarns {
				if !strings.Contains(out, w) {
					t.Errorf("doctor does not warn %q:\n%s", w, out)
				}
			}
			if len(tt.doctorWarns) == 0 && (strings.Contains(out, "starts the whole pixie binary") || !strings.Contains(out, "ok       hook scripts start the sandbox init ("+wantCommand[0]+")")) {
				t.Errorf("doctor:\n%s", out)
			}
		})
	}
}

func getInfo(t *testing.T, p *testutil.Proc) []byte {
	t.Helper()
	c := hintHTTP{url: p.URL, token: p.Token(t), c: &http.Client{Timeout: 10 * time.Second}}
	var raw json.RawMessage
	if st, err := c.call("GET", "/v1/info", nil, &raw); err != nil || st != 200 {
		t.Fatalf("/v1/info: %d %v", st, err)
	}
	return raw
}

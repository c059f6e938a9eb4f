package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/testutil"
)

// TestFirstHourCLI drives the real binary through what Studio does: the first start says no
// model is configured and how to set one; `settings model set|show|test` set one; `config`
// marks it as saved at run time; `gate templates`, `gate try` (exit 1 on a trial error) and
// `gate sessions`.
func TestFirstHourCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the pixie binary")
	}
	llm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,
"finish_reason":"stop","message":{"role":"assistant","content":"{\"verdict\":\"stop\",\"reason\":\"Say which file.\"}"}}],"usage":{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6}}`)
	}))
	defer llm.Close()
	home := t.TempDir()
	p := testutil.StartServer(t, home, nil)
	defer p.Stop(t)
	out := p.Stdout.String()
	for _, want := range []string{"Studio: " + p.URL + "/", "Model: none configured", "pixie settings model set --provider"} {
		if !strings.Contains(out, want) {
			t.Errorf("first start does not say %q:\n%s", want, out)
		}
	}
	ctx := context.Background()
	env := []string{"PIXIE_HOME=" + home, "PIXIE_SERVER_URL=" + p.URL, "MY_KEY=sk-from-env"}
	run := func(want int, args ...string) string {
		t.Helper()
		out, code := testutil.RunPixie(t, ctx, env, args...)
		if code != want {
			t.Fatalf("pixie %s: exit %d, want %d\n%s", strings.Join(args, " "), code, want, out)
		}
		return out
	}
	if out := run(0, "settings", "model", "show"); !strings.Contains(out, "not configured") {
		t.Errorf("show before:\n%s", out)
	}
	// A trial with no model: the error is printed once and the exit is 1.
	draft := t.TempDir() + "/d.yaml"
	writeFile(t, draft, "name: d\npoint: user-message\ntask: Check it.\n")
	if out := run(1, "gate", "try", "-f", draft, "--target", "fix it"); strings.Count(out, "\nerror: ") != 1 || !strings.Contains(out, "pixie settings model set") {
		t.Errorf("try without a model:\n%s", out)
	}
	run(2, "settings", "model", "set")
	out = run(0, "settings", "model", "set", "--provider", "openai", "--base-url", llm.URL+"/v1", "--model", "m", "--api-key-env", "MY_KEY")
	if !strings.Contains(out, "openai m") || !strings.Contains(out, "saved at run time") || strings.Contains(out, "sk-from-env") {
		t.Errorf("set:\n%s", out)
	}
	if out := run(0, "settings", "model", "test"); !strings.HasPrefix(out, "ok: openai") {
		t.Errorf("test:\n%s", out)
	}
	if out := run(0, "settings", "show", "--json"); strings.Contains(out, "sk-from-env") || !strings.Contains(out, `"configured": true`) {
		t.Errorf("show --json:\n%s", out)
	}
	out = run(0, "config")
	if !strings.Contains(out, "[run time") || !strings.Contains(out, "lines marked [run time] were saved on "+p.URL) {
		t.Errorf("config does not mark the run-time settings:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "model.provider ") && !strings.Contains(line, "openai") {
			t.Errorf("config shows the file's provider: %s", line)
		}
	}
	if out := run(0, "settings", "judge", "show"); !strings.Contains(out, "Decision engine: llm") {
		t.Errorf("judge show:\n%s", out)
	}
	// Templates, and one as YAML that gate apply accepts.
	out = run(0, "gate", "templates")
	if !strings.Contains(out, "instruction-format-check") {
		t.Fatalf("templates:\n%s", out)
	}
	tmpl := run(0, "gate", "templates", "instruction-format-check")
	// Without a preset named default the hooks' sessions would run no gates: apply says so.
	lone := t.TempDir() + "/lone.yaml"
	writeFile(t, lone, tmpl)
	if out := run(0, "gate", "apply", "-f", lone); !strings.Contains(out, `warning: no preset is called "default"`) {
		t.Errorf("apply without a default preset:\n%s", out)
	}
	file := t.TempDir() + "/t.yaml"
	writeFile(t, file, tmpl+"presets:\n  - name: default\n    gates: [{gate: instruction-format-check}]\n")
	run(0, "gate", "apply", "-f", file)
	if out := run(0, "gate", "try", "instruction-format-check", "--target", "fix it"); !strings.Contains(out, "reason: Say which file.") {
		t.Errorf("try with the model:\n%s", out)
	}
	// Sessions: none, then the one that was evaluated.
	if out := run(0, "gate", "sessions"); !strings.Contains(out, "no session") {
		t.Errorf("sessions before:\n%s", out)
	}
	body, _ := json.Marshal(gate.EvalRequest{Point: "user-message", Target: "fix it", Turn: 1, Session: gate.Session{ID: "sess-1", Preset: "default"}})
	req, _ := http.NewRequest(http.MethodPost, p.URL+"/v1/gates/evaluate", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+p.Token(t))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("evaluate: %v %v", resp, err)
	}
	resp.Body.Close()
	if out := run(0, "gate", "sessions"); !strings.Contains(out, "sess-1") || !strings.Contains(out, "rejected") {
		t.Errorf("sessions after:\n%s", out)
	}
	// Back to the file.
	if out := run(0, "settings", "model", "reset"); !strings.Contains(out, "not configured") {
		t.Errorf("reset:\n%s", out)
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

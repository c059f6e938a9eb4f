package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/app"
	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/pet"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/internal/testutil/fakechat"
	"github.com/pixie-dev/pixie/runtime/sandbox"
)

// api calls the server with the admin token; it returns the status and the body.
func api(t *testing.T, ts *httptest.Server, token, method, path, ctype string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

func jsonBody(v any) []byte { raw, _ := json.Marshal(v); return raw }

// TestPetAgentGatedThroughTheServer is config → wiring → Run record, through the HTTP routes:
// the Pixie model and pet.agent.preset come from the environment, the real
// block-risky-commands guest is a tool-before gate of that preset, a Skill asking for
// workspace-write is registered only once that is confirmed, and when Pet's agent tries a
// force push with the shell tool the gate denies the call: the command never runs, the model
// is told why, and the Run record shows the denial.
func TestPetAgentGatedThroughTheServer(t *testing.T) {
	if err := sandbox.Probe(); err != nil {
		t.Skipf("no Landlock here (%v): Pet's shell tool fails closed", err)
	}
	ctx := context.Background()
	const push = "git push --force origin main"
	srv := fakechat.NewScript(t, func(c fakechat.Call) fakechat.Turn {
		if len(c.Results) == 0 {
			args, _ := json.Marshal(map[string]string{"command": push})
			return fakechat.Turn{Text: "Publishing the cleanup.", Calls: []fakechat.ToolCall{{ID: "call_push", Name: "shell", Arguments: string(args)}}}
		}
		return fakechat.Turn{Text: "The push was refused: " + c.Results[0].Output}
	})
	home := filepath.Join(t.TempDir(), "home")
	env := map[string]string{
		"PIXIE_MODEL_PROVIDER": "openai", "PIXIE_MODEL_BASE_URL": srv.URL, "PIXIE_MODEL_MODEL": "m", "PIXIE_MODEL_API_KEY": "k",
		"PIXIE_PET_AGENT_PRESET": "guarded", "PIXIE_PET_AGENT_MAX_STEPS": "4",
	}
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Load(home, func(k string) string { return env[k] }, environ, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(ctx, app.Config{Config: cfg, Version: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	token, _ := a.Token()
	ts := httptest.NewServer(a.Server().Handler())
	t.Cleanup(ts.Close)
	call := func(method, path string, body any, want int) []byte {
		t.Helper()
		ctype, raw := "application/json", []byte(nil)
		if body != nil {
			raw = jsonBody(body)
		}
		st, out := api(t, ts, token, method, path, ctype, raw)
		if st != want {
			t.Fatalf("%s %s: %d, want %d: %s", method, path, st, want, out)
		}
		return out
	}

	if st, out := api(t, ts, token, http.MethodPost, "/v1/modules?name=block-risky-commands", "application/wasm", testutil.Guest(t, "block-risky-commands")); st/100 != 2 {
		t.Fatalf("module upload: %d %s", st, out)
	}
	call(http.MethodPut, "/v1/gates", map[string]any{
		"gates":   []map[string]any{{"name": "block-risky-commands", "point": "tool-before", "rule": map[string]string{"kind": "module", "name": "block-risky-commands"}}},
		"presets": []map[string]any{{"name": "guarded", "gates": []map[string]any{{"gate": "block-risky-commands"}}}},
	}, http.StatusOK)

	var diag pet.Diagnostics
	if err := json.Unmarshal(call(http.MethodGet, "/v1/pet/diagnostics", nil, http.StatusOK), &diag); err != nil {
		t.Fatal(err)
	}
	if diag.Agent.Preset != "guarded" || !diag.Agent.Gates || diag.Agent.MaxSteps != 4 || diag.Agent.MaxTokens != 200000 {
		t.Fatalf("diagnostics %+v", diag.Agent)
	}

	dir := filepath.Join(t.TempDir(), "publish")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("---\nname: publish\ndescription: Push the branch.\nsandbox: workspace-write\n---\nPush the current branch.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var in pet.Inspection
	if err := json.Unmarshal(call(http.MethodPost, "/v1/pet/skills/inspect", map[string]string{"path": dir}, http.StatusOK), &in); err != nil {
		t.Fatal(err)
	}
	if in.Sandbox != "workspace-write" {
		t.Fatalf("inspection %+v", in)
	}
	// Not confirmed: 400 with a clear message, nothing stored.
	out := call(http.MethodPost, "/v1/pet/skills", map[string]any{"path": dir, "confirm": true, "fingerprint": in.Fingerprint, "enabled": true}, http.StatusBadRequest)
	if !strings.Contains(string(out), `"code":"invalid"`) || !strings.Contains(string(out), `confirm it by registering with sandbox \"workspace-write\"`) {
		t.Fatalf("unconfirmed: %s", out)
	}
	if out := call(http.MethodGet, "/v1/pet/skills", nil, http.StatusOK); !strings.Contains(string(out), `"skills":[]`) {
		t.Fatalf("a refused registration was stored: %s", out)
	}
	// Confirmed as something else: 409, nothing stored.
	out = call(http.MethodPost, "/v1/pet/skills", map[string]any{"path": dir, "confirm": true, "fingerprint": in.Fingerprint, "sandbox": "read-only", "enabled": true}, http.StatusConflict)
	if !strings.Contains(string(out), `"code":"conflict"`) {
		t.Fatalf("confirmed as read-only: %s", out)
	}
	call(http.MethodPost, "/v1/pet/skills", map[string]any{"path": dir, "confirm": true, "fingerprint": in.Fingerprint, "sandbox": "workspace-write", "enabled": true}, http.StatusCreated)

	cwd := t.TempDir()
	var v pet.InvocationView
	if err := json.Unmarshal(call(http.MethodPost, "/v1/pet/invocations", map[string]any{"skill": "publish",
		"snapshot": map[string]any{"scope": "workspace:repo", "cwd": cwd, "capturedAt": time.Now().Add(-time.Second)}}, http.StatusCreated), &v); err != nil {
		t.Fatal(err)
	}
	r := v.Latest()
	if v.Status != pet.StatusSucceeded || r.Sandbox != "workspace-write" || len(r.ToolCalls) != 1 || r.Steps != 2 {
		t.Fatalf("run %+v", r)
	}
	c := r.ToolCalls[0]
	const reason = "Blocked: force push. Push without --force, or ask the user first."
	if c.Name != "shell" || !c.IsError || c.Gate != "the gate block-risky-commands denied the call: "+reason || c.Output != "denied by a gate: "+reason {
		t.Fatalf("tool call %+v", c)
	}
	if got := srv.Calls()[1].Results[0].Output; got != "error: denied by a gate: "+reason {
		t.Fatalf("the model got %q", got)
	}
	// The gate's own run record is the executor session's, like any host's.
	sess := call(http.MethodGet, "/v1/gates/sessions/pet-exec-"+v.TaskID+"/records", nil, http.StatusOK)
	if !strings.Contains(string(sess), "block-risky-commands") || !strings.Contains(string(sess), "blocked") {
		t.Fatalf("the executor session's gate records: %s", sess)
	}
	if testing.Verbose() {
		raw, _ := json.MarshalIndent(r, "", "  ")
		t.Logf("Run record:\n%s", raw)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/internal/testutil/fakemodel"
)

// TestHintsOff: with hints.enabled false (PIXIE_HINTS_ENABLED=false) the server has no hint
// queue: every hint route, the event stream and the model-side tool routes are not mounted (404,
// not 403), /v1/info says so, `pixie mcp` offers no hint tool, and the hooks and the model-API
// proxy still work and deliver nothing.
func TestHintsOff(t *testing.T) {
	up := fakemodel.NewAnthropic(t, fakemodel.Steps(fakemodel.Reply{Text: "fine"}))
	home := filepath.Join(t.TempDir(), "home")
	p := testutil.StartServer(t, home, []string{"PIXIE_HINTS_ENABLED=false", "PIXIE_PROXY_ANTHROPIC_URL=" + up.URL})
	defer p.Stop(t)
	token := p.Token(t)
	do := func(method, path, body string, hdr ...string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, p.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}

	t.Run("no hint route", func(t *testing.T) {
		for _, r := range []struct{ method, path, body string }{
			{"GET", "/v1/hints/state", ""},
			{"GET", "/v1/hints/events", ""},
			{"POST", "/v1/hints", `{"text":"x"}`},
			{"DELETE", "/v1/hints", `{"id":"h1"}`},
			{"DELETE", "/v1/hints/h1", ""},
			{"POST", "/v1/hints/take", `{}`},
			{"POST", "/v1/hints/confirm", `{"takeId":"t"}`},
			{"POST", "/v1/hints/rollback", `{"takeId":"t"}`},
			{"POST", "/v1/turns/start", `{"sessionId":"s"}`},
			{"POST", "/v1/turns/end", `{"sessionId":"s"}`},
			{"POST", "/v1/tools/hint_send", `{"text":"x"}`},
			{"POST", "/v1/tools/hint_status", `{}`},
		} {
			st, body := do(r.method, r.path, r.body)
			var e struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if st != http.StatusNotFound || json.Unmarshal(body, &e) != nil || e.Error.Code == "" {
				t.Errorf("%s %s: %d %s (want 404 in the error shape)", r.method, r.path, st, body)
			}
		}
	})
	t.Run("info says so", func(t *testing.T) {
		st, body := do("GET", "/v1/info", "")
		var info struct {
			Hints struct {
				Enabled *bool `json:"enabled"`
			} `json:"hints"`
		}
		if st != 200 || json.Unmarshal(body, &info) != nil || info.Hints.Enabled == nil || *info.Hints.Enabled {
			t.Fatalf("/v1/info: %d %s", st, body)
		}
	})
	t.Run("pixie mcp offers no hint tool", func(t *testing.T) {
		cs := mcpSession(t, []string{"PIXIE_SERVER_URL=" + p.URL, "PIXIE_HOME=" + home}, "--session", "s1")
		tools, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range tools.Tools {
			names = append(names, tl.Name)
		}
		sort.Strings(names)
		if strings.Join(names, ",") != "judge,pet_child_answer,pet_locus_finish,pet_locus_wait" {
			t.Fatalf("tools: %v", names)
		}
		if ins := cs.InitializeResult().Instructions; strings.Contains(ins, "hint_send") {
			t.Fatalf("the instructions still offer hint_send: %s", ins)
		}
	})
	t.Run("the hooks answer and deliver nothing", func(t *testing.T) {
		env := append(hookEnv(), "PIXIE_SERVER_URL="+p.URL, "PIXIE_HOME="+home)
		gates := filepath.Join(t.TempDir(), "gates.yaml")
		if err := os.WriteFile(gates, []byte("presets:\n  - name: default\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if r := runIn(t, t.TempDir(), env, "gate", "apply", "-f", gates); r.code != 0 {
			t.Fatalf("gate apply: %s %s", r.stdout, r.stderr)
		}
		for _, in := range []string{
			`{"session_id":"s1","cwd":"/tmp","hook_event_name":"UserPromptSubmit","prompt":"go"}`,
			`{"session_id":"s1","cwd":"/tmp","hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{},"tool_use_id":"t1","tool_response":"ok"}`,
		} {
			r := runWith(t, t.TempDir(), []byte(in), env, "hook", "claude", "--proxy")
			if r.code != 0 || strings.TrimSpace(r.stdout) != "{}" {
				t.Fatalf("hook: %d %q %q", r.code, r.stdout, r.stderr)
			}
		}
	})
	t.Run("the proxy forwards the body as it came", func(t *testing.T) {
		body := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hello"}],"tools":[{"name":"Bash","input_schema":{"type":"object"}}]}`
		st, out := do("POST", "/v1/proxy/anthropic/v1/messages", body, "X-Pixie-Session-Id", "s1", "Anthropic-Version", "2023-06-01")
		reqs := up.Requests()
		if st != 200 || !bytes.Contains(out, []byte("fine")) || len(reqs) != 1 || string(reqs[0].Body) != body {
			t.Fatalf("proxy: %d %s; upstream got %d requests", st, out, len(reqs))
		}
	})
}

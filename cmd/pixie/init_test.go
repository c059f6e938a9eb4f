package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/agentskill"
	"github.com/pixie-dev/pixie/internal/hookcmd"
	"github.com/pixie-dev/pixie/internal/testutil"
)

func TestMergeHooks(t *testing.T) {
	o := initOptions{serverURL: "http://127.0.0.1:7777", home: "/h", preset: "default", pixie: "pixie"}
	settings := map[string]any{
		"permissions": map[string]any{"allow": []any{"Bash(go test:*)"}},
		"hooks": map[string]any{
			"PreToolUse": []any{
				map[string]any{"matcher": "Bash", "hooks": []any{map[string]any{"type": "command", "command": "./lint.sh"}}},
			},
			"Notification": []any{map[string]any{"hooks": []any{map[string]any{"type": "command", "command": "notify-send hi"}}}},
		},
	}
	if err := mergeHooks(settings, claudeHooks(o)); err != nil {
		t.Fatal(err)
	}
	// Again, with another preset and as command hooks: Pixie's entries are replaced, not added.
	o.preset, o.command = "strict", true
	if err := mergeHooks(settings, claudeHooks(o)); err != nil {
		t.Fatal(err)
	}
	hs := settings["hooks"].(map[string]any)
	pre := hs["PreToolUse"].([]any)
	if len(pre) != 2 {
		t.Fatalf("PreToolUse groups: %d, want the user's and Pixie's", len(pre))
	}
	if c := pre[0].(map[string]any)["hooks"].([]any)[0].(map[string]any)["command"]; c != "./lint.sh" {
		t.Errorf("the user's hook changed: %v", c)
	}
	ours := pre[1].(map[string]any)
	h := ours["hooks"].([]any)[0].(map[string]any)
	if ours["matcher"] != "*" || h["type"] != "command" || h["command"] != "pixie hook claude --preset strict --url 'http://127.0.0.1:7777' --home /h --timeout 85s" {
		t.Errorf("Pixie's PreToolUse hook: %v", ours)
	}
	for _, ev := range hookEvents {
		n := 0
		for _, g := range hs[ev].([]any) {
			for _, h := range g.(map[string]any)["hooks"].([]any) {
				if isPixieHook(h) {
					n++
				}
			}
		}
		if n != 1 {
			t.Errorf("%s has %d Pixie hooks, want 1", ev, n)
		}
	}
	if hs["Notification"] == nil || settings["permissions"] == nil {
		t.Error("unrelated settings were dropped")
	}
	if err := mergeHooks(map[string]any{"hooks": []any{}}, claudeHooks(o)); err == nil {
		t.Error("a hooks value that is not an object was overwritten")
	}
}

func TestClaudeHooksHTTP(t *testing.T) {
	h := claudeHooks(initOptions{serverURL: "http://127.0.0.1:7777", preset: "default", pixie: "pixie"})
	stop := h["Stop"].([]any)[0].(map[string]any)
	if _, has := stop["matcher"]; has {
		t.Error("Stop has a matcher")
	}
	hook := stop["hooks"].([]any)[0].(map[string]any)
	if hook["type"] != "http" || hook["url"] != "http://127.0.0.1:7777/v1/hooks/claude-code?preset=default" ||
		hook["headers"].(map[string]any)["Authorization"] != "Bearer $PIXIE_TOKEN" {
		t.Errorf("Stop hook: %v", hook)
	}
	if env := hook["allowedEnvVars"].([]any); len(env) != 1 || env[0] != "PIXIE_TOKEN" {
		t.Errorf("allowedEnvVars: %v", env)
	}
}

func TestMergeJSONFileRefusesNonObject(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(path, []byte("// not json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := mergeJSONFile(path, func(map[string]any) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "left unchanged") {
		t.Fatalf("err = %v", err)
	}
	if raw, _ := os.ReadFile(path); string(raw) != "// not json\n" {
		t.Fatal("file changed")
	}
}

func TestInitClaudeWrite(t *testing.T) {
	proj := t.TempDir()
	home := filepath.Join(t.TempDir(), "pixie-home")
	env := []string{"PIXIE_HOME=" + home, "HOME=" + t.TempDir()}
	// An existing project: its settings and MCP servers must survive.
	if err := os.MkdirAll(filepath.Join(proj, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	existing := `{"model":"opus","hooks":{"Stop":[{"hooks":[{"type":"command","command":"say done"}]}]}}`
	if err := os.WriteFile(filepath.Join(proj, ".claude", "settings.json"), []byte(existing), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, ".mcp.json"), []byte(`{"mcpServers":{"other":{"command":"other-mcp"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}

	// Without --write nothing is written.
	out, code := runInitIn(t, proj, env, "init", "claude", "--preset", "review", "--url", "http://127.0.0.1:9999")
	if code != 0 || !strings.Contains(out, `"url": "http://127.0.0.1:9999/v1/hooks/claude-code?preset=review&proxy=1"`) || !strings.Contains(out, `"mcpServers"`) ||
		!strings.Contains(out, `"ANTHROPIC_BASE_URL": "http://127.0.0.1:9999/v1/proxy/anthropic"`) {
		t.Fatalf("print: %d\n%s", code, out)
	}
	// --no-proxy: hooks that do not say so, and no proxy settings; --proxy is the default.
	out, code = runInitIn(t, proj, env, "init", "claude", "--no-proxy", "--preset", "review", "--url", "http://127.0.0.1:9999")
	if code != 0 || !strings.Contains(out, `"url": "http://127.0.0.1:9999/v1/hooks/claude-code?preset=review"`) || strings.Contains(out, "ANTHROPIC_BASE_URL") {
		t.Fatalf("print --no-proxy: %d\n%s", code, out)
	}
	if out, code = runInitIn(t, proj, env, "init", "claude", "--proxy", "--no-proxy"); code != 2 || !strings.Contains(out, "exclude each other") {
		t.Fatalf("--proxy --no-proxy: %d\n%s", code, out)
	}
	if raw, _ := os.ReadFile(filepath.Join(proj, ".claude", "settings.json")); string(raw) != existing {
		t.Fatal("printing changed the settings")
	}

	for run := 0; run < 2; run++ {
		out, code = runInitIn(t, proj, env, "init", "claude", "--write", "--preset", "review", "--url", "http://127.0.0.1:9999")
		if code != 0 {
			t.Fatalf("write (run %d): %d\n%s", run, code, out)
		}
	}
	var settings map[string]any
	readJSON(t, filepath.Join(proj, ".claude", "settings.json"), &settings)
	if settings["model"] != "opus" {
		t.Error("the project's model setting was dropped")
	}
	if env, _ := settings["env"].(map[string]any); env["ANTHROPIC_BASE_URL"] != "http://127.0.0.1:9999/v1/proxy/anthropic" || settings["apiKeyHelper"] != "printenv PIXIE_TOKEN" {
		t.Errorf("the proxy settings: %s", mustJSON(settings))
	}
	stop := settings["hooks"].(map[string]any)["Stop"].([]any)
	if len(stop) != 2 || !strings.Contains(mustJSON(stop[0]), "say done") || !strings.Contains(mustJSON(stop[1]), `preset=review\u0026proxy=1`) {
		t.Errorf("Stop hooks after two writes: %s", mustJSON(stop))
	}
	var mcpDoc map[string]any
	readJSON(t, filepath.Join(proj, ".mcp.json"), &mcpDoc)
	servers := mcpDoc["mcpServers"].(map[string]any)
	if servers["other"] == nil || servers["pixie"] == nil {
		t.Fatalf("mcpServers: %s", mustJSON(servers))
	}
	px := servers["pixie"].(map[string]any)
	if args := px["args"].([]any); len(args) != 1 || args[0] != "mcp" || px["env"].(map[string]any)["PIXIE_SERVER_URL"] != "http://127.0.0.1:9999" ||
		px["env"].(map[string]any)["PIXIE_HOME"] != home || px["command"] != testutil.PixieBinary(t) {
		t.Errorf("pixie MCP entry: %s", mustJSON(px))
	}
	// The skill is installed, and recorded for updates at server start.
	dir := filepath.Join(proj, ".claude", "skills", agentskill.Name)
	for _, f := range agentskill.Files() {
		want, _ := agentskill.Content(f)
		if got, err := os.ReadFile(filepath.Join(dir, f)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("skill file %s: %v", f, err)
		}
	}
	if dirs, err := agentskill.Recorded(home); err != nil || len(dirs) != 1 {
		t.Errorf("recorded skill folders: %v %v", dirs, err)
	}
	if !strings.Contains(out, "unchanged 2") {
		t.Errorf("second run did not report the skill unchanged:\n%s", out)
	}
	if strings.Contains(out, "PIXIE_TOKEN=") && !strings.Contains(out, "$(cat ") {
		t.Error("the token value was printed")
	}
}

func TestInitClaudeUser(t *testing.T) {
	userHome := t.TempDir()
	env := []string{"PIXIE_HOME=" + filepath.Join(t.TempDir(), "ph"), "HOME=" + userHome}
	out, code := runInitIn(t, t.TempDir(), env, "init", "claude", "--write", "--user", "--command")
	if code != 0 || !strings.Contains(out, "claude mcp add --scope user pixie") {
		t.Fatalf("%d\n%s", code, out)
	}
	var settings map[string]any
	readJSON(t, filepath.Join(userHome, ".claude", "settings.json"), &settings)
	adapter := filepath.Join(filepath.Dir(testutil.PixieBinary(t)), hookcmd.Name)
	if !strings.Contains(mustJSON(settings), `"`+adapter+" claude --preset default --url ") || !strings.Contains(mustJSON(settings), "--home "+shellQuote(env[0][len("PIXIE_HOME="):])) {
		t.Errorf("user settings: %s", mustJSON(settings))
	}
	if _, err := os.Stat(filepath.Join(userHome, ".claude", "skills", agentskill.Name, "SKILL.md")); err != nil {
		t.Error(err)
	}
	if _, code := runInitIn(t, t.TempDir(), env, "init", "claude", "--preset", "../x"); code == 0 {
		t.Error("a bad preset name was accepted")
	}
}

func runInitIn(t *testing.T, dir string, env []string, args ...string) (string, int) {
	t.Helper()
	r := runIn(t, dir, append(hookEnv(), env...), args...)
	return r.stdout + r.stderr, r.code
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func mustJSON(v any) string {
	raw, _ := json.Marshal(v)
	return string(raw)
}

func TestInitCodexWrite(t *testing.T) {
	proj := t.TempDir()
	ph := filepath.Join(t.TempDir(), "ph")
	userHome := t.TempDir()
	env := []string{"PIXIE_HOME=" + ph, "HOME=" + userHome}
	// An existing project config: its other tables survive, an old pixie table is replaced.
	if err := os.MkdirAll(filepath.Join(proj, ".codex"), 0o755); err != nil {
		t.Fatal(err)
	}
	existing := "model = \"o3\"\n\n[mcp_servers.pixie]\ncommand = \"old\"\n\n[mcp_servers.pixie.env]\nX = \"1\"\n\n[mcp_servers.other]\ncommand = \"other\"\n"
	if err := os.WriteFile(filepath.Join(proj, ".codex", "config.toml"), []byte(existing), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := runInitIn(t, proj, env, "init", "codex", "--write", "--preset", "review", "--url", "http://127.0.0.1:9")
	if code != 0 || !strings.Contains(out, "WITHOUT A WORD") || !strings.Contains(out, "--trust") {
		t.Fatalf("%d\n%s", code, out)
	}
	// The server cannot be asked about the preset: init says so.
	if !strings.Contains(out, `warning: could not check the preset "review"`) {
		t.Errorf("no preset warning:\n%s", out)
	}
	var doc map[string]any
	readJSON(t, filepath.Join(proj, ".codex", "hooks.json"), &doc)
	hs := doc["hooks"].(map[string]any)
	bin := testutil.PixieBinary(t)
	for _, ev := range hookEvents {
		h := hs[ev].([]any)[0].(map[string]any)["hooks"].([]any)[0].(map[string]any)
		want := filepath.Join(filepath.Dir(bin), hookcmd.Name) + " codex --preset review --url 'http://127.0.0.1:9' --home " + ph + " --timeout 85s --proxy"
		if h["type"] != "command" || h["command"] != want {
			t.Errorf("%s: %s\nwant %s", ev, mustJSON(h), want)
		}
	}
	raw, err := os.ReadFile(filepath.Join(proj, ".codex", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	want := "model = \"o3\"\n\n[mcp_servers.pixie]\ncommand = \"" + bin + "\"\nargs = [\"mcp\"]\nenv = { PIXIE_SERVER_URL = \"http://127.0.0.1:9\", PIXIE_HOME = \"" + ph + "\" }\n[mcp_servers.other]\ncommand = \"other\"\n"
	if string(raw) != want {
		t.Errorf("config.toml:\n%s\nwant\n%s", raw, want)
	}
	if _, err := os.Stat(filepath.Join(proj, ".agents", "skills", agentskill.Name, "SKILL.md")); err != nil {
		t.Error(err)
	}
	// The proxy, by default, in the user's Codex config (Codex reads model providers only there).
	if raw, err := os.ReadFile(filepath.Join(userHome, ".codex", "config.toml")); err != nil || !strings.HasPrefix(string(raw), "model_provider = \"pixie\"\n") ||
		!strings.Contains(string(raw), `base_url = "http://127.0.0.1:9/v1/proxy/openai/v1"`) {
		t.Errorf("the user's config.toml: %v\n%s", err, raw)
	}
	// --no-proxy: hooks that do not say so.
	proj2 := t.TempDir()
	if out, code := runInitIn(t, proj2, []string{"PIXIE_HOME=" + ph, "HOME=" + t.TempDir()}, "init", "codex", "--write", "--no-proxy", "--url", "http://127.0.0.1:9"); code != 0 {
		t.Fatalf("--no-proxy: %d\n%s", code, out)
	}
	readJSON(t, filepath.Join(proj2, ".codex", "hooks.json"), &doc)
	if c := mustJSON(doc); strings.Contains(c, "--proxy") {
		t.Errorf("--no-proxy hooks: %s", c)
	}
	if _, err := os.Stat(filepath.Join(proj, ".claude")); !os.IsNotExist(err) {
		t.Error("init codex wrote Claude Code files")
	}
	if _, code := runInitIn(t, proj, env, "init", "claude", "--trust"); code != 2 {
		t.Errorf("--trust for claude: exit %d", code)
	}
}

func TestWriteCodexMCP(t *testing.T) {
	table := "[mcp_servers.pixie]\ncommand = \"p\"\n"
	for _, tt := range []struct{ name, in, want string }{
		{"new file", "", table},
		{"append", "model = \"o3\"\n", "model = \"o3\"\n\n" + table},
		{"replace at its place", "[a]\nx = 1\n[mcp_servers.pixie]\ncommand = \"old\"\n[b]\ny = 2\n", "[a]\nx = 1\n" + table + "[b]\ny = 2\n"},
		{"sub-tables go too", "[mcp_servers.pixie] # old\ncommand = \"old\"\n[mcp_servers.pixie.env]\nA = \"1\"\n", table},
		{"a similar name stays", "[mcp_servers.pixie2]\ncommand = \"x\"\n", "[mcp_servers.pixie2]\ncommand = \"x\"\n\n" + table},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.toml")
			if tt.in != "" {
				if err := os.WriteFile(path, []byte(tt.in), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := writeCodexMCP(path, table); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(path); string(got) != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

// init asks the server it was pointed at whether the preset exists and has gates.
func TestInitWarnsAboutThePreset(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	p := testutil.StartServer(t, home, nil)
	defer p.Stop(t)
	env := []string{"PIXIE_HOME=" + home, "HOME=" + t.TempDir()}
	out, code := runInitIn(t, t.TempDir(), env, "init", "claude", "--url", p.URL)
	if code != 0 || !strings.Contains(out, `the preset "default" does not exist on `+p.URL) {
		t.Fatalf("%d\n%s", code, out)
	}
	r := runIn(t, t.TempDir(), append(hookEnv(), env...), "gate", "apply", "-f", writeGatesFile(t, "presets:\n  - name: empty\n    gates: []\n"), "--url", p.URL)
	if r.code != 0 {
		t.Fatalf("gate apply: %d %s %s", r.code, r.stdout, r.stderr)
	}
	out, _ = runInitIn(t, t.TempDir(), env, "init", "claude", "--url", p.URL, "--preset", "empty")
	if !strings.Contains(out, `the preset "empty" on `+p.URL+` has no enabled gate`) {
		t.Fatalf("empty preset:\n%s", out)
	}
}

func writeGatesFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gates.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestServeRefreshesInstalledSkill: `pixie serve` reinstalls the skills `pixie init --write`
// recorded: a deleted file comes back, an edited one is kept.
func TestServeRefreshesInstalledSkill(t *testing.T) {
	proj := t.TempDir()
	home := filepath.Join(t.TempDir(), "home")
	env := []string{"PIXIE_HOME=" + home, "HOME=" + t.TempDir()}
	if out, code := runInitIn(t, proj, env, "init", "claude", "--write", "--url", "http://127.0.0.1:1"); code != 0 {
		t.Fatalf("%d\n%s", code, out)
	}
	dir := filepath.Join(proj, ".claude", "skills", agentskill.Name)
	if err := os.Remove(filepath.Join(dir, "guide.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("my rules\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := testutil.StartServer(t, home, nil)
	p.Stop(t)
	want, _ := agentskill.Content("guide.md")
	if got, err := os.ReadFile(filepath.Join(dir, "guide.md")); err != nil || !bytes.Equal(got, want) {
		t.Errorf("guide.md not restored at start: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "SKILL.md")); string(got) != "my rules\n" {
		t.Errorf("edited SKILL.md overwritten: %q", got)
	}
}

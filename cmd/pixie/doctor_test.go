package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/hookcmd"
	"github.com/pixie-dev/pixie/internal/testutil"
)

// doctor checks a project that pixie init set up, against a real server: each problem is one
// line with its fix, and the exit code says whether there was one.
func TestDoctor(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	p := testutil.StartServer(t, home, nil)
	defer p.Stop(t)
	proj := t.TempDir()
	userHome := t.TempDir()
	env := append(hookEnv(), "PIXIE_HOME="+home, "HOME="+userHome, "PIXIE_CODEX_BIN=/nonexistent/codex")
	doctor := func(extra ...string) (string, int) {
		r := runIn(t, proj, env, append([]string{"doctor", "--url", p.URL}, extra...)...)
		return r.stdout + r.stderr, r.code
	}

	out, code := doctor()
	if code != 1 || !strings.Contains(out, "problem  no Pixie hooks for "+proj+"; fix: run pixie init claude --write") {
		t.Fatalf("empty project: %d\n%s", code, out)
	}
	if r := runIn(t, proj, env, "init", "claude", "--write", "--command", "--url", p.URL); r.code != 0 {
		t.Fatalf("init: %d %s %s", r.code, r.stdout, r.stderr)
	}
	out, code = doctor()
	if code != 1 || !strings.Contains(out, `problem  the preset "default" does not exist on `+p.URL) || strings.Count(out, "problem  ") != 1 ||
		!strings.Contains(out, "ok       Claude Code: the pixie MCP server starts and reaches the Pixie server") ||
		!strings.Contains(out, "ok       Claude Code: the PreToolUse hook") ||
		!strings.Contains(out, "ok       Claude Code: the model requests go through the model-API proxy ("+filepath.Join(proj, ".claude", "settings.json")+"), and the hooks say so") {
		t.Fatalf("no preset: %d\n%s", code, out)
	}
	if r := runIn(t, proj, env, "gate", "apply", "--url", p.URL, "-f", writeGatesFile(t, "gates:\n  - name: g\n    point: tool-before\n    task: Check the call.\npresets:\n  - name: default\n    gates: [{gate: g}]\n")); r.code != 0 {
		t.Fatalf("gate apply: %d %s %s", r.code, r.stdout, r.stderr)
	}
	out, code = doctor()
	if code != 0 || strings.Contains(out, "problem  ") || !strings.Contains(out, "no problem found") || !strings.Contains(out, `ok       the preset "default" exists and has an enabled gate`) {
		t.Fatalf("healthy: %d\n%s", code, out)
	}
	// Hook calls from elsewhere (another project's hooks with a misspelt preset, an agent
	// without the token): warnings with the fix, and doctor still passes this project.
	testutil.PostStopHook(t, p.URL, "sess-1", "?preset=reveiw", "Bearer "+p.Token(t))
	testutil.PostStopHook(t, p.URL, "sess-1", "?preset=default", "")
	out, code = doctor()
	if code != 0 || strings.Contains(out, "problem  ") || !strings.Contains(out, "no problem found (2 warning(s) above)") ||
		!strings.Contains(out, `warning  hooks asked for the preset "reveiw" 1 time (the last at `) ||
		!strings.Contains(out, "fix: create it (a preset named reveiw in your gates file") ||
		!strings.Contains(out, "warning  1 hook call carried no valid token since the server started (1 without a token, 0 with a wrong one") {
		t.Fatalf("warnings: %d\n%s", code, out)
	}

	// A wrong token, a hook pointing elsewhere, a missing binary: one line each, with the fix.
	out, code = doctor("--token", "nope")
	if code != 1 || !strings.Contains(out, "problem  the token is refused") {
		t.Fatalf("wrong token: %d\n%s", code, out)
	}
	settings := filepath.Join(proj, ".claude", "settings.json")
	raw, _ := os.ReadFile(settings)
	edited := strings.Replace(string(raw), "--url '"+p.URL+"'", "--url 'http://127.0.0.1:1'", 1)
	edited = strings.Replace(edited, filepath.Join(filepath.Dir(testutil.PixieBinary(t)), hookcmd.Name)+" claude", "/gone/pixie-hook claude", 1)
	if err := os.WriteFile(settings, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = doctor()
	if code != 1 || !strings.Contains(out, "reaches http://127.0.0.1:1, not "+p.URL+"; fix: run pixie init claude --write --url "+p.URL) ||
		!strings.Contains(out, "runs /gone/pixie-hook, which is not an executable file") {
		t.Fatalf("edited hooks: %d\n%s", code, out)
	}
	// A server that is down.
	r := runIn(t, proj, env, "doctor", "--url", "http://"+testutil.FreeAddr(t))
	if r.code != 1 || !strings.Contains(r.stdout, "does not answer") || !strings.Contains(r.stdout, "fix: start it (pixie serve)") {
		t.Fatalf("server down: %d\n%s", r.code, r.stdout)
	}
}

// doctor warns when the hooks and the host's settings disagree about the model-API proxy: hooks
// that leave hints to a proxy the host does not use would deliver none, and hooks that do not
// say so beside a host that uses it would put a new session's first hint into its history.
func TestDoctorProxyMismatch(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	p := testutil.StartServer(t, home, nil)
	defer p.Stop(t)
	env := append(hookEnv(), "PIXIE_HOME="+home, "HOME="+t.TempDir(), "PIXIE_CODEX_BIN=/nonexistent/codex")
	for _, tc := range []struct {
		name, initFlag, settingsEdit, want string
	}{
		{"hooks say proxy, the host does not use it", "", `"ANTHROPIC_BASE_URL": "` + p.URL + `/v1/proxy/anthropic"`,
			"the hooks leave hints and replacements to the model-API proxy, but"},
		{"the host uses the proxy, the hooks do not say so", "--no-proxy", `"model": "x"`,
			"the model requests go through the model-API proxy ("},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proj := t.TempDir()
			args := []string{"init", "claude", "--write", "--url", p.URL}
			if tc.initFlag != "" {
				args = append(args, tc.initFlag)
			}
			if r := runIn(t, proj, env, args...); r.code != 0 {
				t.Fatalf("init: %s %s", r.stdout, r.stderr)
			}
			settings := filepath.Join(proj, ".claude", "settings.json")
			raw, _ := os.ReadFile(settings)
			s := string(raw)
			if tc.initFlag == "" {
				s = strings.Replace(s, tc.settingsEdit, `"ANTHROPIC_BASE_URL": "https://api.anthropic.com"`, 1)
			} else {
				s = strings.Replace(s, "{\n", "{\n  \"env\": {\"ANTHROPIC_BASE_URL\": \""+p.URL+"/v1/proxy/anthropic\"},\n", 1)
			}
			if s == string(raw) {
				t.Fatal("the settings edit did nothing")
			}
			if err := os.WriteFile(settings, []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
			r := runIn(t, proj, env, "doctor", "--url", p.URL)
			if !strings.Contains(r.stdout, "warning  Claude Code: "+tc.want) {
				t.Fatalf("doctor: %d\n%s", r.code, r.stdout)
			}
		})
	}
}

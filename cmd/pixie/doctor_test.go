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
		!strings.Contains(out, "ok       Claude Code: the PreToolUse hook") {
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
	edited := strings.Replace(string(raw), p.URL, "http://127.0.0.1:1", 1)
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

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/pet"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime/sandbox"
)

// petModel is an OpenAI-compatible chat completions server that records the bodies it got.
type petModel struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newPetModel(t *testing.T) *petModel {
	m := &petModel{}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		m.mu.Lock()
		m.bodies = append(m.bodies, string(raw))
		m.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":%d,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"the model answered"}}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`, time.Now().Unix())
	}))
	t.Cleanup(m.Close)
	return m
}

// runPixieIn runs the real binary with stdin.
func runPixieIn(t *testing.T, env []string, stdin string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(testutil.PixieBinary(t), args...)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, "PIXIE_") && !strings.HasSuffix(k, "_API_KEY") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

func petSkill(t *testing.T, root, name, body string, files map[string][]byte) string {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files["SKILL.md"] = []byte("---\nname: " + name + "\ndescription: The " + name + " Skill.\n---\n" + body + "\n")
	for p, b := range files {
		if err := os.WriteFile(filepath.Join(dir, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestPetCLI drives the real binary against the real server (wired as in production: bash under
// Landlock, WASM through pet.ModuleFiles, the OpenAI provider against a test server).
func TestPetCLI(t *testing.T) {
	const secret = "cli-secret-value-77"
	m := newPetModel(t)
	home := filepath.Join(t.TempDir(), "home")
	p := testutil.StartServer(t, home, []string{"PIXIE_MODEL_PROVIDER=openai", "PIXIE_MODEL_BASE_URL=" + m.URL + "/v1",
		"PIXIE_MODEL_MODEL=m", "PIXIE_MODEL_API_KEY=k"})
	defer p.Stop(t)
	env := []string{"PIXIE_SERVER_URL=" + p.URL, "PIXIE_HOME=" + home}
	run := func(stdin string, args ...string) (string, int) { return runPixieIn(t, env, stdin, args...) }
	var all strings.Builder
	ok := func(args ...string) string {
		t.Helper()
		out, code := run("", args...)
		all.WriteString(out)
		if code != 0 {
			t.Fatalf("pixie %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
		return out
	}

	skills := t.TempDir()
	instr := petSkill(t, skills, "explain", "Explain the selection.", map[string][]byte{})
	script := petSkill(t, skills, "tidy", "Runs run.sh.", map[string][]byte{
		"run.sh": []byte("echo \"tidy greeting=$DSH_PET_GREETING\"\n"),
	})
	guest, err := os.ReadFile(testutil.GuestPath(t, "pet-echo-skill"))
	if err != nil {
		t.Fatal(err)
	}
	wasmSkill := petSkill(t, skills, "echo", "A guest.", map[string][]byte{"skill.wasm": guest})

	out := ok("pet", "skills", "inspect", instr)
	if !strings.Contains(out, "name:        explain") || !strings.Contains(out, "kind:        instructions") {
		t.Fatalf("inspect:\n%s", out)
	}
	// Registration asks; anything but yes refuses.
	if out, code := run("n\n", "pet", "skills", "register", instr); code != 1 || !strings.Contains(out, "not confirmed") {
		t.Fatalf("declined register: %d\n%s", code, out)
	}
	if out, code := run("y\n", "pet", "skills", "register", instr, "--enable", "--shortcut"); code != 0 || !strings.Contains(out, "registered explain → "+instr+" (sandbox=read-only enabled=true shortcut=true executor=builtin)") {
		t.Fatalf("register: %d\n%s", code, out)
	}
	ok("pet", "skills", "register", script, "--yes", "--enable")
	// A Skill that asks for workspace-write: inspect shows it, the question names the grant.
	writer := petSkill(t, skills, "writer", "Writes.", map[string][]byte{})
	if err := os.WriteFile(filepath.Join(writer, "SKILL.md"), []byte("---\nname: writer\ndescription: Writes.\nsandbox: workspace-write\n---\nWrite.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := ok("pet", "skills", "inspect", writer); !strings.Contains(out, "sandbox:     workspace-write (its commands may change files") {
		t.Fatalf("inspect writer:\n%s", out)
	}
	if out, code := run("y\n", "pet", "skills", "register", writer); code != 0 || !strings.Contains(out, "Register writer → "+writer+", granting the workspace-write sandbox? [y/N]") ||
		!strings.Contains(out, "(sandbox=workspace-write enabled=false") {
		t.Fatalf("register writer: %d\n%s", code, out)
	}
	ok("pet", "skills", "register", wasmSkill, "--yes")
	ok("pet", "skills", "enable", "echo")
	if out := ok("pet", "skills", "shortcut", "echo", "on"); !strings.Contains(out, "shortcut=true") {
		t.Fatalf("shortcut:\n%s", out)
	}
	// The executor: validated by the server, shown by ls; Claude Code is not set up for this
	// server (no pet.claude.command on PATH), so the Skill shows unavailable with the reason.
	if out, code := run("", "pet", "skills", "executor", "explain", "gemini"); code == 0 || !strings.Contains(out, `unknown executor "gemini"`) {
		t.Fatalf("a bad executor: %d\n%s", code, out)
	}
	if out, code := run("", "pet", "skills", "executor", "tidy", "claude"); code == 0 || !strings.Contains(out, "runs instruction Skills") {
		t.Fatalf("a script on claude: %d\n%s", code, out)
	}
	if out := ok("pet", "skills", "executor", "explain", "codex"); !strings.Contains(out, "executor=codex") {
		t.Fatalf("executor:\n%s", out)
	}
	if out := ok("pet", "skills", "ls"); !regexp.MustCompile(`explain\s+instructions\s+codex\s`).MatchString(out) {
		t.Fatalf("ls does not show the executor:\n%s", out)
	}
	ok("pet", "skills", "executor", "explain", "builtin")
	out = ok("pet", "skills", "ls")
	for _, want := range []string{"echo", "wasm", "explain", "instructions", "tidy", "script", "workspace-write", "read-only"} {
		if !strings.Contains(out, want) {
			t.Fatalf("ls lacks %q:\n%s", want, out)
		}
	}
	bad := petSkill(t, skills, "bad", "x", map[string][]byte{})
	if err := os.Symlink("/etc", filepath.Join(bad, "etc")); err != nil {
		t.Fatal(err)
	}
	if out, code := run("", "pet", "skills", "inspect", bad); code != 1 || !strings.Contains(out, "etc: symlinks are not allowed") {
		t.Fatalf("refused inspect: %d\n%s", code, out)
	}

	out, code := run(secret+"\n", "pet", "env", "set", "GREETING", "-", "--workspace", "w1")
	if code != 0 || !strings.Contains(out, "set GREETING in the workspace:w1 scope (Skills read $DSH_PET_GREETING)") {
		t.Fatalf("env set: %d\n%s", code, out)
	}
	out = ok("pet", "env", "ls")
	if !regexp.MustCompile(`workspace:w1\s+GREETING\s+DSH_PET_GREETING\s+\*{8}`).MatchString(out) {
		t.Fatalf("env ls:\n%s", out)
	}

	out = ok("pet", "invoke", "explain", "--scope", "session:s1", "--workspace", "w1", "--title", "T", "--selection", "some code")
	if !strings.Contains(out, "the model answered") || !strings.Contains(out, ": succeeded") || !strings.Contains(out, "sandbox read-only, 1 model turns, 0 tool calls") {
		t.Fatalf("invoke explain:\n%s", out)
	}
	task := regexp.MustCompile(`task (t[0-9a-f]{22})`).FindStringSubmatch(out)
	if task == nil {
		t.Fatalf("no task id in:\n%s", out)
	}
	out = ok("pet", "invoke", "echo", "--scope", "session:s1", "--workspace", "w1", "--title", "T")
	if !strings.Contains(out, `wasm echo #2 run 1 in session:s1: title="T" greeting=[$DSH_PET_GREETING] history=1`) {
		t.Fatalf("invoke echo:\n%s", out)
	}
	if sandbox.Probe() == nil {
		out = ok("pet", "invoke", "tidy", "--scope", "session:s1", "--workspace", "w1")
		if !strings.Contains(out, "tidy greeting=[$DSH_PET_GREETING]") {
			t.Fatalf("invoke tidy:\n%s", out)
		}
	}
	if out, code := run("", "pet", "invoke", "explain"); code != 1 || !strings.Contains(out, "--scope is required") {
		t.Fatalf("invoke without scope: %d\n%s", code, out)
	}

	out = ok("pet", "tasks")
	if !strings.Contains(out, task[1]) || !strings.Contains(out, "session:s1") {
		t.Fatalf("tasks:\n%s", out)
	}
	out = ok("pet", "tasks", task[1])
	if !strings.Contains(out, "#1") || !strings.Contains(out, "#2") || !strings.Contains(out, "run 1 wasm read-only succeeded") {
		t.Fatalf("task:\n%s", out)
	}
	out = ok("pet", "archive", task[1])
	if !strings.Contains(out, "starts epoch 2") {
		t.Fatalf("archive:\n%s", out)
	}
	out = ok("pet", "invoke", "explain", "--scope", "session:s1", "--json")
	var v pet.InvocationView
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &v); err != nil || v.Epoch != 2 || v.TaskID == task[1] {
		t.Fatalf("new epoch: %v\n%s", err, out)
	}

	out = ok("pet", "wheel")
	if !regexp.MustCompile(`1\s+[01]\s+skill\s+echo\s+yes`).MatchString(out) || !strings.Contains(out, "explain") {
		t.Fatalf("wheel:\n%s", out)
	}
	// Drift, then the rebuild verb.
	if err := os.Remove(filepath.Join(home, "pet", "workspace", pet.ProjectionDir, "explain")); err != nil {
		t.Fatal(err)
	}
	if out, code := run("", "pet", "invoke", "explain", "--scope", "independent"); code != 1 || !strings.Contains(out, "409") || !strings.Contains(out, "projection drift") {
		t.Fatalf("invoke with drift: %d\n%s", code, out)
	}
	out = ok("pet", "diagnostics")
	var d pet.Diagnostics
	if err := json.Unmarshal([]byte(out), &d); err != nil || len(d.Drift) != 1 || d.Paths.Workspace != filepath.Join(home, "pet", "workspace") ||
		!d.Executors[pet.KindWASM].Available || !d.Executors[pet.KindInstructions].Available {
		t.Fatalf("diagnostics: %v\n%s", err, out)
	}
	if out := ok("pet", "rebuild"); !strings.Contains(out, "created explain") {
		t.Fatalf("rebuild:\n%s", out)
	}
	ok("pet", "invoke", "explain", "--scope", "independent")

	ok("pet", "env", "rm", "GREETING", "--workspace", "w1")
	ok("pet", "skills", "disable", "tidy")
	ok("pet", "skills", "rm", "tidy")
	if out, code := run("", "pet", "skills", "rm", "tidy"); code != 1 || !strings.Contains(out, "404") {
		t.Fatalf("rm twice: %d\n%s", code, out)
	}
	if _, code := run("", "pet", "frobnicate"); code != 2 {
		t.Fatalf("unknown subcommand: exit %d", code)
	}
	if _, code := run("", "pet", "skills", "shortcut", "echo"); code != 2 {
		t.Fatalf("shortcut without on/off: exit %d", code)
	}

	m.mu.Lock()
	prompts := strings.Join(m.bodies, "\n")
	m.mu.Unlock()
	if strings.Contains(all.String(), secret) || strings.Contains(prompts, secret) || strings.Contains(p.Stdout.String()+p.Stderr.String(), secret) {
		t.Fatal("the environment value leaked into CLI output, a prompt or the server log")
	}
}

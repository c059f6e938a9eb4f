package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/modules"
	"github.com/pixie-dev/pixie/runtime/wasm"
	"github.com/pixie-dev/pixie/server"
)

const moduleCLIToken = "module-cli-token-0123456789abcdef0123456789abcdef"

// moduleCLIServer is a real server with the module registry (the real validator) and the gate
// service for the in-use check.
func moduleCLIServer(t *testing.T) (*httptest.Server, *gate.Service) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := badgerstore.Open(ctx, badgerstore.Options{Dir: filepath.Join(dir, "db"), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	v, err := wasm.NewValidator(ctx, wasm.Config{CacheDir: filepath.Join(dir, "cache")})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := modules.New(context.Background(), modules.Config{Store: st, Dir: filepath.Join(dir, "blobs"), Validator: v})
	if err != nil {
		t.Fatal(err)
	}
	gates, err := gate.New(t.Context(), gate.Config{Store: st, Home: dir, Modules: reg})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(testServer(t, server.Config{Token: moduleCLIToken}, server.Deps{Store: st, Gates: gates, Modules: reg, ModuleInUse: gates.ModuleInUse}).Handler())
	t.Cleanup(ts.Close)
	return ts, gates
}

func runModuleCLI(t *testing.T, ts *httptest.Server, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	args = append(args, "--url", ts.URL, "--token", moduleCLIToken)
	code := runModule(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestModuleCLI(t *testing.T) {
	ts, gates := moduleCLIServer(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "echo-guest.wasm")
	if err := os.WriteFile(file, testutil.Guest(t, "testdata/echo"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The name defaults to the file name.
	code, out, errOut := runModuleCLI(t, ts, "push", file)
	if code != 0 || !strings.HasPrefix(out, "pushed echo-guest: sha256 ") || !strings.Contains(out, "gate") {
		t.Fatalf("push: %d %q %q", code, out, errOut)
	}
	code, out, _ = runModuleCLI(t, ts, "push", file, "--name", "second", "--json")
	var m modules.Module
	if code != 0 || json.Unmarshal([]byte(out), &m) != nil || m.Name != "second" {
		t.Fatalf("push --json: %d %q", code, out)
	}
	// A refused module: the server's reason, exit 1, nothing stored.
	bad := filepath.Join(dir, "noentry.wasm")
	if err := os.WriteFile(bad, testutil.Guest(t, "testdata/fault-noentry"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runModuleCLI(t, ts, "push", bad)
	if code != 1 || !strings.Contains(errOut, "HTTP 422") || !strings.Contains(errOut, `entry point "gate"`) {
		t.Fatalf("refused push: %d %q", code, errOut)
	}
	if code, _, errOut = runModuleCLI(t, ts, "push", file, "--name", "Not_Kebab"); code != 1 || !strings.Contains(errOut, "kebab-case") {
		t.Fatalf("bad name: %d %q", code, errOut)
	}
	code, out, _ = runModuleCLI(t, ts, "list")
	if code != 0 || !strings.Contains(out, "echo-guest") || !strings.Contains(out, "second") || strings.Contains(out, "noentry") {
		t.Fatalf("list: %d %q", code, out)
	}
	code, out, _ = runModuleCLI(t, ts, "show", "second")
	if code != 0 || !strings.Contains(out, "sha256    "+m.SHA256) || !strings.Contains(out, "extism:host/user.pet_context") {
		t.Fatalf("show: %d %q", code, out)
	}
	// rm is refused while a saved gate uses the module.
	g := gate.Gate{Name: "g", Enabled: true, Point: "user-message", Rule: &gate.Rule{Kind: runtime.KindModule, Name: "second"},
		Advanced: gate.Options{OnError: gate.OnErrorContinue, TimeoutSeconds: 60, RedoLimit: 1}}
	if _, err := gates.SaveGate(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut = runModuleCLI(t, ts, "rm", "second"); code != 1 || !strings.Contains(errOut, "HTTP 409") {
		t.Fatalf("rm in use: %d %q", code, errOut)
	}
	if code, out, _ = runModuleCLI(t, ts, "rm", "echo-guest"); code != 0 || out != "deleted module echo-guest\n" {
		t.Fatalf("rm: %d %q", code, out)
	}
	if code, _, errOut = runModuleCLI(t, ts, "rm", "echo-guest"); code != 1 || !strings.Contains(errOut, "HTTP 404") {
		t.Fatalf("rm twice: %d %q", code, errOut)
	}
	if code, _, _ = runModuleCLI(t, ts, "push"); code != 2 {
		t.Fatalf("push without a file: %d", code)
	}
}

func TestGuestBuild(t *testing.T) {
	out := filepath.Join(t.TempDir(), "loop.wasm")
	var stdout, stderr bytes.Buffer
	src := filepath.Join(testutil.Root(), "guests", "testdata", "fault-loop")
	if code := runGuest(context.Background(), []string{"build", src, "-o", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("build: %d %s", code, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil || !bytes.HasPrefix(b, []byte("\x00asm")) || !strings.Contains(stdout.String(), "pixie module push "+out) {
		t.Fatalf("%v %q", err, stdout.String())
	}
	// The module is a valid gate module.
	v, err := wasm.NewValidator(context.Background(), wasm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if info, err := v.Validate(context.Background(), b, ""); err != nil || !strings.Contains(strings.Join(info.Exports, ","), "gate") {
		t.Fatalf("%+v %v", info, err)
	}
	// A folder that does not build: the toolchain's message, exit 1.
	broken := t.TempDir()
	for name, body := range map[string]string{"go.mod": "module broken\n\ngo 1.26\n", "main.go": "package main\nfunc main() { undefined() }\n"} {
		if err := os.WriteFile(filepath.Join(broken, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stderr.Reset()
	if code := runGuest(context.Background(), []string{"build", broken, "-o", filepath.Join(t.TempDir(), "x.wasm")}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "undefined") {
		t.Fatalf("broken: %d %q", code, stderr.String())
	}
	if code := runGuest(context.Background(), []string{"build"}, &stdout, &stderr); code != 2 {
		t.Fatalf("no folder: %d", code)
	}
}

// TestModulesInTheServer runs the real binary: a module pushed with `pixie module push` is a
// gate's rule at once, /v1/info counts it, the record of the last run before a clean stop is
// there after the restart, and the restarted server runs the module from the disk cache.
func TestModulesInTheServer(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	p := testutil.StartServer(t, home, nil)
	env := []string{"PIXIE_SERVER_URL=" + p.URL, "PIXIE_HOME=" + home}
	ctx := context.Background()
	if out, code := testutil.RunPixie(t, ctx, env, "module", "push", testutil.GuestPath(t, "block-risky-commands")); code != 0 {
		t.Fatalf("push: %d %s", code, out)
	}
	set := `{"gates":[{"name":"risky","point":"tool-before","rule":{"kind":"module","name":"block-risky-commands"}}],
"presets":[{"name":"dev","gates":[{"gate":"risky","enabled":true}]}]}`
	if st, body := adminCall(t, p, "PUT", "/v1/gates", set); st != 200 {
		t.Fatalf("save: %d %s", st, body)
	}
	eval := `{"point":"tool-before","session":{"id":"s1","preset":"dev","cwd":"/tmp","policy":"read-only"},"turn":1,
"tool":{"name":"Bash","args":{"command":"rm -rf ~"}},"target":"{\"command\":\"rm -rf ~\"}"}`
	var res gate.Result
	st, body := adminCall(t, p, "POST", "/v1/gates/evaluate", eval)
	if st != 200 || json.Unmarshal([]byte(body), &res) != nil || res.Action != gate.ActionBlocked || res.RunID == "" {
		t.Fatalf("evaluate: %d %s", st, body)
	}
	var info struct {
		WASM struct {
			Modules  int    `json:"modules"`
			CacheDir string `json:"cacheDir"`
		} `json:"wasm"`
	}
	if st, body := adminCall(t, p, "GET", "/v1/info", ""); st != 200 || json.Unmarshal([]byte(body), &info) != nil ||
		info.WASM.Modules != 1 || info.WASM.CacheDir != filepath.Join(home, "cache", "wasm") {
		t.Fatalf("info: %d %s", st, body)
	}
	p.Stop(t)

	p = testutil.StartServer(t, home, nil)
	defer p.Stop(t)
	if st, body := adminCall(t, p, "GET", "/v1/gates/records/"+res.RunID, ""); st != 200 || !strings.Contains(body, `"action":"blocked"`) {
		t.Fatalf("the record of the last run before the stop: %d %s", st, body)
	}
	if st, body := adminCall(t, p, "POST", "/v1/gates/evaluate", strings.Replace(eval, `"turn":1`, `"turn":2`, 1)); st != 200 || !strings.Contains(body, `"action":"blocked"`) {
		t.Fatalf("evaluate after the restart: %d %s", st, body)
	}
}

// adminCall sends an admin request to a running server and returns the status and body.
func adminCall(t *testing.T, p *testutil.Proc, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, p.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+p.Token(t))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

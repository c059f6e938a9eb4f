package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/wasm"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// The scaffold, tried as a guest author outside this repository would: `pixie guest new` in a
// temporary folder, the project's own tests, `pixie guest build`, and the module uploaded
// (validated) and run by the real runtime.

// inDir runs name args in dir and returns its combined output, failing the test on an error.
func inDir(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOWORK=off"), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s in %s: %v\n%s", name, strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

func guestCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runGuest(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// oneModule serves one module body under any reference.
type oneModule []byte

func (m oneModule) Resolve(context.Context, string) (string, error) {
	sum := sha256.Sum256(m)
	return hex.EncodeToString(sum[:]), nil
}
func (m oneModule) Load(context.Context, string) ([]byte, error) { return m, nil }

// judgeYes answers every bool judgment with a "yes" probability.
type judgeYes float64

func (j judgeYes) Ask(context.Context, abi.AskRequest) (abi.AskResponse, error) {
	return abi.AskResponse{}, errs.New(errs.Unavailable, "no model")
}
func (j judgeYes) Judge(_ context.Context, req abi.JudgeRequest) (abi.JudgeResponse, error) {
	y := float64(j)
	resp := abi.JudgeResponse{Engine: "llm", Answers: map[string]abi.Answer{}}
	for id := range req.Questions {
		resp.Answers[id] = abi.Answer{Type: abi.JudgeBool, Label: "yes", Yes: &y, Probabilities: map[string]float64{"yes": y, "no": 1 - y}, Confidence: y}
	}
	return resp, nil
}
func (judgeYes) Log(string, string) {}

// runScaffolded uploads the module at path through the real validator and runs it on the
// scaffold's cases through the real executor.
func runScaffolded(t *testing.T, path string) {
	t.Helper()
	ctx := context.Background()
	mod, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := wasm.Config{CacheDir: t.TempDir()}
	v, err := wasm.NewValidator(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close(ctx)
	if _, err := v.Validate(ctx, mod, abi.EntryGate); err != nil {
		t.Fatalf("the upload refuses the module: %v", err)
	}
	cfg.Source = oneModule(mod)
	x, err := wasm.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close(ctx)
	for _, tc := range []struct {
		args   string
		yes    float64
		code   int
		stdout string
	}{
		{`{"command":"git commit --no-verify -m wip"}`, 0, 11, `{"verdict":"stop","reason":"Blocked: --no-verify skips the repository's hooks. Commit without it."}`},
		{`{"command":"git push --force origin main"}`, 0.9, 11, `{"verdict":"stop","reason":"Blocked: this push may rewrite history others have pulled. Ask the user first."}`},
		{`{"command":"git push origin feature"}`, 0.1, 10, ""},
		{`{"command":"ls"}`, 0, 10, ""},
	} {
		res, err := x.Run(ctx, runtime.Request{Kind: runtime.KindModule, Ref: "m", Target: tc.args, Helper: judgeYes(tc.yes),
			Vars: map[string]string{abi.VarPoint: abi.PointToolBefore, abi.VarToolName: "Bash"}})
		if err != nil || res.ExitCode != tc.code || res.Stdout != tc.stdout {
			t.Errorf("%s: exit %d %q %v; want %d %q", tc.args, res.ExitCode, res.Stdout, err, tc.code, tc.stdout)
		}
	}
}

func TestGuestNewGoOutsideTheRepository(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "no-verify")
	code, out, errOut := guestCLI(t, "new", dir, "--sdk", filepath.Join(testutil.Root(), "sdk"))
	if code != 0 || !strings.Contains(out, "go.mod") || !strings.Contains(out, "rule_test.go") {
		t.Fatalf("guest new: %d %s %s", code, out, errOut)
	}
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil || !strings.Contains(string(readme), "replace github.com/pixie-dev/pixie/sdk => "+filepath.Join(testutil.Root(), "sdk")) ||
		!strings.Contains(string(readme), "pixie module push no-verify.wasm") {
		t.Fatalf("the README does not explain the replace and the upload: %v\n%s", err, readme)
	}
	// The project is tidy as written, and its tests pass with the fake.
	inDir(t, dir, nil, "go", "mod", "tidy", "-diff")
	if out := inDir(t, dir, []string{"GOFLAGS=-mod=readonly"}, "go", "test", "-count=1", "./..."); !strings.Contains(out, "ok") {
		t.Fatalf("go test: %s", out)
	}
	// Its module graph is the SDK and go-pdk: nothing of the server's.
	graph := inDir(t, dir, nil, "go", "list", "-m", "all")
	for _, server := range []string{"github.com/dgraph-io/badger", "github.com/labstack/echo", "github.com/tetratelabs/wazero", "github.com/extism/go-sdk"} {
		if strings.Contains(graph, server) {
			t.Errorf("the guest's module graph holds %s:\n%s", server, graph)
		}
	}
	var mods []string
	for _, l := range strings.Split(strings.TrimSpace(graph), "\n") {
		mods = append(mods, strings.Fields(l)[0])
	}
	if strings.Join(mods, " ") != "example.com/no-verify github.com/extism/go-pdk github.com/pixie-dev/pixie/sdk" {
		t.Errorf("go list -m all: %q", mods)
	}
	wasmOut := filepath.Join(t.TempDir(), "no-verify.wasm")
	if code, out, errOut := guestCLI(t, "build", dir, "-o", wasmOut); code != 0 {
		t.Fatalf("guest build: %d %s %s", code, out, errOut)
	}
	runScaffolded(t, wasmOut)
}

func TestGuestNewAssemblyScriptOutsideTheRepository(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		if os.Getenv("PIXIE_REQUIRE_TOOLS") == "1" {
			t.Fatal("npm is needed (PIXIE_REQUIRE_TOOLS=1)")
		}
		t.Skip("npm is not installed")
	}
	dir := filepath.Join(t.TempDir(), "no-verify-as")
	code, out, errOut := guestCLI(t, "new", dir, "--lang", "assemblyscript", "--sdk", filepath.Join(testutil.Root(), "sdk"))
	if code != 0 || !strings.Contains(out, "package.json") || !strings.Contains(out, "test/rule.test.js") {
		t.Fatalf("guest new: %d %s %s", code, out, errOut)
	}
	inDir(t, dir, nil, "npm", "install", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error")
	if out := inDir(t, dir, nil, "npm", "test"); !strings.Contains(out, "# fail 0") || strings.Contains(out, "# pass 0") {
		t.Fatalf("npm test: %s", out)
	}
	// Only the pinned compiler and the SDK (and the compiler's own two dependencies).
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil || !strings.Contains(string(lock), `"node_modules/assemblyscript": {
      "version": "0.28.20"`) {
		t.Fatalf("package-lock.json: %v\n%s", err, lock)
	}
	wasmOut := filepath.Join(t.TempDir(), "no-verify-as.wasm")
	if code, out, errOut := guestCLI(t, "build", dir, "-o", wasmOut); code != 0 {
		t.Fatalf("guest build: %d %s %s", code, out, errOut)
	}
	runScaffolded(t, wasmOut)
}

func TestGuestNewRefuses(t *testing.T) {
	sdk := filepath.Join(testutil.Root(), "sdk")
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "keep.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"a folder that is not empty", []string{"new", full, "--sdk", sdk}, 1, "exists and is not empty"},
		{"a name that is not kebab-case", []string{"new", filepath.Join(t.TempDir(), "My_Rule"), "--sdk", sdk}, 1, "kebab-case"},
		{"an unknown language", []string{"new", filepath.Join(t.TempDir(), "x"), "--lang", "rust", "--sdk", sdk}, 2, "--lang is go or assemblyscript"},
		{"a folder that is not the SDK", []string{"new", filepath.Join(t.TempDir(), "x"), "--sdk", t.TempDir()}, 1, "is not the SDK of a Pixie checkout"},
		{"the server's module as the SDK", []string{"new", filepath.Join(t.TempDir(), "x"), "--sdk", testutil.Root()}, 1, "not github.com/pixie-dev/pixie/sdk"},
		{"no folder", []string{"new"}, 2, "want 1 argument"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := guestCLI(t, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.err) {
				t.Fatalf("exit %d %q; want %d %q", code, errOut, tc.code, tc.err)
			}
			if len(tc.args) > 1 {
				parent := filepath.Dir(tc.args[1])
				ents, _ := os.ReadDir(parent)
				for _, e := range ents {
					if strings.HasSuffix(e.Name(), ".tmp") {
						t.Errorf("left behind %s", e.Name())
					}
				}
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(full, "keep.txt")); err != nil || string(b) != "mine" {
		t.Fatal("the folder's file was touched")
	}
}

func TestGuestBuildAssemblyScriptGuest(t *testing.T) {
	// `pixie guest build guests/block-risky-commands-as -o OUT.wasm`, from the repository.
	src := filepath.Join(testutil.Root(), "guests", "block-risky-commands-as")
	testutil.NPMInstall(t, src)
	out := filepath.Join(t.TempDir(), "OUT.wasm")
	code, stdout, errOut := guestCLI(t, "build", src, "-o", out)
	if code != 0 || !strings.HasPrefix(stdout, "built "+out) {
		t.Fatalf("guest build: %d %s %s", code, stdout, errOut)
	}
	st, err := os.Stat(out)
	if err != nil || st.Size() < 1000 || st.Size() > 1<<20 {
		t.Fatalf("the module: %v %v", st, err)
	}
}

package pet_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/pet"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/bash"
	"github.com/pixie-dev/pixie/runtime/sandbox"
	"github.com/pixie-dev/pixie/runtime/wasm"
)

// The environment values of these tests: the workspace value overrides the global one.
const (
	globalGreeting = "global-greeting-value-1234"
	wsGreeting     = "ws-greeting-s3cr3t-9f8e7d"
	onlyGlobal     = "only-global-value-5678"
)

// executors returns the real bash and WASM executors as one dispatcher.
func executors(t *testing.T) runtime.Dispatcher {
	t.Helper()
	bx, err := bash.New(context.Background(), bash.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bx.Close(context.Background()) })
	wx, err := wasm.New(context.Background(), wasm.Config{PoolSize: -1, CacheDir: testutil.WasmCacheDir(t), Source: &pet.ModuleFiles{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wx.Close(context.Background()) })
	return runtime.Dispatcher{runtime.KindScript: bx, runtime.KindModule: wx}
}

const petScript = `ctx=$(cat)
echo "script greeting=$DSH_PET_GREETING only=$DSH_PET_ONLY_GLOBAL unset=${DSH_PET_NOPE-absent}"
case "$ctx" in *'"selection":"selected text"'*) echo "saw the selection";; esac
case "$ctx" in *'"history":[]'*) echo "history=none";; *'"history":[{'*) echo "history=some";; esac
echo "cwd=$PWD"
echo "stderr sees $DSH_PET_GREETING" >&2
if touch "$PWD/written" 2>/dev/null; then echo "wrote the cwd"; else echo "cwd is read-only"; fi
exit ${EXIT_CODE:-0}
`

func TestExecutorsEndToEnd(t *testing.T) {
	ms, m := newModelServer(t)
	// Generous: the first WASM run compiles the guest, which is slow under -race on a busy machine.
	e := newEnv(t, executors(t), m, pet.Config{RunTimeout: 3 * time.Minute, Helpers: newHelpers(t, m)})
	ctx := context.Background()
	for _, kv := range [][3]string{{"", "GREETING", globalGreeting}, {"w1", "GREETING", wsGreeting}, {"", "ONLY_GLOBAL", onlyGlobal}} {
		if _, err := e.svc.SetEnv(ctx, kv[0], kv[1], kv[2]); err != nil {
			t.Fatal(err)
		}
	}
	cwd := t.TempDir()
	snap := snapshot("session:s1")
	snap.WorkspaceID, snap.Cwd = "w1", cwd
	var views []pet.InvocationView
	invoke := func(t *testing.T, skill string, sn pet.Snapshot) pet.InvocationView {
		t.Helper()
		v, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: skill, Snapshot: sn})
		if err != nil {
			t.Fatalf("invoke %s: %v", skill, err)
		}
		views = append(views, v)
		return v
	}

	t.Run("instructions", func(t *testing.T) {
		register(t, e.svc, skillDir(t, "summarize", "Summarise the selection.", "You summarise what the person selected.\n", nil))
		v := invoke(t, "summarize", snap)
		r := v.Latest()
		if v.Status != pet.StatusSucceeded || r.Executor != pet.KindInstructions || v.Seq != 1 || r.N != 1 {
			t.Fatalf("invocation %+v run %+v", v, r)
		}
		if !strings.HasPrefix(r.Output, `model saw 2 messages; last: Pet invocation #1 of the Skill "summarize"`) {
			t.Fatalf("output %q", r.Output)
		}
		// One model turn (the model answered without tools); the agent's shell tool receives
		// the environment values, so the Run names them, and never their values.
		if r.Usage == nil || r.Usage.InputTokens != 11 || r.Steps != 1 || len(r.ToolCalls) != 0 || r.ExitCode != nil ||
			strings.Join(r.EnvKeys, ",") != "DSH_PET_GREETING,DSH_PET_ONLY_GLOBAL" || r.Sandbox != runtime.PolicyReadOnly {
			t.Fatalf("run %+v", r)
		}
		bodies, reqs := ms.received()
		req := reqs[len(reqs)-1]
		sys := req.Messages[0].Content
		if req.Messages[0].Role != "system" || !strings.HasPrefix(sys, "You are Pixie's Pet executor") ||
			!strings.HasSuffix(sys, "\n\nYou summarise what the person selected.") || !strings.Contains(sys, "The root (the working directory of every tool) is "+cwd) ||
			!strings.Contains(sys, "$DSH_PET_GREETING") || strings.Contains(bodies[len(bodies)-1], wsGreeting) {
			t.Fatalf("system %q", sys)
		}
		for _, tool := range []string{`"name":"list"`, `"name":"read"`, `"name":"search"`, `"name":"shell"`} {
			if !strings.Contains(bodies[len(bodies)-1], tool) {
				t.Fatalf("the agent's tools are not offered (%s): %s", tool, bodies[len(bodies)-1])
			}
		}
		if u := req.Messages[1].Content; !strings.Contains(u, `"selection": "selected text"`) || !strings.Contains(u, `"sessionId": "s1"`) {
			t.Fatalf("user message %q", u)
		}
		// A later invocation of the Task sees the earlier one and its result.
		v2 := invoke(t, "summarize", snap)
		if v2.TaskID != v.TaskID || v2.Seq != 2 {
			t.Fatalf("second invocation %+v", v2)
		}
		_, reqs = ms.received()
		req = reqs[len(reqs)-1]
		if len(req.Messages) != 4 || req.Messages[2].Role != "assistant" || req.Messages[2].Content != r.Output {
			t.Fatalf("history turns %+v", req.Messages)
		}
		if !strings.Contains(v2.Latest().Output, "model saw 4 messages") {
			t.Fatalf("second output %q", v2.Latest().Output)
		}
	})

	t.Run("script", func(t *testing.T) {
		register(t, e.svc, skillDir(t, "tidy", "Tidy up.", "Runs run.sh.", map[string]string{pet.ScriptFile: petScript}))
		v := invoke(t, "tidy", snap)
		r := v.Latest()
		if sandbox.Probe() != nil {
			// No Landlock: the read-only policy cannot be enforced, and the run fails closed.
			if v.Status != pet.StatusFailed || r.Error.Code != errs.Unavailable {
				t.Fatalf("without Landlock %+v", r)
			}
			return
		}
		if v.Status != pet.StatusSucceeded || r.Executor != pet.KindScript || r.ExitCode == nil || *r.ExitCode != 0 {
			t.Fatalf("run %+v", r)
		}
		for _, want := range []string{
			"script greeting=[$DSH_PET_GREETING] only=[$DSH_PET_ONLY_GLOBAL] unset=absent",
			"saw the selection", "history=some", "cwd=" + cwd, "cwd is read-only",
		} {
			if !strings.Contains(r.Output, want) {
				t.Errorf("output lacks %q:\n%s", want, r.Output)
			}
		}
		if r.Stderr != "stderr sees [$DSH_PET_GREETING]" {
			t.Errorf("stderr %q", r.Stderr)
		}
		if strings.Join(r.EnvKeys, ",") != "DSH_PET_GREETING,DSH_PET_ONLY_GLOBAL" {
			t.Errorf("env keys %v", r.EnvKeys)
		}
		if _, err := os.Stat(filepath.Join(cwd, "written")); err == nil {
			t.Error("a read-only Skill wrote into the source cwd")
		}
		// Without a workspace, only global values apply; without a cwd, the script runs in an
		// empty private directory, removed afterwards.
		ind := invoke(t, "tidy", snapshot("independent"))
		out := ind.Latest().Output
		if !strings.Contains(out, "greeting=[$DSH_PET_GREETING]") || !strings.Contains(out, "history=none") || !strings.Contains(out, "/pixie-pet-") {
			t.Errorf("independent output %q", out)
		}
		_, rest, _ := strings.Cut(out, "cwd=")
		runDir, _, _ := strings.Cut(rest, "\n")
		if _, err := os.Stat(runDir); !os.IsNotExist(err) {
			t.Errorf("the run directory %q is left behind: %v", runDir, err)
		}
	})

	t.Run("script exit status", func(t *testing.T) {
		if sandbox.Probe() != nil {
			t.Skip("no Landlock")
		}
		register(t, e.svc, skillDir(t, "fails", "Fails.", "x", map[string]string{pet.ScriptFile: "echo \"bad $DSH_PET_GREETING\" >&2\nexit 3\n"}))
		v := invoke(t, "fails", snap)
		r := v.Latest()
		if v.Status != pet.StatusFailed || *r.ExitCode != 3 || r.Transient || r.Error.Code != errs.Unprocessable ||
			r.Error.Message != "the Skill exited with status 3: bad [$DSH_PET_GREETING]" {
			t.Fatalf("run %+v %+v", r, r.Error)
		}
		if _, err := e.svc.Retry(ctx, v.ID); errs.CodeOf(err) != errs.Conflict || !strings.Contains(err.Error(), "failed permanently") {
			t.Fatalf("retry of a permanent failure: %v", err)
		}
	})

	t.Run("wasm", func(t *testing.T) {
		wasmBody, err := os.ReadFile(testutil.GuestPath(t, "pet-echo-skill"))
		if err != nil {
			t.Fatal(err)
		}
		dir := skillDir(t, "echo", "Echo the invocation.", "A WASM guest.", nil)
		if err := os.WriteFile(filepath.Join(dir, pet.WASMFile), wasmBody, 0o644); err != nil {
			t.Fatal(err)
		}
		register(t, e.svc, dir)
		sn := snap
		sn.Selection = "ask:what is new?"
		v := invoke(t, "echo", sn)
		r := v.Latest()
		if v.Status != pet.StatusSucceeded || r.Executor != pet.KindWASM || *r.ExitCode != 0 {
			t.Fatalf("run %+v %+v", r, r.Error)
		}
		want := `wasm echo #` // seq depends on the earlier subtests
		if !strings.HasPrefix(r.Output, want) || !strings.Contains(r.Output, `in session:s1: title="T1" greeting=[$DSH_PET_GREETING]`) ||
			!strings.Contains(r.Output, "answer=model saw 2 messages; last: Answer briefly. The team greeting is [$DSH_PET_GREETING].") {
			t.Fatalf("output %q", r.Output)
		}
		if v.Seq > 1 && strings.Contains(r.Output, "history=0") {
			t.Fatalf("the guest saw no history: %q", r.Output)
		}
		if len(r.Logs) != 1 || r.Logs[0] != "info: greeting=[$DSH_PET_GREETING]" {
			t.Fatalf("logs %q", r.Logs)
		}
		// The ask went through the gate helper: its prompt shape, the Skill's system prompt.
		_, reqs := ms.received()
		msgs := reqs[len(reqs)-1].Messages
		if !strings.Contains(msgs[0].Content, "called from a Skill that Pet runs") ||
			msgs[1].Content != "Answer briefly. The team greeting is [$DSH_PET_GREETING].\n\n<input>\nwhat is new?\n</input>" {
			t.Fatalf("ask reached the model as %+v", msgs)
		}
		if r.Usage == nil || r.Usage.OutputTokens != 7 || len(r.HelperCalls) != 1 || r.HelperCalls[0].Type != "ask" || r.HelperCalls[0].Usage.InputTokens != 11 {
			t.Fatalf("usage %+v calls %+v", r.Usage, r.HelperCalls)
		}
	})

	t.Run("never leaked", func(t *testing.T) {
		secrets := []string{globalGreeting, wsGreeting, onlyGlobal}
		// Responses.
		raw, _ := json.Marshal(views)
		for _, id := range []string{views[0].TaskID} {
			tv, err := e.svc.Task(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(tv)
			raw = append(raw, b...)
		}
		list, _ := e.svc.ListEnv(ctx, "", true)
		b, _ := json.Marshal(list)
		raw = append(raw, b...)
		diag, _ := e.svc.Diagnostics(ctx)
		b, _ = json.Marshal(diag)
		raw = append(raw, b...)
		// Prompts.
		bodies, _ := ms.received()
		all := string(raw) + strings.Join(bodies, "\n")
		// Records: every Pet key but the environment values themselves.
		n := 0
		err := e.st.View(ctx, func(tx *store.Tx) error {
			return tx.ScanRaw("pet-", store.ScanOptions{}, func(k string, v []byte) error {
				if !strings.HasPrefix(k, "pet-env/") {
					all += k + string(v)
					n++
				}
				return nil
			})
		})
		if err != nil || n < 10 {
			t.Fatalf("scanned %d records: %v", n, err)
		}
		for _, s := range secrets {
			if strings.Contains(all, s) {
				t.Errorf("the value %q leaked", s)
			}
		}
		if len(list) != 3 || list[0].Value != "********" {
			t.Errorf("listing %+v", list)
		}
	})
}

func TestRetryAddsARunAndNeverRetargets(t *testing.T) {
	ms, m := newModelServer(t)
	e := newEnv(t, nil, m, pet.Config{})
	ctx := context.Background()
	register(t, e.svc, skillDir(t, "a", "d", "body", nil))
	ms.fail(1)
	sn := snapshot("workspace:w9")
	v, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "a", Snapshot: sn})
	if err != nil {
		t.Fatal(err)
	}
	r := v.Latest()
	if v.Status != pet.StatusFailed || !r.Transient || r.Error.Code != errs.Upstream || v.Attempts != 1 {
		t.Fatalf("first run %+v %+v", v, r.Error)
	}
	// A new invocation from elsewhere does not change what the retry targets.
	other := snapshot("session:elsewhere")
	other.Title = "other"
	if _, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "a", Snapshot: other}); err != nil {
		t.Fatal(err)
	}
	v2, err := e.svc.Retry(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v2.ID != v.ID || v2.TaskID != v.TaskID || v2.Attempts != 2 || len(v2.Runs) != 2 || v2.Status != pet.StatusSucceeded {
		t.Fatalf("after retry %+v", v2)
	}
	if v2.Runs[0].Status != pet.StatusFailed || v2.Runs[1].N != 2 || v2.Runs[1].Status != pet.StatusSucceeded {
		t.Fatalf("runs %+v", v2.Runs)
	}
	if v2.Snapshot != v.Snapshot || v2.Scope != "workspace:w9" {
		t.Fatalf("snapshot changed: %+v vs %+v", v2.Snapshot, v.Snapshot)
	}
	_, reqs := ms.received()
	if u := reqs[len(reqs)-1].Messages[1].Content; !strings.Contains(u, `"workspaceId": "w9"`) || strings.Contains(u, "elsewhere") {
		t.Fatalf("the retry was re-targeted: %q", u)
	}
	if _, err := e.svc.Retry(ctx, v.ID); errs.CodeOf(err) != errs.Conflict || !strings.Contains(err.Error(), "nothing to retry") {
		t.Fatalf("retry of a success: %v", err)
	}
	if _, err := e.svc.Retry(ctx, "i0000000000000000000000"); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("retry of nothing: %v", err)
	}
}

func TestScriptTimeoutIsTransient(t *testing.T) {
	if sandbox.Probe() != nil {
		t.Skip("no Landlock for the read-only policy")
	}
	e := newEnv(t, executors(t), nil, pet.Config{RunTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	register(t, e.svc, skillDir(t, "slow", "Slow.", "x", map[string]string{pet.ScriptFile: "sleep 10\n"}))
	start := time.Now()
	v, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "slow", Snapshot: snapshot("independent")})
	if err != nil {
		t.Fatal(err)
	}
	if r := v.Latest(); v.Status != pet.StatusFailed || !r.Transient || r.Error.Code != errs.Timeout {
		t.Fatalf("run %+v %+v", r, r.Error)
	}
	if time.Since(start) > 8*time.Second {
		t.Fatal("the run was not stopped at its time limit")
	}
	v2, err := e.svc.Retry(ctx, v.ID)
	if err != nil || len(v2.Runs) != 2 || v2.Runs[1].Error.Code != errs.Timeout {
		t.Fatalf("retry %+v %v", v2, err)
	}
}

func TestInstructionSkillNeedsAModel(t *testing.T) {
	e := newEnv(t, nil, nil, pet.Config{})
	ctx := context.Background()
	register(t, e.svc, skillDir(t, "a", "d", "body", nil))
	_, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "a", Snapshot: snapshot("independent")})
	if errs.CodeOf(err) != errs.Unavailable || !strings.Contains(err.Error(), "no Pixie model") {
		t.Fatalf("invoke: %v", err)
	}
	diag, _ := e.svc.Diagnostics(ctx)
	if diag.Executors[pet.KindInstructions].Available || diag.Executors[pet.KindScript].Available || diag.Executors[pet.KindWASM].Available {
		t.Fatalf("executors %+v", diag.Executors)
	}
}

package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/pixie-dev/pixie/hostfuncs"
	"github.com/pixie-dev/pixie/internal/later"
	"github.com/pixie-dev/pixie/internal/testutil"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/wasm/internal/extismx"
	"github.com/pixie-dev/pixie/sdk/abi"
)

type echoOut struct {
	Target string
	Vars   map[string]string
	Pet    string
	Runs   int
}

func echoRun(t *testing.T, e *testEnv, req runtime.Request) (echoOut, runtime.Result) {
	t.Helper()
	e.push(t, "testdata/echo", "echo")
	req.Ref = "echo"
	res, err := e.run(t, req)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	var out echoOut
	if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
		t.Fatalf("echo output %q: %v", res.Stdout, err)
	}
	return out, res
}

func TestContract(t *testing.T) {
	e := env(t)
	vars := map[string]string{
		abi.VarPoint: abi.PointToolBefore, abi.VarToolName: "Bash", abi.VarToolArgs: `{"command":"ls"}`,
		abi.VarAgent: "root", abi.VarSessionID: "s-1", abi.VarTurn: "3", abi.VarGateName: "g",
	}
	out, res := echoRun(t, e, runtime.Request{Target: "héllo\n", Vars: vars, PetContext: []byte(`{"k":1}`)})
	if out.Target != "héllo\n" || out.Pet != `{"k":1}` || out.Runs != 1 || res.ExitCode != 0 || res.Duration <= 0 {
		t.Fatalf("%+v %+v", out, res)
	}
	if len(out.Vars) != len(vars) {
		t.Fatalf("vars %v", out.Vars)
	}
	for k, v := range vars {
		if out.Vars[k] != v {
			t.Fatalf("%s = %q, want %q", k, out.Vars[k], v)
		}
	}
	for _, code := range []int{0, 10, 11, 1, 2, 77} {
		_, res := echoRun(t, e, runtime.Request{Vars: map[string]string{"EXIT": strconv.Itoa(code)}})
		if res.ExitCode != code {
			t.Fatalf("exit %d, want %d", res.ExitCode, code)
		}
	}
	t.Run("a kind other than module", func(t *testing.T) {
		if _, err := e.x.Run(context.Background(), runtime.Request{Kind: runtime.KindScript, Ref: "echo"}); !errors.Is(err, runtime.ErrUnsupported) {
			t.Fatal(err)
		}
	})
	t.Run("an unknown module", func(t *testing.T) {
		if _, err := e.run(t, runtime.Request{Ref: "no-such-module"}); !errors.Is(err, runtime.ErrNotFound) {
			t.Fatal(err)
		}
	})
	t.Run("by sha256", func(t *testing.T) {
		m, err := e.reg.Get(context.Background(), "echo")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.run(t, runtime.Request{Ref: m.SHA256}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestNoStateLeaksBetweenRuns runs echo, which counts its runs in a package variable, on the
// shared executor's reused instances: each run counts one.
func TestNoStateLeaksBetweenRuns(t *testing.T) {
	e := env(t)
	for i := range 5 {
		out, _ := echoRun(t, e, runtime.Request{Target: strconv.Itoa(i)})
		if out.Runs != 1 || out.Target != strconv.Itoa(i) {
			t.Fatalf("run %d saw %+v: state carried over from an earlier run", i, out)
		}
	}
}

func TestPool(t *testing.T) {
	ctx := context.Background()
	e := env(t)
	e.push(t, "testdata/echo", "echo")
	if err := e.x.Warm(ctx, "echo"); err != nil {
		t.Fatal(err)
	}
	m := e.module(t, "echo")
	if len(m.idle) < DefaultPoolSize || !m.reuse.Load() {
		t.Fatalf("pool holds %d, reuse %v", len(m.idle), m.reuse.Load())
	}
	made, resets := m.made.Load(), m.resets.Load()
	for range 5 {
		echoRun(t, e, runtime.Request{})
	}
	// A healthy instance is reset and reused: every run's instance was reset, and no instance
	// was made for them (the pool's worker may finish one it was making for the shared
	// module meanwhile).
	if m.made.Load() > made+1 || m.resets.Load() != resets+5 {
		t.Fatalf("made %d → %d, resets %d → %d", made, m.made.Load(), resets, m.resets.Load())
	}
	// An instance whose run faulted (trapped, timed out, exited, broke a limit) is closed, never
	// reset and reused; the module keeps serving, from instances made from its snapshot.
	for _, tc := range []struct {
		name, guest string
		req         runtime.Request
		want        error
		text        string
	}{
		{name: "trapped", guest: "fault-trap", want: runtime.ErrTrap},
		{name: "timed out", guest: "fault-loop", req: runtime.Request{Timeout: 200 * time.Millisecond}, want: runtime.ErrTimeout},
		{name: "ran out of memory", guest: "fault-membomb", want: runtime.ErrTrap},
		{name: "wrote output over the cap", guest: "fault-output", want: runtime.ErrOutputTooLarge},
		{name: "made host calls over the cap", guest: "fault-logspam", want: runtime.ErrTrap, text: hostfuncs.ErrHostCallLimit.Error()},
	} {
		t.Run("an instance that "+tc.name+" is never reused", func(t *testing.T) {
			e.push(t, "testdata/"+tc.guest, tc.guest)
			if err := e.x.Warm(ctx, tc.guest); err != nil {
				t.Fatal(err)
			}
			ft := e.module(t, tc.guest)
			if !ft.reuse.Load() {
				t.Fatalf("the module's instances are not reused at all: %s", *ft.why.Load())
			}
			made, resets := ft.made.Load(), ft.resets.Load()
			for range 3 {
				req := tc.req
				req.Ref = tc.guest
				if _, err := e.run(t, req); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
					t.Fatalf("got %v, want %v (%q)", err, tc.want, tc.text)
				}
			}
			if err := e.x.Warm(ctx, tc.guest); err != nil {
				t.Fatal(err)
			}
			if ft.resets.Load() != resets || ft.made.Load() < made+3 {
				t.Fatalf("a faulted instance was reused: made %d → %d, resets %d → %d", made, ft.made.Load(), resets, ft.resets.Load())
			}
			if ft.cloned.Load() == 0 {
				t.Fatal("new instances were not made from the snapshot")
			}
		})
	}
	e.alive(t)
}

// module returns the executor's compiled module for ref.
func (e *testEnv) module(t *testing.T, ref string) *module {
	t.Helper()
	sha, err := e.reg.Resolve(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	e.x.mu.Lock()
	defer e.x.mu.Unlock()
	m := e.x.mods[sha]
	if m == nil {
		t.Fatalf("%s is not compiled", ref)
	}
	return m
}

func TestReadOnlyMount(t *testing.T) {
	e := env(t)
	e.push(t, "testdata/fs-probe", "fs-probe")
	cwd := t.TempDir()
	if err := os.WriteFile(filepath.Join(cwd, "probe.txt"), []byte("from the session"), 0o644); err != nil {
		t.Fatal(err)
	}
	probe := func(t *testing.T, req runtime.Request) map[string]string {
		req.Ref = "fs-probe"
		res, err := e.run(t, req)
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]string
		if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
			t.Fatalf("%q: %v", res.Stdout, err)
		}
		return out
	}
	t.Run("mounted read-only", func(t *testing.T) {
		out := probe(t, runtime.Request{Cwd: cwd, Policy: runtime.PolicyWorkspaceWrite, MountCwd: true})
		if out["cwd"] != MountPath || out["read"] != "from the session" {
			t.Fatalf("%v", out)
		}
		if out["write"] == "ok" || out["writeError"] == "" || out["removeError"] == "" {
			t.Fatalf("the mount is writable: %v", out)
		}
		if _, err := os.Stat(filepath.Join(cwd, "written.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the guest wrote into the session cwd: %v", err)
		}
		if _, err := os.Stat(filepath.Join(cwd, "probe.txt")); err != nil {
			t.Fatalf("the guest removed a file: %v", err)
		}
	})
	t.Run("a mounted run takes a pooled instance, reset and reused after", func(t *testing.T) {
		ctx := context.Background()
		if err := e.x.Warm(ctx, "fs-probe"); err != nil {
			t.Fatal(err)
		}
		m := e.module(t, "fs-probe")
		made, resets := m.made.Load(), m.resets.Load()
		out := probe(t, runtime.Request{Cwd: cwd, Policy: runtime.PolicyReadOnly, MountCwd: true})
		if out["read"] != "from the session" {
			t.Fatalf("%v", out)
		}
		if err := e.x.Warm(ctx, "fs-probe"); err != nil {
			t.Fatal(err)
		}
		if m.made.Load() != made || m.resets.Load() != resets+1 {
			t.Fatalf("made %d → %d, resets %d → %d", made, m.made.Load(), resets, m.resets.Load())
		}
	})
	t.Run("no mount without asking", func(t *testing.T) {
		out := probe(t, runtime.Request{Cwd: cwd, Policy: runtime.PolicyFull})
		if out["read"] != "" || out["readError"] == "" || out["write"] == "ok" || out["removeError"] == "" {
			t.Fatalf("the guest reached a filesystem: %v", out)
		}
	})
	t.Run("a mount needs a policy and a cwd", func(t *testing.T) {
		for _, req := range []runtime.Request{{Cwd: cwd, MountCwd: true}, {Policy: runtime.PolicyReadOnly, MountCwd: true}, {Cwd: "rel", Policy: runtime.PolicyReadOnly, MountCwd: true}} {
			req.Ref = "fs-probe"
			if _, err := e.run(t, req); !errors.Is(err, runtime.ErrPolicyRequired) {
				t.Fatalf("%+v: %v", req, err)
			}
		}
	})
}

func TestLimits(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	small, err := newEnv(ctx, dir, Config{CacheDir: testutil.WasmCacheDir(t), MaxInput: 1000, MaxHostCalls: 5, PoolSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer small.close()
	t.Run("input at the limit", func(t *testing.T) {
		echoRun(t, small, runtime.Request{Target: strings.Repeat("x", 1000)})
	})
	t.Run("input over the limit", func(t *testing.T) {
		small.push(t, "testdata/echo", "echo")
		_, err := small.run(t, runtime.Request{Ref: "echo", Target: strings.Repeat("x", 1001)})
		if !errs.Is(err, errs.TooLarge) {
			t.Fatal(err)
		}
	})
	// echo makes one pixie_context call (the SDK reading the run's context), one pet_context
	// call and LOGS pixie_log calls.
	t.Run("host calls at the limit", func(t *testing.T) {
		h := &helper{}
		echoRun(t, small, runtime.Request{Vars: map[string]string{"LOGS": "3"}, Helper: h})
		if len(h.logs) != 3 || h.logs[2] != "info: line 3" {
			t.Fatalf("logs %q", h.logs)
		}
	})
	t.Run("host calls over the limit", func(t *testing.T) {
		_, err := small.run(t, runtime.Request{Ref: "echo", Vars: map[string]string{"LOGS": "4"}, Helper: &helper{}})
		if !errors.Is(err, runtime.ErrTrap) || !strings.Contains(err.Error(), "host call limit") {
			t.Fatal(err)
		}
		echoRun(t, small, runtime.Request{})
	})
	t.Run("no pool", func(t *testing.T) {
		if m := small.module(t, "echo"); cap(m.idle) != 0 || m.reuse.Load() {
			t.Fatalf("pool of %d, reuse %v", cap(m.idle), m.reuse.Load())
		}
	})
	t.Run("log lines are capped", func(t *testing.T) {
		h := &helper{}
		echoRun(t, env(t), runtime.Request{Vars: map[string]string{"LOGS": "150"}, Helper: h})
		if len(h.logs) != 101 || !strings.Contains(h.logs[100], "100 lines reached") {
			t.Fatalf("%d lines, last %q", len(h.logs), h.logs[len(h.logs)-1])
		}
	})
}

func TestTimeoutDuringHostCall(t *testing.T) {
	e := env(t)
	e.push(t, "testdata/fault-calls", "fault-calls")
	h := &helper{ask: func(abi.AskRequest) (string, error) { time.Sleep(50 * time.Millisecond); return "ok", nil }}
	_, err := e.run(t, runtime.Request{Ref: "fault-calls", Helper: h, Timeout: 120 * time.Millisecond})
	if !errors.Is(err, runtime.ErrTimeout) {
		t.Fatal(err)
	}
	e.alive(t)
}

// TestRestartUsesDiskCache restarts an executor on the same cache directory: the second start
// adds nothing to the cache (it recompiles nothing). Times are logged, and measured by
// BenchmarkColdStart.
func TestRestartUsesDiskCache(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := Config{CacheDir: filepath.Join(dir, "cache")}
	start := func() time.Duration {
		e, err := newEnv(ctx, dir, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer e.close()
		e.push(t, "block-risky-commands", "block-risky-commands")
		t0 := time.Now()
		if err := e.x.Warm(ctx, "block-risky-commands"); err != nil {
			t.Fatal(err)
		}
		return time.Since(t0)
	}
	first := start()
	before := cacheFiles(t, cfg.CacheDir)
	if len(before) == 0 {
		t.Fatal("nothing was cached on disk")
	}
	second := start()
	after := cacheFiles(t, cfg.CacheDir)
	if len(after) != len(before) {
		t.Fatalf("the restart compiled again: %d cache files, then %d", len(before), len(after))
	}
	for name, mod := range before {
		if !after[name].Equal(mod) {
			t.Fatalf("%s was rewritten", name)
		}
	}
	t.Logf("warm-up after upload %s, after restart %s", first, second)
}

func cacheFiles(t *testing.T, dir string) map[string]time.Time {
	out := map[string]time.Time{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			out[p] = info.ModTime()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// riskyModule is an executor with slots run slots over the block-risky-commands guest (as
// module "m", warm), the module itself, and a run of it at tool-before stopping riskyTarget;
// the test's cleanup releases the module and closes the executor.
func riskyModule(t *testing.T, slots int) (*Executor, *module, runtime.Request) {
	t.Helper()
	ctx := context.Background()
	wasm := testutil.Guest(t, "block-risky-commands")
	x, err := New(ctx, Config{CacheDir: testutil.WasmCacheDir(t), MaxConcurrent: slots, Source: memSource{wasm}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close(ctx) })
	if err := x.Warm(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	m, err := x.module(ctx, "00000000000000000000000000000000000000000000000000000000000000aa")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.release)
	return x, m, runtime.Request{Kind: runtime.KindModule, Ref: "m", Target: riskyTarget,
		Vars: map[string]string{abi.VarPoint: abi.PointToolBefore, abi.VarToolName: "Bash"}}
}

// TestPoolKeepsRunsInFlight runs eight callers at once, each holding its answer a moment after
// the run (as the server does while it writes the answer: internal/later), so that more runs
// hold an instance than there are run slots: the pool keeps the instances they give back
// instead of closing them and cloning new ones for the next runs.
func TestPoolKeepsRunsInFlight(t *testing.T) {
	ctx := context.Background()
	x, m, req := riskyModule(t, 2)
	made := m.made.Load()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				r, answered := req, &later.Queue{}
				r.After = answered
				if _, err := x.Run(ctx, r); err != nil {
					t.Error(err)
				}
				time.Sleep(300 * time.Microsecond) // the answer being written
				answered.Release()
			}
		})
	}
	wg.Wait()
	if n := m.made.Load() - made; n > int64(2*cap(m.idle)) {
		t.Fatalf("%d instances made for 400 runs by 8 callers (the pool keeps %d)", n, cap(m.idle))
	}
}

// TestRecycleAfterTheAnswer: with runtime.Request.After set, a run leaves its instance's reset
// and return to the pool to it (the caller's answer goes out first); without it they happen
// before Run returns.
func TestRecycleAfterTheAnswer(t *testing.T) {
	ctx := context.Background()
	x, m, req := riskyModule(t, 1)

	resets := m.resets.Load()
	if _, err := x.Run(ctx, req); err != nil {
		t.Fatal(err)
	}
	if got := m.resets.Load(); got != resets+1 {
		t.Fatalf("without After: resets %d → %d, want one before Run returns", resets, got)
	}

	held := &later.Queue{}
	r := req
	r.After = held
	if _, err := x.Run(ctx, r); err != nil {
		t.Fatal(err)
	}
	if got := m.resets.Load(); got != resets+1 {
		t.Fatalf("with After: the instance was reset (%d → %d) before the answer", resets+1, got)
	}
	held.Release()
	if got := m.resets.Load(); got != resets+2 {
		t.Fatalf("with After: resets %d → %d after the answer, want one more", resets+1, got)
	}
}

// TestKernelCallsReuseFunctions checks that a guest's calls into the kernel through Extism's
// env module (extismx.ReplaceEnv) reuse the instance's functions: the first run finds alloc
// and output_set once, the next run on the reset instance calls the same ones, and outside a
// call into an instance none is handed out.
func TestKernelCallsReuseFunctions(t *testing.T) {
	e := env(t)
	e.push(t, "block-risky-commands", "block-risky-commands")
	ctx := context.Background()
	vars := map[string]string{abi.VarPoint: abi.PointToolBefore, abi.VarToolName: "Bash"}
	if res, err := e.run(t, runtime.Request{Ref: "block-risky-commands", Target: riskyTarget, Vars: vars}); err != nil || res.ExitCode != abi.ExitConclude {
		t.Fatalf("%+v %v", res, err)
	}
	m := e.module(t, "block-risky-commands")
	inst, err := m.take(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer inst.close()
	call := func() {
		t.Helper()
		run := hostfuncs.NewRun(nil, nil, hostfuncs.Limits{})
		run.SetContext(riskyTarget, vars)
		inst.p.Config = vars
		rc, out, err := inst.call(hostfuncs.WithRun(ctx, run), abi.EntryGate, []byte(riskyTarget))
		if err != nil || rc != abi.ExitConclude || !strings.Contains(string(out), `"verdict":"stop"`) {
			t.Fatalf("%d %q %v", rc, out, err)
		}
	}
	index := func(name string) int { return slices.Index(extismx.Forwarded[:], name) }
	call()
	alloc, outputSet := inst.kfwd[index("alloc")], inst.kfwd[index("output_set")]
	if alloc == nil || outputSet == nil {
		t.Fatalf("the run did not keep the kernel's functions: alloc %v, output_set %v", alloc, outputSet)
	}
	if err := inst.reset(); err != nil {
		t.Fatal(err)
	}
	call()
	if inst.kfwd[index("alloc")] != alloc || inst.kfwd[index("output_set")] != outputSet {
		t.Fatal("the second run looked the kernel's functions up again")
	}
	if f := kernelFunc(inst.callContext(ctx), index("alloc")); f != alloc {
		t.Fatal("kernelFunc does not answer the instance's function")
	}
	if f := kernelFunc(ctx, index("alloc")); f != nil {
		t.Fatal("kernelFunc answered outside a call into an instance")
	}
}

package wasm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/hostfuncs"
	"github.com/pixie-dev/pixie/internal/loadbench"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// statefulReport is what guests/testdata/stateful reports of the state it found.
type statefulReport struct {
	Counter   int    `json:"counter"`
	Seen      int    `json:"seen"`
	Last      string `json:"last"`
	LeftOpen  string `json:"leftOpen"`
	LeftErr   string `json:"leftOpenError"`
	Var       string `json:"var"`
	FD        int    `json:"fd"`
	OpenError string `json:"openError"`
}

// TestIsolation runs the stateful probe (a package variable, a Go map, heap bytes, a file left
// open on the /work mount, an Extism variable: each set by every run) many times on reused
// instances, in two sessions with their own cwd, mounted and not: no run ever finds anything an
// earlier run left, a file left open on one session's cwd is never readable by a later run,
// every run gets the descriptor number a fresh instance gets, and the instances were reused
// (reset), not made anew. It does so with write tracking and with the reset that copies the
// whole snapshot back. The WAT probe (a mutable global and a memory cell) always skips.
func TestIsolation(t *testing.T) {
	for _, untracked := range []bool{false, true} {
		t.Run(fmt.Sprintf("untracked=%v", untracked), func(t *testing.T) {
			ctx := context.Background()
			wasm := testutil.Guest(t, "testdata/stateful")
			sum := sha256.Sum256(wasm)
			x, err := New(ctx, Config{CacheDir: testutil.WasmCacheDir(t), Source: &fixedSource{sha: hex.EncodeToString(sum[:]), wasm: wasm}})
			if err != nil {
				t.Fatal(err)
			}
			x.untracked = untracked
			defer x.Close(ctx)
			cwds := map[string]string{}
			for _, s := range []string{"A", "B"} {
				cwds[s] = t.TempDir()
				if err := os.WriteFile(filepath.Join(cwds[s], "secret.txt"), []byte(s+"'s secret"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// What a fresh instance does, for the descriptor number.
			fresh, err := New(ctx, Config{CacheDir: testutil.WasmCacheDir(t), PoolSize: -1, Source: &fixedSource{sha: hex.EncodeToString(sum[:]), wasm: wasm}})
			if err != nil {
				t.Fatal(err)
			}
			defer fresh.Close(ctx)
			run := func(x *Executor, session string, mount bool, target string) statefulReport {
				t.Helper()
				req := runtime.Request{Kind: runtime.KindModule, Ref: "stateful", Target: target,
					Vars: map[string]string{abi.VarSessionID: session}, Policy: runtime.PolicyReadOnly}
				if mount {
					req.Cwd, req.MountCwd = cwds[session], true
				}
				res, err := x.Run(ctx, req)
				if err != nil || res.ExitCode != 0 {
					t.Fatalf("%+v %v", res, err)
				}
				var rep statefulReport
				if err := json.Unmarshal([]byte(res.Stdout), &rep); err != nil {
					t.Fatalf("%s: %v", res.Stdout, err)
				}
				return rep
			}
			want := run(fresh, "A", true, "first").FD
			if want < 3 {
				t.Fatalf("a fresh instance opened descriptor %d", want)
			}
			if err := x.Warm(ctx, "stateful"); err != nil {
				t.Fatal(err)
			}
			m, err := x.module(ctx, hex.EncodeToString(sum[:]))
			if err != nil {
				t.Fatal(err)
			}
			defer m.release()
			if !m.reuse.Load() {
				t.Fatalf("the module is not reused: %s", *m.why.Load())
			}
			resets := m.resets.Load()
			for i, step := range []struct {
				session string
				mount   bool
			}{{"A", true}, {"A", true}, {"B", true}, {"A", false}, {"B", true}, {"B", false}, {"A", true}, {"B", true}} {
				rep := run(x, step.session, step.mount, fmt.Sprintf("run %d of %s", i, step.session))
				if rep.Counter != 0 || rep.Seen != 0 || rep.Last != "" || rep.Var != "" || rep.LeftOpen != "" || rep.LeftErr != "" {
					t.Fatalf("run %d (%s) found an earlier run's state: %+v", i, step.session, rep)
				}
				if step.mount && rep.FD != want {
					t.Fatalf("run %d opened descriptor %d; a fresh instance opens %d", i, rep.FD, want)
				}
				if !step.mount && rep.OpenError == "" {
					t.Fatalf("run %d without the mount opened a file: %+v", i, rep)
				}
			}
			if m.resets.Load() < resets+6 {
				t.Fatalf("only %d resets for 8 runs: instances were not reused", m.resets.Load()-resets)
			}
		})
	}
	t.Run("stateful.wat always skips", func(t *testing.T) {
		ctx := context.Background()
		wasm := watModule(t, "stateful")
		sum := sha256.Sum256(wasm)
		x, err := New(ctx, Config{CacheDir: t.TempDir(), Source: &fixedSource{sha: hex.EncodeToString(sum[:]), wasm: wasm}})
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close(ctx)
		for i := range 20 {
			res, err := x.Run(ctx, runtime.Request{Kind: runtime.KindModule, Ref: "m"})
			if err != nil || res.ExitCode != abi.ExitSkip {
				t.Fatalf("run %d: %+v %v", i, res, err)
			}
		}
		m, _ := x.module(ctx, hex.EncodeToString(sum[:]))
		defer m.release()
		if !m.reuse.Load() || m.resets.Load() < 18 {
			t.Fatalf("reuse %v, %d resets", m.reuse.Load(), m.resets.Load())
		}
	})
}

// TestResetRestoresExactly runs guests on one instance and checks after each reset that its
// guest and kernel memories, sizes and globals are byte for byte its snapshot.
func TestResetRestoresExactly(t *testing.T) {
	e := env(t)
	ctx := context.Background()
	for _, g := range []string{"block-risky-commands", "testdata/stateful", "testdata/echo"} {
		t.Run(g, func(t *testing.T) {
			name := filepath.Base(g)
			e.push(t, g, name)
			if err := e.x.Warm(ctx, name); err != nil {
				t.Fatal(err)
			}
			m := e.module(t, name)
			inst, err := m.take(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer inst.close()
			s := inst.snap
			for r := range 3 {
				run := hostfuncs.NewRun(nil, nil, hostfuncs.Limits{})
				vars := map[string]string{abi.VarPoint: abi.PointToolBefore, abi.VarToolName: "Bash", "LOGS": "2"}
				target := fmt.Sprintf(`{"command":"rm -rf /","n":%d}`, r)
				run.SetContext(target, vars)
				inst.p.Config = vars
				if _, _, err := inst.call(hostfuncs.WithRun(ctx, run), abi.EntryGate, []byte(target)); err != nil {
					t.Fatal(err)
				}
				if err := inst.reset(); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(inst.gmem.buf[:inst.gmem.len], s.guest.bytes()) || inst.guest.Memory().Size() != uint32(s.guest.len()) {
					t.Fatalf("run %d: the guest's memory is not the snapshot's after the reset", r)
				}
				if !bytes.Equal(inst.kmemory.buf[:inst.kmemory.len], s.kernel.bytes()) || inst.kmem.Size() != uint32(s.kernel.len()) {
					t.Fatalf("run %d: the kernel's memory is not the snapshot's after the reset", r)
				}
				for k, gl := range inst.globals {
					if gl.Get() != s.globals[k] {
						t.Fatalf("run %d: global %d is %d, the snapshot's %d", r, k, gl.Get(), s.globals[k])
					}
				}
			}
		})
	}
}

// TestTwinCasesOnResetInstances runs the twin table (loadbench.TwinCases: every stop reason, the
// unclear and skipped cases) through block-risky-commands and its AssemblyScript twin, on one
// executor whose single instance is reset after every run (each case three times) and on one
// that makes a fresh instance for every run: every run decides the same as the fresh one, the
// stop and skip cases as the table says, and the reused executor made no instance after the
// first.
func TestTwinCasesOnResetInstances(t *testing.T) {
	ctx := context.Background()
	judge := func(req abi.JudgeRequest) (abi.JudgeResponse, error) { return boolAnswer(req, 0.9), nil }
	for _, guest := range []string{"block-risky-commands", "block-risky-commands-as"} {
		t.Run(guest, func(t *testing.T) {
			wasm := testutil.Guest(t, guest)
			sum := sha256.Sum256(wasm)
			src := &fixedSource{sha: hex.EncodeToString(sum[:]), wasm: wasm}
			reused, err := New(ctx, Config{CacheDir: testutil.WasmCacheDir(t), PoolSize: 1, MaxConcurrent: 1, Source: src})
			if err != nil {
				t.Fatal(err)
			}
			defer reused.Close(ctx)
			fresh, err := New(ctx, Config{CacheDir: testutil.WasmCacheDir(t), PoolSize: -1, Source: src})
			if err != nil {
				t.Fatal(err)
			}
			defer fresh.Close(ctx)
			if err := reused.Warm(ctx, guest); err != nil {
				t.Fatal(err)
			}
			m, err := reused.module(ctx, src.sha)
			if err != nil {
				t.Fatal(err)
			}
			defer m.release()
			if !m.reuse.Load() {
				t.Fatalf("the module is not reused: %s", *m.why.Load())
			}
			made, resets := m.made.Load(), m.resets.Load()
			runs := 0
			for _, c := range loadbench.TwinCases {
				req := runtime.Request{Kind: runtime.KindModule, Ref: guest, Target: c.Args,
					Vars: map[string]string{abi.VarPoint: abi.PointToolBefore, abi.VarToolName: c.Tool}}
				req.Helper = &helper{judge: judge, ask: func(abi.AskRequest) (string, error) { return "yes", nil }}
				want, err := fresh.Run(ctx, req)
				if err != nil {
					t.Fatalf("%s on a fresh instance: %v", c.Name, err)
				}
				switch c.Want.Verdict {
				case "stop":
					if want.ExitCode != abi.ExitConclude || !strings.Contains(want.Stdout, c.Want.Reason) {
						t.Fatalf("%s: exit %d, %q; want a stop with %q", c.Name, want.ExitCode, want.Stdout, c.Want.Reason)
					}
				case "skip":
					if want.ExitCode != abi.ExitSkip {
						t.Fatalf("%s: exit %d, want a skip", c.Name, want.ExitCode)
					}
				}
				for i := range 3 {
					req.Helper = &helper{judge: judge, ask: func(abi.AskRequest) (string, error) { return "yes", nil }}
					got, err := reused.Run(ctx, req)
					runs++
					if err != nil || got.ExitCode != want.ExitCode || got.Stdout != want.Stdout {
						t.Fatalf("%s, run %d on a reset instance: exit %d %q (%v); a fresh instance: exit %d %q",
							c.Name, i, got.ExitCode, got.Stdout, err, want.ExitCode, want.Stdout)
					}
				}
			}
			if m.made.Load() != made || m.resets.Load() != resets+int64(runs) {
				t.Fatalf("made %d → %d, resets %d → %d for %d runs: not every run was on a reset instance",
					made, m.made.Load(), resets, m.resets.Load(), runs)
			}
		})
	}
}

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
	"testing"

	"github.com/pixie-dev/pixie/hostfuncs"
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
			x, err := New(ctx, Config{CacheDir: testutil.WasmCacheDir(t)}, &fixedSource{sha: hex.EncodeToString(sum[:]), wasm: wasm})
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
			fresh, err := New(ctx, Config{CacheDir: testutil.WasmCacheDir(t), PoolSize: -1}, &fixedSource{sha: hex.EncodeToString(sum[:]), wasm: wasm})
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
		x, err := New(ctx, Config{CacheDir: t.TempDir()}, &fixedSource{sha: hex.EncodeToString(sum[:]), wasm: wasm})
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
				if !bytes.Equal(inst.gmem.buf[:inst.gmem.len], s.guest) || inst.guest.Memory().Size() != uint32(len(s.guest)) {
					t.Fatalf("run %d: the guest's memory is not the snapshot's after the reset", r)
				}
				if !bytes.Equal(inst.kmemory.buf[:inst.kmemory.len], s.kernel) || inst.kmem.Size() != uint32(len(s.kernel)) {
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

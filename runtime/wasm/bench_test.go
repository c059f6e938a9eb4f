package wasm

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/hostfuncs"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// reportLatency reports p50 and p99 of the samples in microseconds.
func reportLatency(b *testing.B, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	q := func(p float64) float64 {
		return float64(samples[int(p*float64(len(samples)-1))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
}

var riskyTarget = `{"command":"rm -rf ~/","description":"clean up"}`

// BenchmarkRunBlockRisky runs the block-risky-commands guest concluding without the model,
// through the executor with a warm pool: between runs (timer stopped) the pool is refilled,
// as it is between an agent's tool calls.
func BenchmarkRunBlockRisky(b *testing.B) {
	e := env(b)
	e.push(b, "block-risky-commands", "block-risky-commands")
	ctx := context.Background()
	req := runtime.Request{Kind: runtime.KindModule, Ref: "block-risky-commands", Target: riskyTarget,
		Vars: map[string]string{abi.VarPoint: abi.PointToolBefore, abi.VarToolName: "Bash"}}
	samples := make([]time.Duration, 0, b.N)
	for b.Loop() {
		b.StopTimer()
		if err := e.x.Warm(ctx, req.Ref); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		res, err := e.x.Run(ctx, req)
		samples = append(samples, time.Since(t0))
		if err != nil || res.ExitCode != abi.ExitConclude {
			b.Fatalf("%+v %v", res, err)
		}
	}
	reportLatency(b, samples)
}

// BenchmarkRunBlockRiskyBash runs the bash twin on the same input (a plain bash process, no
// sandbox), for comparison at the engine level; the gate benchmark compares over HTTP.
func BenchmarkRunBlockRiskyBash(b *testing.B) {
	script := filepath.Join(testutil.Root(), "guests", "block-risky-commands", "block-risky-commands.sh")
	samples := make([]time.Duration, 0, b.N)
	for b.Loop() {
		t0 := time.Now()
		cmd := exec.Command("bash", script)
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "PIXIE_TOOL_NAME=Bash", "PIXIE_POINT=tool-before"}
		cmd.Stdin = strings.NewReader(riskyTarget)
		err := cmd.Run()
		samples = append(samples, time.Since(t0))
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != abi.ExitConclude {
			b.Fatalf("bash: %v", err)
		}
	}
	reportLatency(b, samples)
}

// BenchmarkColdStart measures a module's first run in a fresh executor: compile (or load from
// the disk cache), instantiate, initialise, run.
func BenchmarkColdStart(b *testing.B) {
	wasm := testutil.Guest(b, "block-risky-commands")
	ctx := context.Background()
	warmCache := b.TempDir()
	prime, err := New(ctx, Config{CacheDir: warmCache, PoolSize: -1, Source: memSource{wasm}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := prime.Run(ctx, runtime.Request{Kind: runtime.KindModule, Ref: "m"}); err != nil {
		b.Fatal(err)
	}
	prime.Close(ctx)
	for _, tc := range []struct {
		name  string
		cache func() string
	}{
		{"no-disk-cache", func() string { return "" }},
		{"disk-cache", func() string { return warmCache }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				x, err := New(ctx, Config{CacheDir: tc.cache(), PoolSize: -1, Source: memSource{wasm}})
				if err != nil {
					b.Fatal(err)
				}
				res, err := x.Run(ctx, runtime.Request{Kind: runtime.KindModule, Ref: "m", Target: riskyTarget,
					Vars: map[string]string{abi.VarToolName: "Bash"}})
				if err != nil || res.ExitCode != abi.ExitConclude {
					b.Fatalf("%+v %v", res, err)
				}
				b.StopTimer()
				x.Close(ctx)
				b.StartTimer()
			}
		})
	}
}

// memSource serves one module body under any name.
type memSource struct{ wasm []byte }

func (s memSource) Resolve(context.Context, string) (string, error) {
	return "00000000000000000000000000000000000000000000000000000000000000aa", nil
}
func (s memSource) Load(context.Context, string) ([]byte, error) { return s.wasm, nil }

// BenchmarkMemory10Modules loads 10 modules with warm pools (the defaults) into one executor
// and reports the process's resident set size.
func BenchmarkMemory10Modules(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	e, err := newEnv(ctx, dir, Config{CacheDir: env(b).dir + "/cache"})
	if err != nil {
		b.Fatal(err)
	}
	defer e.close()
	guests := []string{"only-search-tools", "measure-subtitle", "translate-check", "claim-check", "list-changed-files",
		"block-risky-commands", "testdata/echo", "testdata/fault-calls", "testdata/fault-output", "testdata/fs-probe"}
	for _, g := range guests {
		e.push(b, g, strings.ReplaceAll(strings.TrimPrefix(g, "testdata/"), "/", "-"))
	}
	for b.Loop() {
		for _, g := range guests {
			if err := e.x.Warm(ctx, strings.TrimPrefix(g, "testdata/")); err != nil {
				b.Fatal(err)
			}
		}
	}
	debug.FreeOSMemory()
	b.ReportMetric(float64(len(e.x.mods)), "modules")
	b.ReportMetric(testutil.RSSMiB(b, 0), "rss-MiB")
}

// BenchmarkReset measures what isolation costs, per guest language (the same rule in Go and in
// AssemblyScript, concluding on rm -rf ~/):
//
//   - reset: a run's call on a reused instance, then the instance's reset to the module's
//     snapshot (reset.go); ns/op is both, call-µs and reset-µs the p50 of each alone,
//     copied-KiB what the reset copied back. With write tracking (the default where the
//     kernel has userfaultfd's asynchronous write protection: Linux 6.7) and without
//     (untracked: the whole snapshot is copied back).
//   - clone: making a new instance from the snapshot (instantiate, copy the snapshot in),
//     what the pool pays for an instance that trapped or timed out;
//   - init: instantiating and initialising one (the guest runtime's start, pixie_init), what
//     every run paid before instances were reset and reused.
func BenchmarkReset(b *testing.B) {
	ctx := context.Background()
	for _, g := range languageGuests {
		wasm := testutil.Guest(b, g.guest)
		module := func(b *testing.B, cfg Config, untracked bool) *module {
			cfg.CacheDir = testutil.WasmCacheDir(b)
			cfg.Source = memSource{wasm}
			x, err := New(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			x.untracked = untracked
			b.Cleanup(func() { x.Close(ctx) })
			if err := x.Warm(ctx, "m"); err != nil {
				b.Fatal(err)
			}
			m, err := x.module(ctx, "00000000000000000000000000000000000000000000000000000000000000aa")
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(m.release)
			return m
		}
		for _, untracked := range []bool{false, true} {
			name := g.lang + "/reset"
			if untracked {
				name += "-untracked"
			}
			b.Run(name, func(b *testing.B) {
				m := module(b, Config{}, untracked)
				if !m.reuse.Load() {
					b.Fatalf("the module is not reused: %s", *m.why.Load())
				}
				inst, err := m.take(ctx)
				if err != nil {
					b.Fatal(err)
				}
				defer inst.close()
				vars := map[string]string{abi.VarPoint: abi.PointToolBefore, abi.VarToolName: "Bash"}
				calls := make([]time.Duration, 0, b.N)
				resets := make([]time.Duration, 0, b.N)
				copied := 0
				for b.Loop() {
					run := hostfuncs.NewRun(nil, nil, hostfuncs.Limits{})
					run.SetContext(riskyTarget, vars)
					inst.p.Config = vars
					t0 := time.Now()
					rc, _, err := inst.call(hostfuncs.WithRun(ctx, run), abi.EntryGate, []byte(riskyTarget))
					t1 := time.Now()
					if err != nil || rc != abi.ExitConclude {
						b.Fatalf("exit %d: %v", rc, err)
					}
					if err := inst.reset(); err != nil {
						b.Fatal(err)
					}
					resets = append(resets, time.Since(t1))
					calls = append(calls, t1.Sub(t0))
					copied += inst.copied
				}
				slices.Sort(calls)
				slices.Sort(resets)
				b.ReportMetric(float64(calls[len(calls)/2].Nanoseconds())/1e3, "call-µs")
				b.ReportMetric(float64(resets[len(resets)/2].Nanoseconds())/1e3, "reset-µs")
				b.ReportMetric(float64(copied)/1024/float64(len(resets)), "copied-KiB")
			})
		}
		for _, tc := range []struct {
			name string
			cfg  Config
		}{{"clone", Config{}}, {"init", Config{PoolSize: -1}}} {
			b.Run(g.lang+"/"+tc.name, func(b *testing.B) {
				m := module(b, tc.cfg, false)
				if tc.name == "clone" && (m.snap.Load() == nil || !m.snap.Load().cloneable) {
					b.Fatal("the module has no snapshot to clone")
				}
				for b.Loop() {
					inst, err := m.newInstance(ctx)
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					if tc.name == "clone" && !inst.cloned {
						b.Fatal("the instance was not cloned")
					}
					inst.close()
					b.StartTimer()
				}
			})
		}
	}
}

package wasm

import (
	"context"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/wasm/internal/extismx"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// languageGuests are the same rule in each guest language: block-risky-commands (Go) and its
// AssemblyScript twin.
var languageGuests = []struct{ lang, guest string }{
	{"go", "block-risky-commands"},
	{"assemblyscript", "block-risky-commands-as"},
}

// BenchmarkLanguages measures the same rule, written in Go and in AssemblyScript, as a user
// meets it: runs sent back to back through the executor with its default pool, the timer never
// stopped, so each run's share of the instances made for it (the pool's refills, and a run that
// finds the pool empty) is in its cost.
//
//   - run-1: one caller; ns/op is the per-run cost, p50/p99 its latency, runs/s the sustained
//     throughput.
//   - run-8: eight callers at once: runs/s and latency under load.
//   - instance: making one ready instance (instantiate and pixie_init): ns/op; the module's
//     size; the guest's linear memory per instance after a run (wasm-KiB); and the resident
//     memory 32 ready instances add to the process, per instance (rss-KiB).
func BenchmarkLanguages(b *testing.B) {
	ctx := context.Background()
	req := runtime.Request{Kind: runtime.KindModule, Ref: "m", Target: riskyTarget,
		Vars: map[string]string{abi.VarPoint: abi.PointToolBefore, abi.VarToolName: "Bash"}}
	for _, g := range languageGuests {
		wasm := testutil.Guest(b, g.guest)
		newX := func(b *testing.B, cfg Config) *Executor {
			cfg.CacheDir = testutil.WasmCacheDir(b)
			cfg.Source = memSource{wasm}
			x, err := New(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { x.Close(ctx) })
			if err := x.Warm(ctx, "m"); err != nil {
				b.Fatal(err)
			}
			return x
		}
		run := func(b *testing.B, x *Executor) time.Duration {
			t0 := time.Now()
			res, err := x.Run(ctx, req)
			if err != nil || res.ExitCode != abi.ExitConclude {
				b.Fatalf("%+v %v", res, err)
			}
			return time.Since(t0)
		}
		b.Run(g.lang+"/run-1", func(b *testing.B) {
			x := newX(b, Config{})
			samples := make([]time.Duration, 0, b.N)
			start := time.Now()
			for b.Loop() {
				samples = append(samples, run(b, x))
			}
			b.ReportMetric(float64(len(samples))/time.Since(start).Seconds(), "runs/s")
			reportLatency(b, samples)
		})
		b.Run(g.lang+"/run-8", func(b *testing.B) {
			x := newX(b, Config{})
			var mu sync.Mutex
			samples := make([]time.Duration, 0, b.N)
			start := time.Now()
			var wg sync.WaitGroup
			next := make(chan struct{})
			for range 8 {
				wg.Go(func() {
					for range next {
						d := run(b, x)
						mu.Lock()
						samples = append(samples, d)
						mu.Unlock()
					}
				})
			}
			for b.Loop() {
				next <- struct{}{}
			}
			close(next)
			wg.Wait()
			b.ReportMetric(float64(len(samples))/time.Since(start).Seconds(), "runs/s")
			reportLatency(b, samples)
		})
		b.Run(g.lang+"/instance", func(b *testing.B) {
			x := newX(b, Config{PoolSize: -1})
			m, err := x.module(ctx, "00000000000000000000000000000000000000000000000000000000000000aa")
			if err != nil {
				b.Fatal(err)
			}
			defer m.release()
			for b.Loop() {
				inst, err := m.newInstance(ctx)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				inst.close()
				b.StartTimer()
			}
			b.StopTimer()
			// Linear memory after a run, and what ready instances cost the process.
			inst, err := m.newInstance(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := inst.call(ctx, abi.EntryGate, []byte(riskyTarget)); err != nil {
				b.Fatal(err)
			}
			if gm, err := extismx.MainModule(inst.p); err == nil && gm.Memory() != nil {
				b.ReportMetric(float64(gm.Memory().Size())/1024, "wasm-KiB")
			}
			inst.close()
			const n = 32
			debug.FreeOSMemory()
			before := testutil.RSSMiB(b, 0)
			insts := make([]*instance, 0, n)
			for range n {
				inst, err := m.newInstance(ctx)
				if err != nil {
					b.Fatal(err)
				}
				insts = append(insts, inst)
			}
			debug.FreeOSMemory()
			after := testutil.RSSMiB(b, 0)
			for _, inst := range insts {
				inst.close()
			}
			b.ReportMetric((after-before)*1024/n, "rss-KiB")
			b.ReportMetric(float64(len(wasm))/1024, "module-KiB")
		})
	}
}

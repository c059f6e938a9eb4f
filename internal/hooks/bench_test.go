package hooks

import (
	"context"
	"sort"
	"testing"
	"time"
)

// BenchmarkServiceHandle measures the adapter in process, without HTTP: a PreToolUse that the
// block-risky-commands WASM guest denies (map, turn, gate evaluation with its synced record,
// render), and a PostToolUse under a preset without gates that carries a hint (take, confirm). Each
// reports p50 and p99 in milliseconds.
func BenchmarkServiceHandle(b *testing.B) {
	s := newStack(b)
	ctx := context.Background()
	pre := input(b, "codex_pre_tool_use", map[string]any{"session_id": "bench-pre"})
	post := input(b, "post_tool_use_text", map[string]any{"session_id": "bench-post"})
	run := func(b *testing.B, preset string, in []byte, before func(), check func(Output) bool) {
		var lat []time.Duration
		for i := 0; i < b.N; i++ {
			before()
			t0 := time.Now()
			var out Output
			if err := s.svc.Handle(ctx, Call{Preset: preset}, in, func(o Output) error { out = o; return nil }); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
			if !check(out) {
				b.Fatalf("unexpected answer %s", out.Marshal())
			}
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
		b.ReportMetric(q(0.50), "p50-ms")
		b.ReportMetric(q(0.99), "p99-ms")
	}
	b.Run("PreToolUse-wasm-deny", func(b *testing.B) {
		run(b, "p", pre, func() {}, func(o Output) bool {
			return o.HookSpecificOutput != nil && o.HookSpecificOutput.PermissionDecision == "deny"
		})
	})
	b.Run("PostToolUse-hint", func(b *testing.B) {
		// A preset without gates: only the adapter and the hint queue.
		run(b, "no-gates", post, func() {
			b.StopTimer()
			if _, err := s.hints.Put(ctx, "bench-post", "keep going"); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}, func(o Output) bool {
			return o.HookSpecificOutput != nil && o.HookSpecificOutput.AdditionalContext != ""
		})
	})
}

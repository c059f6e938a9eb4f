package gate

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/bash"
)

// reportLatency reports the p50 and p99 of per-operation timings in milliseconds.
func reportLatency(b *testing.B, lat []time.Duration) {
	b.Helper()
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) float64 {
		i := int(p * float64(len(lat)-1))
		return float64(lat[i].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

// BenchmarkEvaluate measures Service.Evaluate in-process for a gate whose bash script
// concludes (exit 11: no model call) and one whose script skips (exit 10), through the real
// bash executor (full policy: no sandbox re-exec) and a real Badger store (each run writes its
// record with a synced commit).
func BenchmarkEvaluate(b *testing.B) {
	for _, c := range []struct{ name, script string }{
		{"script-exit11", "#!/bin/bash\nprintf '{\"verdict\":\"stop\",\"reason\":\"no title\"}'; exit 11\n"},
		{"script-exit10", "#!/bin/bash\nexit 10\n"},
	} {
		b.Run(c.name, func(b *testing.B) {
			e := newEnv(b, envOptions{exec: bashExecutor(b, bash.Config{})})
			e.writeScript(b, "rule.sh", c.script)
			g := gateAt("g", "user-message", "")
			g.Rule = &Rule{Kind: runtime.KindScript, Name: "rule.sh"}
			e.saveGates(b, g)
			req := inSession(evalReq("user-message", "please fix the build"), b.TempDir())
			ctx := context.Background()
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req.Turn = i
				start := time.Now()
				res, err := e.svc.Evaluate(ctx, req)
				lat = append(lat, time.Since(start))
				if err != nil || res.Error != "" || res.RunID == "" {
					b.Fatalf("%+v %v", res, err)
				}
			}
			b.StopTimer()
			reportLatency(b, lat)
		})
	}
}

// BenchmarkWriteRecords measures the recorder's commit: a batch of 16 block-risky records from
// 8 sessions written by writeRecords in one lazy commit over a real Badger store (what the
// recorder does under 8 connections), per record.
func BenchmarkWriteRecords(b *testing.B) {
	e := newEnv(b, envOptions{noModel: true})
	ctx := context.Background()
	const batch, sessions = 16, 8
	start := time.Now()
	recs := make([]*Record, batch)
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		for j := range recs {
			r := blockRiskyRecord()
			r.StartedAt = start.Add(time.Duration(i+j) * time.Microsecond)
			r.ID, r.Session = newRunID(r.StartedAt), fmt.Sprintf("s%d", j%sessions)
			recs[j] = &r
		}
		err := e.svc.rec.commitBatch(ctx, recs)
		if err != nil {
			b.Fatal(err)
		}
	}
}

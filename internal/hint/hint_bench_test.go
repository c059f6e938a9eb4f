package hint

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkPut measures one queued hint: one store transaction, synced to disk.
func BenchmarkPut(b *testing.B) {
	ctx := context.Background()
	q, _ := newQueue(b, Config{})
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := q.Put(ctx, fmt.Sprintf("s%d", i%50), "hint text"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTake measures take throughput: the per-step check on an empty queue (a read, no
// write), and one step that finds a hint (take + confirm, two synced transactions), alone and
// with other sessions' backlog in the queue (every operation reads the whole queue, which
// compaction keeps to pending hints plus KeepConsumed).
func BenchmarkTake(b *testing.B) {
	ctx := context.Background()
	b.Run("empty", func(b *testing.B) {
		q, _ := newQueue(b, Config{})
		for b.Loop() {
			if tk, err := q.Take(ctx, "s"); err != nil || len(tk.Hints) != 0 {
				b.Fatal(tk, err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "takes/s")
	})
	for _, backlog := range []int{0, 1000} {
		b.Run(fmt.Sprintf("take-confirm/backlog=%d", backlog), func(b *testing.B) {
			q, _ := newQueue(b, Config{})
			for i := 0; i < backlog; i++ {
				put(b, q, fmt.Sprintf("other-%d", i/20), "backlog")
			}
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				put(b, q, "s", "hint")
				b.StartTimer()
				tk, err := q.Take(ctx, "s")
				if err != nil || len(tk.Hints) != 1 {
					b.Fatal(tk, err)
				}
				if _, err := q.Confirm(ctx, tk.ID); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "takes/s")
		})
	}
	b.Run("take-and-confirm/parallel", func(b *testing.B) {
		q, _ := newQueue(b, Config{})
		var n int64
		b.RunParallel(func(pb *testing.PB) {
			session := fmt.Sprintf("s%p", pb)
			for pb.Next() {
				if _, err := q.Put(ctx, session, "hint"); err != nil {
					b.Fatal(err)
				}
				tk, err := q.TakeAndConfirm(ctx, session)
				if err != nil {
					b.Fatal(err)
				}
				if len(tk.Hints) > 0 {
					n++
				}
			}
		})
		_ = n
	})
}

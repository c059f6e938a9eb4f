package locus

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/channel/lark/spool"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
)

// TestRecordAgent: the agent record is written on the current Delivery while it runs; once it
// is settled RecordAgent leaves it alone; a settlement with no record keeps the one written, and
// one with a record replaces it.
func TestRecordAgent(t *testing.T) {
	f := newFixture(t, Config{})
	l := f.locus("oc_rec")
	d := f.mustEnqueue("oc_rec", "q1")
	ctx := context.Background()
	run := AgentRun{Tools: []string{"list"}, ToolCalls: []ToolCall{{N: 1, Step: 1, Name: "list", Input: json.RawMessage(`{}`), Output: "a.txt"}}}
	if err := f.q.RecordAgent(ctx, d.ID, run); err != nil {
		t.Fatal(err)
	}
	if got := f.detail(l.ID).Deliveries[0].Agent; got == nil || len(got.ToolCalls) != 1 || got.ToolCalls[0].Output != "a.txt" {
		t.Fatalf("running record %+v", got)
	}
	// Cancelled (no record in the outcome): the calls written so far stay.
	if _, _, err := f.q.Settle(ctx, d.ID, nil, Outcome{State: DeliveryFailed, Fail: "cancelled"}, noSend); err != nil {
		t.Fatal(err)
	}
	if err := f.q.RecordAgent(ctx, d.ID, AgentRun{Tools: []string{"late"}}); err != nil {
		t.Fatalf("a late record: %v", err)
	}
	if got := f.detail(l.ID).Deliveries[0].Agent; got == nil || got.Tools[0] != "list" || len(got.ToolCalls) != 1 {
		t.Fatalf("settled record %+v", got)
	}
	// A settlement with its final record replaces the running one.
	d2 := f.mustEnqueue("oc_rec", "q2")
	_ = f.q.RecordAgent(ctx, d2.ID, run)
	final := AgentRun{Tools: []string{"list"}, Steps: 2, ToolCalls: []ToolCall{}, Error: ""}
	if _, _, err := f.q.Settle(ctx, d2.ID, nil, Outcome{State: DeliveryDone, NoReply: "empty", Agent: &final}, noSend); err != nil {
		t.Fatal(err)
	}
	if got := f.detail(l.ID).Deliveries[1].Agent; got == nil || got.Steps != 2 || len(got.ToolCalls) != 0 {
		t.Fatalf("final record %+v", got)
	}
}

// BenchmarkRecordAgent is the write of a Delivery's agent record after a tool call (Badger,
// SyncWrites): a small record, and one at the channel's 256 KiB cap.
func BenchmarkRecordAgent(b *testing.B) {
	for _, size := range []int{4 << 10, 256 << 10} {
		b.Run(byteSize(size), func(b *testing.B) {
			ctx := context.Background()
			st, err := badgerstore.Open(ctx, badgerstore.Options{Dir: b.TempDir(), GCInterval: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			q := New(st, Config{MaxQueue: 50, InitialDeadline: time.Hour, MaxDeadline: 24 * time.Hour, HistoryTurns: 10, Executor: ExecutorBuiltin},
				spool.New(filepath.Join(b.TempDir(), "spool"), quiet, st, time.Hour))
			var d Delivery
			err = st.Update(ctx, func(tx *store.Tx) error {
				s, err := q.EnsureSession(tx, SessionRequest{ID: "sess-bench"})
				if err != nil {
					return err
				}
				l, err := q.CreateLocus(tx, Entry{Key: "oc_b", ChatID: "oc_b", ChatType: "group"}, s, false)
				if err != nil {
					return err
				}
				d, err = q.Enqueue(tx, &l, Delivery{MessageID: "om_1", ChatID: "oc_b", Text: "q", ReceivedAt: time.Now()})
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			run := AgentRun{Tools: []string{"list", "read", "search"}}
			for n := 0; n < 16; n++ {
				run.ToolCalls = append(run.ToolCalls, ToolCall{N: n + 1, Step: n + 1, Name: "read", Input: json.RawMessage(`{"path":"a"}`),
					Output: strings.Repeat("x", size/16)})
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := q.RecordAgent(ctx, d.ID, run); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func byteSize(n int) string { return fmt.Sprintf("%dKiB", n>>10) }

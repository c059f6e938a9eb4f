package locus_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/pixie-dev/pixie/internal/channel/lark/locus"
	"github.com/pixie-dev/pixie/internal/channel/lark/spool"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
)

// A Locus's Deliveries are answered one at a time, in order of arrival: settling the current
// one makes the next current.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "locus-example")
	defer os.RemoveAll(dir)
	st, err := badgerstore.Open(ctx, badgerstore.Options{Dir: dir, GCInterval: -1})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	q := locus.New(st, locus.Config{MaxQueue: 10, InitialDeadline: time.Hour, MaxDeadline: 24 * time.Hour,
		HistoryTurns: 10, MaxReplyChars: 1000, Executor: locus.ExecutorExternal}, spool.New("", quiet, st, time.Hour))

	var first, second locus.Delivery
	err = st.Update(ctx, func(tx *store.Tx) error {
		main, err := q.EnsureSession(tx, locus.SessionRequest{ID: "host-session-1"})
		if err != nil {
			return err
		}
		l, err := q.CreateLocus(tx, locus.Entry{Key: "oc_chat", ChatID: "oc_chat", ChatType: "group"}, main, false)
		if err != nil {
			return err
		}
		if first, err = q.Enqueue(tx, &l, locus.Delivery{MessageID: "om_1", Text: "first question"}); err != nil {
			return err
		}
		second, err = q.Enqueue(tx, &l, locus.Delivery{MessageID: "om_2", Text: "second question"})
		return err
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(first.Text, "is", first.State, "and", second.Text, "is", second.State)

	send := func(context.Context, locus.Delivery) (string, error) { return "om_reply", nil }
	settled, next, err := q.Settle(ctx, first.ID, nil, locus.Outcome{State: locus.DeliveryDone, Reply: "an answer"}, send)
	if err != nil {
		panic(err)
	}
	fmt.Println(settled.Text, "is", settled.State, "replied:", settled.Replied)
	fmt.Println(next.Text, "is", next.State)
	// Output:
	// first question is current and second question is queued
	// first question is done replied: true
	// second question is current
}

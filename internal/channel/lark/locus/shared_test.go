package locus

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/channel/lark/spool"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/pgstore"
	"github.com/pixie-dev/pixie/internal/store/pgstore/pgtest"
)

func openPG(t *testing.T, url string) *store.Store {
	t.Helper()
	st, err := pgstore.Open(context.Background(), pgstore.Options{URL: url, MaxConns: 4, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestQueueOverPostgres runs the queue's suites over a store other replicas share: the
// settlement's mark in lark-settling, the activation's record in lark-ready and the notes keep
// every behaviour the embedded store has.
func TestQueueOverPostgres(t *testing.T) {
	pgtest.ServerURL(t)
	fixtureStore = func(t *testing.T) *store.Store { return openPG(t, pgtest.NewDatabase(t)) }
	defer func() { fixtureStore = nil }()
	for name, f := range map[string]func(*testing.T){
		"EnqueueAndSettleInOrder": TestEnqueueAndSettleInOrder, "QueueFullAtMaxQueue": TestQueueFullAtMaxQueue,
		"SendFailureLeavesTheDeliveryCurrent": TestSendFailureLeavesTheDeliveryCurrent,
		"OneSettlementAtATime":                TestOneSettlementAtATime, "Extend": TestExtend,
		"CurrentWaitsForTheActivation": TestCurrentWaitsForTheActivation, "FailQueuedThenArchive": TestFailQueuedThenArchive,
		"ActivationOfADeliverySettledMeanwhile": TestActivationOfADeliverySettledMeanwhile,
	} {
		t.Run(name, f)
	}
}

// Two queues over one database, as two replicas: a Delivery one is settling cannot be settled
// by the other; the other's Current waits for the activation done on the first; the other hears
// the settlement and stops its run of it.
func TestTwoQueuesOneDatabase(t *testing.T) {
	url := pgtest.NewDatabase(t)
	fixtureStore = func(t *testing.T) *store.Store { return openPG(t, url) }
	f := newFixture(t, Config{})
	fixtureStore = nil
	stB := openPG(t, url)
	t.Cleanup(func() { _ = stB.Close() })
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	b := New(stB, f.q.cfg, spool.New(filepath.Join(t.TempDir(), "spool-b"), quiet, stB, time.Hour))
	stopped := make(chan struct{})
	// B must be listening before A settles: a note sent before that is lost (the store then
	// says so with a Lost note, which the channel answers by re-reading its state; this test
	// listens for the settlement itself).
	listening := make(chan struct{})
	var once sync.Once
	unlisten := stB.Listen("lark", func(n store.Note) {
		if n.Lost {
			once.Do(func() { close(listening) })
			return
		}
		b.Heard(n.Payload)
	})
	defer unlisten()
	select {
	case <-listening:
	case <-time.After(10 * time.Second):
		t.Fatal("B's store never started listening")
	}
	ctx := context.Background()

	l := f.locus("oc_two")
	d := f.mustEnqueue("oc_two", "q1")
	f.mustEnqueue("oc_two", "q2")
	if !b.StartRun(d.ID, func() context.CancelFunc { return func() { close(stopped) } }) {
		t.Fatal("the run on B was refused")
	}

	// A settles, held in its reply; B's settlement of the same Delivery is refused meanwhile.
	inSend, release := make(chan struct{}), make(chan struct{})
	var next *Delivery
	done := make(chan error, 1)
	go func() {
		var err error
		_, next, err = f.q.Settle(ctx, d.ID, nil, Outcome{State: DeliveryDone, Reply: "a1"},
			func(context.Context, Delivery) (string, error) {
				close(inSend)
				<-release
				return "om_r1", nil
			})
		done <- err
	}()
	<-inSend
	if _, _, err := b.Settle(ctx, d.ID, nil, Outcome{State: DeliveryFailed, Fail: "cancel"}, noSend); !errs.Is(err, errs.Conflict) {
		t.Fatalf("B settled a Delivery A is settling: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("B did not hear the settlement: its run goes on")
	}

	// The next Delivery: B's Current waits until A's activation is recorded.
	got := make(chan DeliveryView, 1)
	go func() {
		v, err := b.Current(ctx, l.ChildID, true)
		if err != nil {
			t.Error(err)
		}
		got <- v
	}()
	select {
	case v := <-got:
		t.Fatalf("B handed out %s before its activation", v.ID)
	case <-time.After(300 * time.Millisecond):
	}
	f.q.Activate(ctx, *next, Activation{
		React:    func(context.Context, Delivery) string { return "rid-2" },
		Unreact:  func(context.Context, Delivery, string) {},
		Download: func(context.Context, Delivery, string) ([]byte, error) { return nil, nil },
	})
	select {
	case v := <-got:
		if v.ID != next.ID {
			t.Fatalf("B's current %s, want %s", v.ID, next.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("B's Current still waits after A's activation")
	}
}

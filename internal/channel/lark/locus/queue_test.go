package locus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/channel/lark/spool"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
)

// fixture is a Queue over a real Badger store in a temp dir, with a clock the test moves.
type fixture struct {
	t   *testing.T
	st  *store.Store
	q   *Queue
	mu  sync.Mutex
	now time.Time
}

// fixtureStore, when set, opens the fixtures' store instead of Badger (shared_test.go).
var fixtureStore func(t *testing.T) *store.Store

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	var st *store.Store
	if fixtureStore != nil {
		st = fixtureStore(t)
	} else {
		var err error
		st, err = badgerstore.Open(context.Background(), badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = st.Close() })
	f := &fixture{t: t, st: st, now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	if cfg.MaxQueue == 0 {
		cfg.MaxQueue = 50
	}
	if cfg.InitialDeadline == 0 {
		cfg.InitialDeadline = time.Hour
	}
	if cfg.MaxDeadline == 0 {
		cfg.MaxDeadline = 24 * time.Hour
	}
	if cfg.HistoryTurns == 0 {
		cfg.HistoryTurns = 10
	}
	if cfg.MaxReplyChars == 0 {
		cfg.MaxReplyChars = 100
	}
	if cfg.Executor == "" {
		cfg.Executor = ExecutorExternal
	}
	if cfg.Topic == "" {
		cfg.Topic = "lark"
	}
	if cfg.SettleTTL == 0 {
		cfg.SettleTTL = time.Minute
	}
	cfg.Now = f.clock
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.q = New(st, cfg, spool.New(filepath.Join(t.TempDir(), "spool"), quiet, st, time.Hour))
	return f
}

func (f *fixture) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fixture) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

// locus registers a main session and creates a Locus for chat under it.
func (f *fixture) locus(chat string) Locus {
	f.t.Helper()
	var l Locus
	err := f.st.Update(context.Background(), func(tx *store.Tx) error {
		s, err := f.q.EnsureSession(tx, SessionRequest{ID: "sess-" + chat})
		if err != nil {
			return err
		}
		l, err = f.q.CreateLocus(tx, Entry{Key: chat, ChatID: chat, ChatType: "group"}, s, false)
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return l
}

// enqueue adds a Delivery with text to the Locus of entry.
func (f *fixture) enqueue(entry, text string) (Delivery, error) {
	var d Delivery
	err := f.st.Update(context.Background(), func(tx *store.Tx) error {
		l, ok, err := ActiveLocus(tx, entry)
		if err != nil || !ok {
			return fmt.Errorf("no active locus for %s: %v", entry, err)
		}
		d, err = f.q.Enqueue(tx, &l, Delivery{MessageID: "om_" + text, ChatID: entry, Text: text, ReceivedAt: f.clock()})
		return err
	})
	return d, err
}

func (f *fixture) mustEnqueue(entry, text string) Delivery {
	f.t.Helper()
	d, err := f.enqueue(entry, text)
	if err != nil {
		f.t.Fatalf("enqueue %q: %v", text, err)
	}
	return d
}

func noSend(context.Context, Delivery) (string, error) { return "", errors.New("no reply expected") }

func replyID(id string) Send {
	return func(context.Context, Delivery) (string, error) { return id, nil }
}

func (f *fixture) detail(id string) LocusDetail {
	f.t.Helper()
	d, err := f.q.Detail(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return d
}

func TestEnqueueAndSettleInOrder(t *testing.T) {
	f := newFixture(t, Config{})
	l := f.locus("oc_a")
	first := f.mustEnqueue("oc_a", "one")
	second := f.mustEnqueue("oc_a", "two")
	third := f.mustEnqueue("oc_a", "three")
	if first.State != DeliveryCurrent || second.State != DeliveryQueued || third.State != DeliveryQueued {
		t.Fatalf("states %s %s %s, want current queued queued", first.State, second.State, third.State)
	}
	if first.AcceptedAt == nil || !first.AcceptedAt.Equal(f.clock()) || !first.Deadline.Equal(f.clock().Add(time.Hour)) {
		t.Fatalf("the current Delivery is accepted now with the initial deadline: %+v", first)
	}
	if second.AcceptedAt != nil || second.Deadline != nil {
		t.Fatalf("a queued Delivery has no acceptance or deadline yet: %+v", second)
	}
	if got := f.detail(l.ID); got.Current != first.ID || got.Queued != 2 || got.NextSeq != 4 {
		t.Fatalf("the Locus's head: current %q queued %d next %d", got.Current, got.Queued, got.NextSeq)
	}

	ctx := context.Background()
	f.advance(time.Minute)
	settled, next, err := f.q.Settle(ctx, first.ID, nil, Outcome{State: DeliveryDone, Reply: "answer one"}, replyID("om_reply1"))
	if err != nil {
		t.Fatal(err)
	}
	if settled.State != DeliveryDone || !settled.Replied || settled.ReplyMessageID != "om_reply1" || !settled.SettledAt.Equal(f.clock()) {
		t.Fatalf("settled: %+v", settled)
	}
	if next == nil || next.ID != second.ID || next.State != DeliveryCurrent || !next.AcceptedAt.Equal(f.clock()) {
		t.Fatalf("the next Delivery (two) becomes current now: %+v", next)
	}
	// Settled once: a second settlement of the same Delivery is refused.
	if _, _, err := f.q.Settle(ctx, first.ID, nil, Outcome{State: DeliveryFailed}, noSend); !errs.Is(err, errs.Conflict) {
		t.Fatalf("a settled Delivery settles again: %v", err)
	}
	if _, _, err := f.q.Settle(ctx, second.ID, nil, Outcome{State: DeliveryDone, NoReply: "nothing to say"}, noSend); err != nil {
		t.Fatal(err)
	}
	got := f.detail(l.ID)
	if got.Current != third.ID || got.Queued != 0 {
		t.Fatalf("three is current with none queued: current %q queued %d", got.Current, got.Queued)
	}
	states := ""
	for _, d := range got.Deliveries {
		states += d.ID + "=" + d.State + " "
	}
	want := fmt.Sprintf("%s=done %s=done %s=current ", first.ID, second.ID, third.ID)
	if states != want {
		t.Fatalf("deliveries %q, want %q", states, want)
	}
	// Only the reply entered the child's history.
	ch, err := f.q.Child(ctx, l.ChildID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.History) != 1 || ch.History[0].Question != "one" || ch.History[0].Answer != "answer one" {
		t.Fatalf("child history %+v", ch.History)
	}
}

func TestQueueFullAtMaxQueue(t *testing.T) {
	f := newFixture(t, Config{MaxQueue: 2})
	f.locus("oc_cap")
	f.mustEnqueue("oc_cap", "current")
	f.mustEnqueue("oc_cap", "queued 1")
	f.mustEnqueue("oc_cap", "queued 2") // at the cap: still taken
	if _, err := f.enqueue("oc_cap", "queued 3"); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("one over MaxQueue: %v, want ErrQueueFull", err)
	}
}

func TestSendFailureLeavesTheDeliveryCurrent(t *testing.T) {
	f := newFixture(t, Config{})
	l := f.locus("oc_send")
	d := f.mustEnqueue("oc_send", "q")
	f.mustEnqueue("oc_send", "q2")
	boom := errs.New(errs.Unavailable, "lark is down")
	_, _, err := f.q.Settle(context.Background(), d.ID, nil, Outcome{State: DeliveryDone, Reply: "a"},
		func(context.Context, Delivery) (string, error) { return "", boom })
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want the send's", err)
	}
	if got := f.detail(l.ID); got.Current != d.ID || got.Queued != 1 {
		t.Fatalf("after a failed send: current %q queued %d", got.Current, got.Queued)
	}
	// The claim was given up: the next settlement goes through.
	if _, _, err := f.q.Settle(context.Background(), d.ID, nil, Outcome{State: DeliveryDone, Reply: "a"}, replyID("om_r")); err != nil {
		t.Fatal(err)
	}
}

func TestOneSettlementAtATime(t *testing.T) {
	f := newFixture(t, Config{})
	f.locus("oc_once")
	d := f.mustEnqueue("oc_once", "q")
	inSend, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, _, err := f.q.Settle(context.Background(), d.ID, nil, Outcome{State: DeliveryDone, Reply: "a"},
			func(context.Context, Delivery) (string, error) {
				close(inSend)
				<-release
				return "om_r", nil
			})
		done <- err
	}()
	<-inSend
	_, _, err := f.q.Settle(context.Background(), d.ID, nil, Outcome{State: DeliveryFailed, Fail: "cancel"}, noSend)
	if !errs.Is(err, errs.Conflict) {
		t.Fatalf("a second settlement while one runs: %v, want conflict", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestCheckRunsBeforeAndInsideTheTransaction(t *testing.T) {
	f := newFixture(t, Config{})
	l := f.locus("oc_check")
	d := f.mustEnqueue("oc_check", "q")
	calls := 0
	check := func(Delivery, Locus) error {
		calls++
		if calls == 2 {
			return errs.New(errs.Conflict, "changed meanwhile")
		}
		return nil
	}
	_, _, err := f.q.Settle(context.Background(), d.ID, check, Outcome{State: DeliveryTimedOut, Fail: "late"}, noSend)
	if !errs.Is(err, errs.Conflict) || calls != 2 {
		t.Fatalf("err %v after %d checks, want the second check's conflict", err, calls)
	}
	if got := f.detail(l.ID); got.Current != d.ID {
		t.Fatalf("a refused check settled the Delivery: %+v", got.Locus)
	}
	if err := CallerCheck("c_other")(d, l); !errs.Is(err, errs.Forbidden) {
		t.Fatalf("another child: %v, want forbidden", err)
	}
	l.Executor = ExecutorBuiltin
	if err := CallerCheck(l.ChildID)(d, l); !errs.Is(err, errs.Conflict) {
		t.Fatalf("a built-in Locus: %v, want conflict", err)
	}
}

func TestHistoryKeepsTheNewestTurns(t *testing.T) {
	f := newFixture(t, Config{HistoryTurns: 2})
	l := f.locus("oc_hist")
	for i := 1; i <= 3; i++ {
		d := f.mustEnqueue("oc_hist", fmt.Sprintf("q%d", i))
		if _, _, err := f.q.Settle(context.Background(), d.ID, nil, Outcome{State: DeliveryDone, Reply: fmt.Sprintf("a%d", i)}, replyID("om")); err != nil {
			t.Fatal(err)
		}
	}
	ch, err := f.q.Child(context.Background(), l.ChildID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.History) != 2 || ch.History[0].Question != "q2" || ch.History[1].Answer != "a3" {
		t.Fatalf("history %+v, want q2/a2 and q3/a3", ch.History)
	}
}

func TestSettledDeliveriesArePrunedTo50(t *testing.T) {
	f := newFixture(t, Config{})
	l := f.locus("oc_prune")
	var ids []string
	for i := 1; i <= maxKeptSettled+1; i++ {
		d := f.mustEnqueue("oc_prune", fmt.Sprintf("q%d", i))
		ids = append(ids, d.ID)
		if _, _, err := f.q.Settle(context.Background(), d.ID, nil, Outcome{State: DeliveryFailed, Fail: "x"}, noSend); err != nil {
			t.Fatal(err)
		}
		if n := len(f.detail(l.ID).Deliveries); n != min(i, maxKeptSettled) {
			t.Fatalf("after %d settled: %d kept", i, n)
		}
	}
	if got := f.detail(l.ID).Deliveries; got[0].ID != ids[1] {
		t.Fatalf("the oldest was not the one pruned: first kept %s", got[0].ID)
	}
}

func TestExtend(t *testing.T) {
	tests := []struct {
		name    string
		before  time.Duration // the clock moves this far after acceptance first
		extend  int64
		prior   int64 // an earlier extension, seconds (0: none)
		want    time.Duration
		capped  bool
		errCode errs.Code
	}{
		{name: "default is the initial deadline", extend: 0, want: time.Hour},
		{name: "two hours", extend: 7200, want: 2 * time.Hour},
		{name: "one second", extend: 1, prior: 0, want: time.Hour}, // never shortened
		{name: "exactly the maximum", extend: 86400, want: 24 * time.Hour},
		{name: "capped at acceptance plus the maximum", before: time.Hour, extend: 86400, prior: 3 * 3600, want: 24 * time.Hour, capped: true},
		{name: "one over the maximum", extend: 86401, errCode: errs.Invalid},
		{name: "negative", extend: -1, errCode: errs.Invalid},
		{name: "already at the cap", extend: 3600, prior: 86400, errCode: errs.Conflict},
		{name: "past the deadline", before: time.Hour, extend: 3600, errCode: errs.Conflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Config{})
			f.locus("oc_wait")
			d := f.mustEnqueue("oc_wait", "q")
			ctx := context.Background()
			if tt.prior > 0 {
				if _, err := f.q.Extend(ctx, WaitRequest{DeliveryID: d.ID, ExtendSeconds: tt.prior}, nil); err != nil {
					t.Fatal(err)
				}
			}
			f.advance(tt.before)
			r, err := f.q.Extend(ctx, WaitRequest{DeliveryID: d.ID, ExtendSeconds: tt.extend}, nil)
			if tt.errCode != "" {
				if !errs.Is(err, tt.errCode) {
					t.Fatalf("err %v, want %s", err, tt.errCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := d.AcceptedAt.Add(tt.want); !r.Deadline.Equal(want) || r.Capped != tt.capped {
				t.Fatalf("deadline %s capped %v, want %s capped %v", r.Deadline, r.Capped, want, tt.capped)
			}
		})
	}
}

func TestOverdueAndResume(t *testing.T) {
	f := newFixture(t, Config{})
	f.locus("oc_x")
	f.locus("oc_y")
	x := f.mustEnqueue("oc_x", "x1")
	f.mustEnqueue("oc_x", "x2")
	f.advance(30 * time.Minute)
	y := f.mustEnqueue("oc_y", "y1")
	ctx := context.Background()
	f.advance(30 * time.Minute) // x's deadline now, not past it
	if due := f.q.Overdue(ctx, f.clock()); len(due) != 0 {
		t.Fatalf("at the deadline nothing is overdue: %v", due)
	}
	f.advance(time.Second)
	if due := f.q.Overdue(ctx, f.clock()); len(due) != 1 || due[0] != x.ID {
		t.Fatalf("overdue %v, want [%s]", due, x.ID)
	}
	resume, err := f.q.Resume(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, d := range resume {
		got[d.ID] = true
	}
	if len(resume) != 2 || !got[x.ID] || !got[y.ID] {
		t.Fatalf("resume %v, want the two current Deliveries", resume)
	}
}

func TestFailQueuedThenArchive(t *testing.T) {
	f := newFixture(t, Config{})
	l := f.locus("oc_arch")
	cur := f.mustEnqueue("oc_arch", "q1")
	f.mustEnqueue("oc_arch", "q2")
	f.mustEnqueue("oc_arch", "q3")
	ctx := context.Background()
	failed, err := f.q.FailQueued(ctx, l.ID, "unbound")
	if err != nil || len(failed) != 2 {
		t.Fatalf("failed %d queued (%v), want 2", len(failed), err)
	}
	if _, err := f.q.ArchiveIdle(ctx, l.ID); !errs.Is(err, errs.Conflict) {
		t.Fatalf("archiving a Locus with a current Delivery: %v, want conflict", err)
	}
	_, next, err := f.q.Settle(ctx, cur.ID, nil, Outcome{State: DeliveryFailed, Fail: "unbound"}, noSend)
	if err != nil || next != nil {
		t.Fatalf("settling the current one started %v (%v)", next, err)
	}
	v, err := f.q.ArchiveIdle(ctx, l.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v.State != LocusArchived || v.Child == nil || !v.Child.Archived {
		t.Fatalf("archived view %+v", v)
	}
	if _, ok, err := f.q.EntryLocus(ctx, "oc_arch"); err != nil || ok {
		t.Fatalf("the entry still names an active Locus (%v)", err)
	}
	if _, err := f.enqueue("oc_arch", "q4"); err == nil {
		t.Fatal("an archived entry took a Delivery")
	}
}

func TestBindEntry(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	for _, id := range []string{"alpha-session-1", "beta-session-1", "beta-session-2"} {
		if _, err := f.q.RegisterSession(ctx, SessionRequest{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	e := Entry{Key: "oc_bind", ChatID: "oc_bind", ChatType: "group"}
	tests := []struct {
		name, prefix string
		enqueue      bool
		want         Bound
		wantSession  string
	}{
		{name: "a prefix two sessions share", prefix: "beta-s", want: BindNoMatch},
		{name: "too short", prefix: "alpha", want: BindNoMatch},
		{name: "a new entry", prefix: "alpha-", want: BindDone, wantSession: "alpha-session-1"},
		{name: "the same session again", prefix: "alpha-session-1", want: BindAlready, wantSession: "alpha-session-1"},
		{name: "elsewhere while busy", prefix: "beta-session-1", enqueue: true, want: BindBusy, wantSession: "beta-session-1"},
	}
	var first Locus
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.enqueue {
				f.mustEnqueue(e.Key, "busy")
			}
			r, err := f.q.BindEntry(ctx, e, tt.prefix)
			if err != nil {
				t.Fatal(err)
			}
			if r.Bound != tt.want || r.Session.ID != tt.wantSession {
				t.Fatalf("bound %d to %q, want %d to %q", r.Bound, r.Session.ID, tt.want, tt.wantSession)
			}
			if tt.want == BindDone {
				first = r.Locus
			}
		})
	}
	// Once idle, the entry moves: a new Locus and child under the new session, the old ones
	// archived.
	cur, _ := f.q.CurrentID(ctx, first.ID)
	if _, _, err := f.q.Settle(ctx, cur, nil, Outcome{State: DeliveryFailed, Fail: "x"}, noSend); err != nil {
		t.Fatal(err)
	}
	r, err := f.q.BindEntry(ctx, e, "beta-session-1")
	if err != nil || r.Bound != BindDone || r.Locus.ID == first.ID || r.Locus.ChildID == first.ChildID {
		t.Fatalf("rebind: %+v (%v)", r, err)
	}
	if old := f.detail(first.ID); old.State != LocusArchived || !old.Child.Archived {
		t.Fatalf("the old Locus and child stay active: %+v", old)
	}
}

func TestCurrentWaitsForTheActivation(t *testing.T) {
	f := newFixture(t, Config{})
	l := f.locus("oc_cur")
	ctx := context.Background()
	if _, err := f.q.Current(ctx, l.ChildID, false); !errs.Is(err, errs.NotFound) {
		t.Fatalf("an idle Locus: %v, want not found", err)
	}
	d := f.mustEnqueue("oc_cur", "q")
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := f.q.Current(short, l.ChildID, true); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("before the activation: %v, want the caller's deadline", err)
	}
	if v, err := f.q.Current(ctx, l.ChildID, false); err != nil || v.ID != d.ID {
		t.Fatalf("without waiting: %+v (%v)", v, err)
	}
	got := make(chan DeliveryView, 1)
	go func() {
		v, _ := f.q.Current(ctx, l.ChildID, true)
		got <- v
	}()
	reacted, started := 0, 0
	a := Activation{
		React:   func(context.Context, Delivery) string { reacted++; return "rid-1" },
		Unreact: func(context.Context, Delivery, string) { t.Error("a current Delivery's reaction was taken back") },
		Download: func(context.Context, Delivery, string) ([]byte, error) {
			return nil, errors.New("no images expected")
		},
		Start: func(cur Delivery, sl Locus) {
			started++
			if cur.ID != d.ID || sl.ID != l.ID {
				t.Errorf("started %s of %s, want %s of %s", cur.ID, sl.ID, d.ID, l.ID)
			}
		},
	}
	f.q.Activate(ctx, d, a)
	if v := <-got; v.ID != d.ID || v.State != DeliveryCurrent {
		t.Fatalf("after the activation: %+v", v)
	}
	// Activated again (a restart's resume): the reaction recorded is kept, the executor starts
	// again.
	f.q.Activate(ctx, d, a)
	if cur, _, err := f.q.loadCurrent(ctx, d.ID); err != nil || cur.WorkingReaction != "rid-1" || reacted != 1 || started != 2 {
		t.Fatalf("working reaction %q, %d reactions, %d starts (%v)", cur.WorkingReaction, reacted, started, err)
	}
}

// A Delivery settled while its activation adds the working reaction (by another replica,
// which does not share this process's side lock) gets the reaction taken back.
func TestActivationOfADeliverySettledMeanwhile(t *testing.T) {
	f := newFixture(t, Config{})
	f.locus("oc_late")
	d := f.mustEnqueue("oc_late", "q")
	ctx := context.Background()
	var undone string
	f.q.Activate(ctx, d, Activation{
		React: func(context.Context, Delivery) string {
			err := f.st.Update(ctx, func(tx *store.Tx) error {
				x := d
				x.State = DeliveryFailed
				return colDelivery.Put(tx, deliveryKey(x.LocusID, x.Seq), x)
			})
			if err != nil {
				t.Fatal(err)
			}
			return "rid-late"
		},
		Unreact:  func(_ context.Context, _ Delivery, rid string) { undone = rid },
		Download: func(context.Context, Delivery, string) ([]byte, error) { return nil, nil },
		Start:    func(Delivery, Locus) {},
	})
	if undone != "rid-late" {
		t.Fatalf("the reaction taken back: %q, want rid-late", undone)
	}
	var working string
	f.q.AfterSettle(ctx, d, func(w string) { working = w })
	if working != "" {
		t.Fatalf("a reaction was recorded on a settled Delivery: %q", working)
	}
}

func TestHeard(t *testing.T) {
	f := newFixture(t, Config{})
	stopped := make(chan struct{})
	if !f.q.StartRun("l1-1", func() context.CancelFunc { return func() { close(stopped) } }) {
		t.Fatal("the first run of a Delivery was refused")
	}
	if f.q.StartRun("l1-1", func() context.CancelFunc { t.Fatal("a second run started"); return nil }) {
		t.Fatal("a second run of one Delivery was recorded")
	}
	tests := []struct {
		name, payload, settled string
		ok                     bool
	}{
		{name: "settled", payload: "settled l1-1", settled: "l1-1", ok: true},
		{name: "ready", payload: "ready l1-2", ok: true},
		{name: "another note", payload: "binding"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, ok := f.q.Heard(tt.payload)
			if id != tt.settled || ok != tt.ok {
				t.Fatalf("Heard(%q) = %q, %v; want %q, %v", tt.payload, id, ok, tt.settled, tt.ok)
			}
		})
	}
	select {
	case <-stopped:
	default:
		t.Fatal("a settlement heard did not stop the run")
	}
	select {
	case <-f.q.readyChan("l1-2"):
	default:
		t.Fatal("an activation heard did not end the wait")
	}
}

func TestFinishOutcome(t *testing.T) {
	q := newFixture(t, Config{MaxReplyChars: 5}).q
	long := "ééééé"
	tests := []struct {
		name string
		req  FinishRequest
		want Outcome
		code errs.Code
	}{
		{name: "a reply at the cap", req: FinishRequest{Reply: " " + long + " "}, want: Outcome{State: DeliveryDone, Reply: long}},
		{name: "one over the cap", req: FinishRequest{Reply: long + "é"}, code: errs.TooLarge},
		{name: "no reply with a reason", req: FinishRequest{NoReply: true, Reason: "later"}, want: Outcome{State: DeliveryDone, NoReply: "later"}},
		{name: "no reply without a reason", req: FinishRequest{NoReply: true}, code: errs.Invalid},
		{name: "both", req: FinishRequest{NoReply: true, Reason: "r", Reply: "x"}, code: errs.Invalid},
		{name: "empty", req: FinishRequest{Reply: "  "}, code: errs.Invalid},
		{name: "a reason one over the cap", req: FinishRequest{NoReply: true, Reason: strings.Repeat("x", MaxReasonChars+1)}, code: errs.TooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := q.FinishOutcome(tt.req)
			if tt.code != "" {
				if !errs.Is(err, tt.code) {
					t.Fatalf("err %v, want %s", err, tt.code)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("%+v (%v), want %+v", got, err, tt.want)
			}
		})
	}
}

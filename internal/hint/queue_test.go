package hint

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
)

// The store contract of the spec (tests/store.spec.ts, 12 cases), re-expressed for the
// store-backed queue, plus the lease, compaction and exactly-once cases this design adds.

func openStore(t testing.TB, dir string) *store.Store {
	t.Helper()
	s, err := badgerstore.Open(context.Background(), badgerstore.Options{Dir: dir, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newQueue(t testing.TB, cfg Config) (*Queue, *store.Store) {
	t.Helper()
	s := openStore(t, t.TempDir())
	cfg.Store = s
	q, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close(context.Background()); s.Close() })
	return q, s
}

// clock is a settable clock for lease tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func put(t testing.TB, q *Queue, session, text string) PutResult {
	t.Helper()
	r, err := q.Put(context.Background(), session, text)
	if err != nil {
		t.Fatalf("put %q to %q: %v", text, session, err)
	}
	return r
}

func texts(hs []Hint) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.Text
	}
	return out
}

func wantCode(t testing.TB, err error, code errs.Code) {
	t.Helper()
	if err == nil || errs.CodeOf(err) != code {
		t.Fatalf("err = %v (code %s), want code %s", err, errs.CodeOf(err), code)
	}
}

// drain returns the frames a subscription holds now.
func drain(sub *Subscription) []Frame {
	var out []Frame
	for {
		select {
		case <-sub.Ready():
			out = append(out, sub.Next()...)
		default:
			return out
		}
	}
}

// wantTakeState checks the details of a conflict on a closed take.
func wantTakeState(t testing.TB, err error, state string) {
	t.Helper()
	var e *errs.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, not coded", err)
	}
	d, ok := e.Details.(map[string]any)
	if !ok || d["take"] != state {
		t.Fatalf("details = %#v, want take %q", e.Details, state)
	}
}

// TestConfirmIsIdempotent is the attack where a confirm whose answer was lost could not be
// retried (the retry got 404, like an expired lease): a repeated confirm of a confirmed take
// answers as the first did and changes nothing (no revision, no second receipt), also from a
// second Queue over the store (another replica) and after a restart; an unknown take is
// still not found; a rollback after the confirm is a conflict.
func TestConfirmIsIdempotent(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	q, err := New(context.Background(), Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	put(t, q, "s", "one")
	put(t, q, "s", "two")
	tk, err := q.Take(ctx, "s")
	if err != nil || len(tk.Hints) != 2 {
		t.Fatalf("take = %+v, %v", tk, err)
	}
	sub, _, err := q.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if n, err := q.Confirm(ctx, tk.ID); err != nil || n != 2 {
		t.Fatalf("confirm = %d, %v", n, err)
	}
	snap, _ := q.Snapshot(ctx)
	other, err := New(context.Background(), Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	for i, qq := range []*Queue{q, q, other} {
		if n, err := qq.Confirm(ctx, tk.ID); err != nil || n != 2 {
			t.Fatalf("repeat %d: confirm = %d, %v", i, n, err)
		}
	}
	if again, _ := q.Snapshot(ctx); again.Revision != snap.Revision {
		t.Fatalf("a repeated confirm changed the queue: revision %d → %d", snap.Revision, again.Revision)
	}
	receipts := 0
	for _, f := range drain(sub) {
		if f.Event == EventHint {
			receipts++
		}
	}
	if receipts != 2 {
		t.Fatalf("%d consumed receipts, want 2 (one per hint, not per confirm)", receipts)
	}
	_, err = q.Rollback(ctx, tk.ID)
	wantCode(t, err, errs.Conflict)
	wantTakeState(t, err, "confirmed")
	_, err = q.Confirm(ctx, "t"+strings.Repeat("0", 28))
	wantCode(t, err, errs.NotFound)

	// After a restart the closed take is still remembered.
	q.Close(context.Background())
	other.Close(context.Background())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openStore(t, dir)
	defer s2.Close()
	q2, err := New(context.Background(), Config{Store: s2})
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Close(context.Background())
	if n, err := q2.Confirm(ctx, tk.ID); err != nil || n != 2 {
		t.Fatalf("confirm after restart = %d, %v", n, err)
	}
}

// 1. Atomic consumption: many goroutines take at once (two Queue values over one store, so only
// the store transaction can keep them apart) and no hint is handed out twice.
func TestConcurrentTakesNeverDuplicate(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	defer s.Close()
	q1, err := New(context.Background(), Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	defer q1.Close(context.Background())
	q2, err := New(context.Background(), Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Close(context.Background())

	const sessions, perSession = 4, 15
	want := map[string]bool{}
	for i := 0; i < sessions; i++ {
		for j := 0; j < perSession; j++ {
			want[put(t, q1, fmt.Sprintf("s%d", i), fmt.Sprintf("s%d-%d", i, j)).Hint.ID] = true
		}
	}
	for j := 0; j < 10; j++ {
		want[put(t, q1, "", fmt.Sprintf("g-%d", j)).Hint.ID] = true
	}

	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	var failed atomic.Value
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			q := q1
			if g%2 == 1 {
				q = q2
			}
			session := fmt.Sprintf("s%d", g%sessions)
			for k := 0; k < 6; k++ {
				var tk Take
				var err error
				if k%2 == 0 {
					tk, err = q.TakeAndConfirm(ctx, session)
				} else if tk, err = q.Take(ctx, session); err == nil && tk.ID != "" {
					_, err = q.Confirm(ctx, tk.ID)
				}
				if err != nil {
					failed.Store(err)
					return
				}
				mu.Lock()
				for _, h := range tk.Hints {
					seen[h.ID]++
				}
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("hint %s handed out %d times", id, n)
		}
		if !want[id] {
			t.Errorf("unknown hint %s handed out", id)
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("%d of %d hints handed out", len(seen), len(want))
	}
	snap, err := q1.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Pending) != 0 {
		t.Fatalf("pending after draining: %d", len(snap.Pending))
	}
}

// 2. Oldest first, at most MaxPerStep per take: exactly the cap is one take, the cap plus one is
// two.
func TestTakeOldestFirstAndPerStepCap(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		n     int
		takes []int
	}{
		{name: "one", n: 1, takes: []int{1, 0}},
		{name: "exactly-the-cap", n: 20, takes: []int{20, 0}},
		{name: "cap-plus-one", n: 21, takes: []int{20, 1, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, _ := newQueue(t, Config{MaxPendingPerSession: 100})
			var all []string
			for i := 0; i < tc.n; i++ {
				all = append(all, put(t, q, "s", fmt.Sprintf("h%02d", i)).Hint.Text)
			}
			var got []string
			for i, want := range tc.takes {
				tk, err := q.TakeAndConfirm(ctx, "s")
				if err != nil {
					t.Fatal(err)
				}
				if len(tk.Hints) != want {
					t.Fatalf("take %d: %d hints, want %d", i, len(tk.Hints), want)
				}
				got = append(got, texts(tk.Hints)...)
			}
			if strings.Join(got, ",") != strings.Join(all, ",") {
				t.Fatalf("order = %v, want %v", got, all)
			}
		})
	}
}

// 3 and 4. A session takes its own hints and the global ones, never another session's; an
// unknown session takes global hints only.
func TestTakeScope(t *testing.T) {
	ctx := context.Background()
	q, _ := newQueue(t, Config{})
	put(t, q, "a", "a1")
	put(t, q, "", "g1")
	put(t, q, "b", "b1")
	put(t, q, "a", "a2")

	tk, err := q.TakeAndConfirm(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(texts(tk.Hints), ","); got != "a1,g1,a2" {
		t.Fatalf("session a took %s, want a1,g1,a2 (own and global, oldest first)", got)
	}
	put(t, q, "", "g2")
	tk, err = q.TakeAndConfirm(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(texts(tk.Hints), ","); got != "g2" {
		t.Fatalf("unknown session took %s, want only the global g2", got)
	}
	tk, err = q.TakeAndConfirm(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(texts(tk.Hints), ","); got != "b1" {
		t.Fatalf("session b took %s, want b1", got)
	}
}

// 5. Cancel: pending → cancelled; consumed → conflict; unknown → not found; twice → conflict.
func TestCancelOutcomes(t *testing.T) {
	ctx := context.Background()
	q, _ := newQueue(t, Config{Locale: "zh"})
	p := put(t, q, "s", "pending one")
	c := put(t, q, "s", "consumed one")
	if _, err := q.Cancel(ctx, p.Hint.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := q.TakeAndConfirm(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, id string
		code     errs.Code
		msg      string
	}{
		{name: "consumed", id: c.Hint.ID, code: errs.Conflict, msg: "提示已被消费，无法撤回"},
		{name: "cancelled-twice", id: p.Hint.ID, code: errs.Conflict, msg: "提示已撤回"},
		{name: "unknown", id: "h00000000000000000001ffffffff", code: errs.NotFound, msg: "提示不存在"},
		{name: "malformed", id: "../../etc", code: errs.NotFound, msg: "提示不存在"},
		{name: "empty", id: "", code: errs.Invalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := q.Cancel(ctx, tc.id)
			wantCode(t, err, tc.code)
			if tc.msg != "" && err.Error() != tc.msg {
				t.Fatalf("message = %q, want the locale's %q", err.Error(), tc.msg)
			}
		})
	}
	snap, _ := q.Snapshot(ctx)
	if len(snap.Pending) != 0 || len(snap.Consumed) != 1 {
		t.Fatalf("snapshot = %+v", snap)
	}
}

// 6. Rollback: a take whose injection failed returns its hints, and the next step takes them.
func TestRollbackReturnsHintsToNextStep(t *testing.T) {
	ctx := context.Background()
	q, _ := newQueue(t, Config{})
	put(t, q, "s", "one")
	put(t, q, "", "two")
	tk, err := q.Take(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if tk.ID == "" || len(tk.Hints) != 2 || tk.Confirmed {
		t.Fatalf("take = %+v", tk)
	}
	if again, _ := q.Take(ctx, "s"); len(again.Hints) != 0 {
		t.Fatalf("taken hints were handed out again before the rollback: %v", texts(again.Hints))
	}
	n, err := q.Rollback(ctx, tk.ID)
	if err != nil || n != 2 {
		t.Fatalf("rollback = %d, %v", n, err)
	}
	// A repeated rollback answers as the first did; a confirm after it is a conflict that says
	// the hints are pending again.
	if n, err := q.Rollback(ctx, tk.ID); err != nil || n != 2 {
		t.Fatalf("repeated rollback = %d, %v", n, err)
	}
	_, err = q.Confirm(ctx, tk.ID)
	wantCode(t, err, errs.Conflict)
	wantTakeState(t, err, "rolled-back")

	next, err := q.Take(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(texts(next.Hints), ","); got != "one,two" {
		t.Fatalf("next step took %q, want one,two", got)
	}
	if n, err := q.Confirm(ctx, next.ID); err != nil || n != 2 {
		t.Fatalf("confirm = %d, %v", n, err)
	}
	snap, _ := q.Snapshot(ctx)
	if len(snap.Pending) != 0 || len(snap.Consumed) != 2 || snap.Consumed[0].TakeID != "" {
		t.Fatalf("after confirm: %+v", snap)
	}
}

// A rollback returns only the hints still consumed under that take.
func TestRollbackOnlyTouchesItsOwnHints(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	q, s := newQueue(t, Config{Now: clk.Now, Lease: time.Hour})
	put(t, q, "s", "one")
	first, err := q.Take(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	// The first take expires; its hint goes back and a second take holds it now.
	clk.Add(2 * time.Hour)
	if n, err := q.sweep(ctx); err != nil || n != 1 {
		t.Fatalf("sweep = %d, %v", n, err)
	}
	second, err := q.Take(ctx, "s")
	if err != nil || len(second.Hints) != 1 {
		t.Fatalf("second take = %+v, %v", second, err)
	}
	// Forge the first lease back (as if a confirm and the sweep had raced) and roll it back: the
	// hint belongs to the second take now and must stay consumed.
	if err := s.Update(ctx, func(tx *store.Tx) error {
		return leases.Put(tx, first.ID, lease{ID: first.ID, SessionID: "s", HintIDs: []string{first.Hints[0].ID},
			TakenAt: clk.Now(), ExpiresAt: clk.Now().Add(time.Hour)})
	}); err != nil {
		t.Fatal(err)
	}
	if n, err := q.Rollback(ctx, first.ID); err != nil || n != 0 {
		t.Fatalf("stale rollback = %d, %v; want 0 hints returned", n, err)
	}
	if tk, _ := q.Take(ctx, "s"); len(tk.Hints) != 0 {
		t.Fatalf("a stale rollback returned a hint held by another take")
	}
	if n, err := q.Confirm(ctx, second.ID); err != nil || n != 1 {
		t.Fatalf("confirm second = %d, %v", n, err)
	}
}

// A take that is neither confirmed nor rolled back returns after the lease, through the
// background sweep; before the lease it stays taken.
func TestLeaseExpiry(t *testing.T) {
	ctx := context.Background()
	t.Run("clock", func(t *testing.T) {
		clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		q, _ := newQueue(t, Config{Now: clk.Now, Lease: time.Minute})
		put(t, q, "s", "one")
		tk, err := q.Take(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		if !tk.ExpiresAt.Equal(clk.Now().Add(time.Minute)) {
			t.Fatalf("expiresAt = %v", tk.ExpiresAt)
		}
		clk.Add(time.Minute - time.Nanosecond)
		if n, _ := q.sweep(ctx); n != 0 {
			t.Fatalf("swept %d leases before expiry", n)
		}
		clk.Add(time.Nanosecond)
		if n, _ := q.sweep(ctx); n != 1 {
			t.Fatalf("swept %d leases at expiry, want 1", n)
		}
		// A confirm that comes after the expiry is told so (not "not found"): the model may have
		// seen hints that are pending again. A rollback then has nothing left to do.
		_, err = q.Confirm(ctx, tk.ID)
		wantCode(t, err, errs.Conflict)
		wantTakeState(t, err, "expired")
		if n, err := q.Rollback(ctx, tk.ID); err != nil || n != 0 {
			t.Fatalf("rollback after expiry = %d, %v", n, err)
		}
		again, _ := q.TakeAndConfirm(ctx, "s")
		if len(again.Hints) != 1 || again.Hints[0].ID != tk.Hints[0].ID {
			t.Fatalf("the expired take's hint was not taken again: %+v", again)
		}
	})
	t.Run("background", func(t *testing.T) {
		q, _ := newQueue(t, Config{Lease: 50 * time.Millisecond})
		put(t, q, "s", "one")
		if tk, err := q.Take(ctx, "s"); err != nil || len(tk.Hints) != 1 {
			t.Fatalf("take = %+v, %v", tk, err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			snap, err := q.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Pending) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the sweep did not return the hint within 5s")
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// 7. Per-session cap: the cap is reached without drops; one more evicts that session's oldest
// pending hint (not another session's, not a global one) and reports it.
func TestPendingCapEvictsOldest(t *testing.T) {
	ctx := context.Background()
	q, _ := newQueue(t, Config{})
	put(t, q, "other", "other")
	put(t, q, "", "global")
	var first PutResult
	for i := 0; i < DefaultMaxPendingPerSession; i++ {
		r := put(t, q, "s", fmt.Sprintf("s%02d", i))
		if len(r.Dropped) != 0 {
			t.Fatalf("put %d of %d dropped %v", i+1, DefaultMaxPendingPerSession, texts(r.Dropped))
		}
		if i == 0 {
			first = r
		}
	}
	r := put(t, q, "s", "one too many")
	if len(r.Dropped) != 1 || r.Dropped[0].ID != first.Hint.ID || !r.Dropped[0].Dropped {
		t.Fatalf("dropped = %+v, want the oldest (%s)", r.Dropped, first.Hint.ID)
	}
	snap, _ := q.Snapshot(ctx)
	count := map[string]int{}
	for _, h := range snap.Pending {
		count[h.SessionID]++
	}
	if count["s"] != DefaultMaxPendingPerSession || count["other"] != 1 || count[""] != 1 {
		t.Fatalf("pending per session = %v", count)
	}
	_, err := q.Cancel(ctx, first.Hint.ID)
	wantCode(t, err, errs.Conflict)
	// The global queue has its own cap.
	for i := 0; i < DefaultMaxPendingPerSession-1; i++ {
		put(t, q, "", "g")
	}
	if r := put(t, q, "", "g-over"); len(r.Dropped) != 1 || r.Dropped[0].Text != "global" {
		t.Fatalf("global over cap dropped %+v", r.Dropped)
	}
}

// 8. Blank text is refused; text is capped at MaxContentChars code points.
func TestTextValidation(t *testing.T) {
	ctx := context.Background()
	q, _ := newQueue(t, Config{})
	tests := []struct {
		name, text string
		wantLen    int
		wantErr    errs.Code
	}{
		{name: "empty", text: "", wantErr: errs.Invalid},
		{name: "blank", text: " \t\n　", wantErr: errs.Invalid},
		{name: "trimmed", text: "  hi  ", wantLen: 2},
		{name: "at-the-cap", text: strings.Repeat("字", 2000), wantLen: 2000},
		{name: "cap-plus-one-truncated", text: strings.Repeat("字", 2001), wantLen: 2000},
		{name: "emoji-are-code-points", text: strings.Repeat("📌", 2500), wantLen: 2000},
		{name: "invalid-utf8-repaired", text: "a\xffb", wantLen: 3},
		// Nothing visible is blank (the attack: NUL-only and zero-width-only hints were queued).
		{name: "nul-only", text: "\x00\x00\x00", wantErr: errs.Invalid},
		{name: "zero-width-only", text: "\u200b\u200c\u200d\u2060\ufeff", wantErr: errs.Invalid},
		{name: "controls-and-escapes-only", text: "\x1b[2J\x07\x7f\u0085\u009b", wantErr: errs.Invalid},
		{name: "bidi-marks-only", text: "\u202e\u2066\u200f\u061c", wantErr: errs.Invalid},
		{name: "combining-marks-only", text: "\u0301\u0308\u20dd\u034f", wantErr: errs.Invalid},
		{name: "variation-selectors-only", text: "\ufe0f\U000e0100", wantErr: errs.Invalid},
		{name: "tags-only", text: "\U000e0041\U000e0042\U000e007f", wantErr: errs.Invalid},
		{name: "blank-letters-only", text: "\u3164\u115f\u1160\uffa0\u2800", wantErr: errs.Invalid},
		{name: "line-and-paragraph-separators", text: "\u2028\u2029\u00a0\u3000", wantErr: errs.Invalid},
		{name: "soft-hyphen-and-mongolian-separator", text: "\u00ad\u180e", wantErr: errs.Invalid},
		{name: "private-use-and-unassigned", text: "\ue000\U000f0000\u0378", wantErr: errs.Invalid},
		{name: "invalid-utf8-only", text: "\xff\xfe\xc0", wantErr: errs.Invalid},
		{name: "mixed-invisibles", text: " \x00\u200b\t\u3164\u0301\n", wantErr: errs.Invalid},
		// One visible character is enough, and the invisible ones inside text are kept except
		// controls, which are removed (CRLF becomes a newline).
		{name: "one-visible-among-invisibles", text: "\u200b.\u200b", wantLen: 3},
		{name: "emoji-with-zwj-kept", text: "👩\u200d💻", wantLen: 3},
		{name: "controls-and-colour-codes-removed", text: "a\x00b\x1b[31mc\x1b[0m", wantLen: 3},
		{name: "terminal-title-sequence-removed", text: "\x1b]0;owned\x07hi", wantLen: 2},
		{name: "crlf-to-newline", text: "a\r\nb\rc", wantLen: 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := q.Put(ctx, "s", tc.text)
			if tc.wantErr != "" {
				wantCode(t, err, tc.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n := utf8.RuneCountInString(r.Hint.Text); n != tc.wantLen || !utf8.ValidString(r.Hint.Text) {
				t.Fatalf("stored %d code points (valid=%v), want %d", n, utf8.ValidString(r.Hint.Text), tc.wantLen)
			}
		})
	}
	sessions := []struct {
		name, id string
		ok       bool
	}{
		{name: "global", id: "", ok: true},
		{name: "max-length", id: strings.Repeat("x", MaxSessionIDLen), ok: true},
		{name: "over-max-length", id: strings.Repeat("x", MaxSessionIDLen+1)},
		{name: "control-char", id: "a\x00b"},
		{name: "reserved-star", id: "*"},
		{name: "slashes-ok", id: "proj/a/b", ok: true},
	}
	for _, tc := range sessions {
		t.Run("session-"+tc.name, func(t *testing.T) {
			_, err := q.Put(ctx, tc.id, "x")
			if tc.ok && err != nil {
				t.Fatal(err)
			}
			if !tc.ok {
				wantCode(t, err, errs.Invalid)
			}
		})
	}
}

// 9. The run-state signal.
func TestRunningSessions(t *testing.T) {
	q, _ := newQueue(t, Config{})
	if r := put(t, q, "s", "x"); r.Running {
		t.Fatal("running before any turn")
	}
	if err := q.TurnStart("s"); err != nil {
		t.Fatal(err)
	}
	if r := put(t, q, "s", "x"); !r.Running {
		t.Fatal("not running after turn start")
	}
	if r := put(t, q, "other", "x"); r.Running {
		t.Fatal("another session reported running")
	}
	if r := put(t, q, "", "x"); !r.Running {
		t.Fatal("a global hint must report running while any session runs")
	}
	if err := q.TurnEnd("s"); err != nil {
		t.Fatal(err)
	}
	if r := put(t, q, "s", "x"); r.Running {
		t.Fatal("running after turn end")
	}
	wantCode(t, q.TurnStart(""), errs.Invalid)
	wantCode(t, q.TurnEnd(""), errs.Invalid)
	if err := q.TurnEnd("never-started"); err != nil {
		t.Fatal(err)
	}
}

// 10. A restart re-delivers nothing consumed and loses nothing pending; an open take survives
// as its lease; the revision carries on.
func TestRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	q, err := New(context.Background(), Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	put(t, q, "s", "consumed")
	if _, err := q.TakeAndConfirm(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	put(t, q, "s", "leased")
	open, err := q.Take(ctx, "s")
	if err != nil || len(open.Hints) != 1 {
		t.Fatalf("take = %+v, %v", open, err)
	}
	pend := put(t, q, "s", "pending")
	before, _ := q.Snapshot(ctx)
	q.Close(context.Background())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, dir)
	defer s.Close()
	q, err = New(context.Background(), Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close(context.Background())
	after, _ := q.Snapshot(ctx)
	if after.Revision != before.Revision {
		t.Fatalf("revision %d after restart, want %d", after.Revision, before.Revision)
	}
	tk, err := q.TakeAndConfirm(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(tk.Hints) != 1 || tk.Hints[0].ID != pend.Hint.ID {
		t.Fatalf("after restart took %v, want only the pending hint", texts(tk.Hints))
	}
	if n, err := q.Rollback(ctx, open.ID); err != nil || n != 1 {
		t.Fatalf("the open take did not survive the restart: %d, %v", n, err)
	}
	tk, _ = q.TakeAndConfirm(ctx, "s")
	if got := strings.Join(texts(tk.Hints), ","); got != "leased" {
		t.Fatalf("took %q after rolling back the surviving take", got)
	}
	if tk, _ := q.TakeAndConfirm(ctx, "s"); len(tk.Hints) != 0 {
		t.Fatalf("re-delivered %v", texts(tk.Hints))
	}
}

// 11. A damaged record is skipped, not fatal.
func TestUnreadableRecordIsSkipped(t *testing.T) {
	ctx := context.Background()
	q, s := newQueue(t, Config{})
	put(t, q, "s", "before")
	if err := s.Update(ctx, func(tx *store.Tx) error {
		if err := tx.SetRaw("hint/h00000000000000000005deadbeef", []byte("{not json"), 0); err != nil {
			return err
		}
		return tx.SetRaw("hint/h00000000000000000006deadbeef", []byte(`{"id":"someone-else"}`), 0)
	}); err != nil {
		t.Fatal(err)
	}
	put(t, q, "s", "after")
	snap, err := q.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(texts(snap.Pending), ","); got != "before,after" {
		t.Fatalf("pending = %q", got)
	}
	tk, err := q.TakeAndConfirm(ctx, "s")
	if err != nil || len(tk.Hints) != 2 {
		t.Fatalf("take = %+v, %v", tk, err)
	}
}

// 12. Snapshot semantics: pending oldest first; consumed newest first and capped at
// KeepConsumed; every change bumps the revision; an empty take changes nothing.
func TestSnapshotAndCompaction(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	q, s := newQueue(t, Config{KeepConsumed: 3, Now: clk.Now})
	snap, _ := q.Snapshot(ctx)
	if snap.Revision != 0 || snap.Pending == nil || snap.Consumed == nil {
		t.Fatalf("empty snapshot = %+v (lists must be [] not null)", snap)
	}
	for i := 0; i < 5; i++ {
		clk.Add(time.Second)
		put(t, q, "s", fmt.Sprintf("c%d", i))
		clk.Add(time.Second)
		if _, err := q.TakeAndConfirm(ctx, "s"); err != nil {
			t.Fatal(err)
		}
	}
	put(t, q, "s", "p0")
	put(t, q, "s", "p1")
	snap, _ = q.Snapshot(ctx)
	if snap.Revision != 12 {
		t.Fatalf("revision = %d, want 12 (one per change)", snap.Revision)
	}
	if got := strings.Join(texts(snap.Pending), ","); got != "p0,p1" {
		t.Fatalf("pending = %s", got)
	}
	if got := strings.Join(texts(snap.Consumed), ","); got != "c4,c3,c2" {
		t.Fatalf("consumed = %s, want the 3 newest, newest first", got)
	}
	// Compaction deleted the older consumed hints from the store.
	var stored int
	if err := s.View(ctx, func(tx *store.Tx) error {
		return hints.Each(tx, "", store.ScanOptions{}, func(string, Hint) error { stored++; return nil })
	}); err != nil {
		t.Fatal(err)
	}
	if stored != 5 {
		t.Fatalf("%d hints stored, want 5 (2 pending + 3 consumed)", stored)
	}
	if tk, _ := q.TakeAndConfirm(ctx, "nobody-else"); len(tk.Hints) != 0 {
		t.Fatal("took another session's hints")
	}
	if again, _ := q.Snapshot(ctx); again.Revision != snap.Revision {
		t.Fatalf("an empty take bumped the revision to %d", again.Revision)
	}
}

// Compaction never deletes a consumed hint an open take still holds: the rollback must find it.
func TestCompactionKeepsLeasedHints(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	q, _ := newQueue(t, Config{KeepConsumed: 1, Now: clk.Now})
	put(t, q, "s", "held")
	held, err := q.Take(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		clk.Add(time.Second)
		put(t, q, "s", fmt.Sprintf("c%d", i))
		if _, err := q.TakeAndConfirm(ctx, "s"); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := q.Rollback(ctx, held.ID); err != nil || n != 1 {
		t.Fatalf("rollback = %d, %v: the held hint was compacted away", n, err)
	}
	if tk, _ := q.TakeAndConfirm(ctx, "s"); strings.Join(texts(tk.Hints), ",") != "held" {
		t.Fatalf("took %v", texts(tk.Hints))
	}
}

func TestConfigValidation(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{name: "zero-value", cfg: Config{}, ok: true},
		{name: "zh", cfg: Config{Locale: "zh"}, ok: true},
		{name: "unknown-locale", cfg: Config{Locale: "xx"}},
		{name: "negative-limit", cfg: Config{MaxPerStep: -1}},
		{name: "negative-lease", cfg: Config{Lease: -time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Store = s
			q, err := New(context.Background(), cfg)
			if tc.ok != (err == nil) {
				t.Fatalf("err = %v", err)
			}
			if err == nil {
				c := q.Config()
				if c.MaxPerStep != 20 || c.MaxContentChars != 2000 || c.MaxPendingPerSession != 20 ||
					c.KeepConsumed != 20 || c.HeartbeatInterval != 25*time.Second || c.Lease != 2*time.Minute {
					t.Fatalf("defaults = %+v", c)
				}
				q.Close(context.Background())
			} else {
				wantCode(t, err, errs.Invalid)
			}
		})
	}
	if _, err := New(context.Background(), Config{}); err == nil {
		t.Fatal("New without a store succeeded")
	}
}

// KeepConsumed at its edge: 20 consumed hints are all kept; the 21st deletes the oldest.
func TestKeepConsumedEdge(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{DefaultKeepConsumed, DefaultKeepConsumed + 1} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			q, s := newQueue(t, Config{Now: clk.Now})
			var ids []string
			for i := 0; i < n; i++ {
				clk.Add(time.Second)
				ids = append(ids, put(t, q, "s", fmt.Sprint("c", i)).Hint.ID)
				if _, err := q.TakeAndConfirm(ctx, "s"); err != nil {
					t.Fatal(err)
				}
			}
			snap, _ := q.Snapshot(ctx)
			var stored []string
			if err := s.View(ctx, func(tx *store.Tx) error {
				return hints.Each(tx, "", store.ScanOptions{}, func(id string, _ Hint) error { stored = append(stored, id); return nil })
			}); err != nil {
				t.Fatal(err)
			}
			if len(snap.Consumed) != DefaultKeepConsumed || len(stored) != DefaultKeepConsumed {
				t.Fatalf("%d consumed: snapshot shows %d, store keeps %d; want %d", n, len(snap.Consumed), len(stored), DefaultKeepConsumed)
			}
			if snap.Consumed[0].ID != ids[n-1] || stored[0] != ids[n-DefaultKeepConsumed] {
				t.Fatalf("kept the wrong ones: newest shown %s, oldest stored %s", snap.Consumed[0].ID, stored[0])
			}
		})
	}
}

// HasPending answers what a take would find, without taking: the session's own and the global
// hints count, another session's do not, and an empty session sees only the global queue.
func TestHasPending(t *testing.T) {
	ctx := context.Background()
	q, _ := newQueue(t, Config{})
	check := func(session string, want bool) {
		t.Helper()
		got, err := q.HasPending(ctx, session)
		if err != nil || got != want {
			t.Fatalf("HasPending(%q) = %v, %v; want %v", session, got, err, want)
		}
	}
	check("s1", false)
	check("", false)
	put(t, q, "s2", "for s2")
	check("s1", false)
	check("", false)
	check("s2", true)
	put(t, q, "", "for everyone")
	check("s1", true)
	check("", true)
	if tk, err := q.TakeAndConfirm(ctx, "s1"); err != nil || len(tk.Hints) != 1 {
		t.Fatalf("take = %+v, %v", tk, err)
	}
	check("s1", false)
	check("s2", true)
	_, err := q.HasPending(ctx, "*")
	wantCode(t, err, errs.Invalid)
}

// Renew moves an open take's expiry forward, so the sweep leaves it alone; a closed or unknown
// take is not found.
func TestRenewExtendsTheLease(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	q, _ := newQueue(t, Config{Now: clk.Now, Lease: time.Minute})
	put(t, q, "s", "one")
	tk, err := q.Take(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(50 * time.Second)
	exp, err := q.Renew(ctx, tk.ID)
	if err != nil || !exp.Equal(clk.Now().Add(time.Minute)) {
		t.Fatalf("renew = %v, %v", exp, err)
	}
	clk.Add(30 * time.Second) // past the first expiry, before the renewed one
	if n, _ := q.sweep(ctx); n != 0 {
		t.Fatalf("swept %d renewed leases", n)
	}
	if n, err := q.Confirm(ctx, tk.ID); err != nil || n != 1 {
		t.Fatalf("confirm after renew = %d, %v", n, err)
	}
	_, err = q.Renew(ctx, tk.ID)
	wantCode(t, err, errs.NotFound)
	_, err = q.Renew(ctx, "t-not-an-id")
	wantCode(t, err, errs.NotFound)
	_, err = q.Renew(ctx, "")
	wantCode(t, err, errs.Invalid)
}

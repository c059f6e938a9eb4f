package hint

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
)

// decodedHint is a cached decoding of a stored record.
type decodedHint struct {
	raw []byte
	h   Hint
}

// txState is the queue as one transaction sees it, plus the changes it makes.
type txState struct {
	now      time.Time
	rev      uint64
	list     []*Hint // every readable hint, in id order (oldest first)
	byID     map[string]*Hint
	dirty    map[string]bool
	deleted  []string
	actions  []Action
	changed  bool
	snapshot Snapshot
}

func (st *txState) touch(h *Hint) {
	st.dirty[h.ID] = true
	st.changed = true
}

func (st *txState) add(h *Hint) {
	st.list = append(st.list, h) // ids increase, so the list stays in order
	st.byID[h.ID] = h
	st.touch(h)
}

func (st *txState) act(kind ActionKind, h *Hint, reason string) {
	st.actions = append(st.actions, Action{Kind: kind, Hint: *h, Reason: reason})
}

// load reads the revision and every hint. Records that do not decode are skipped (and logged
// once): one damaged value must not stop the queue.
func (q *Queue) load(tx *store.Tx) (*txState, error) {
	st := &txState{now: q.cfg.Now().UTC(), byID: map[string]*Hint{}, dirty: map[string]bool{}}
	rev, err := meta.Get(tx, revisionID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	st.rev = rev
	prefix := hints.Name() + "/"
	q.decMu.Lock()
	defer q.decMu.Unlock()
	err = tx.ScanRaw(prefix, store.ScanOptions{}, func(key string, raw []byte) error {
		h, ok := q.decode(key, raw)
		if !ok || h.ID != strings.TrimPrefix(key, prefix) {
			if _, seen := q.badKeys.LoadOrStore(key, true); !seen {
				q.log.Warn("hint: skipping an unreadable record", "key", key)
			}
			return nil
		}
		st.list = append(st.list, &h)
		st.byID[h.ID] = &h
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(q.decoded) > 2*len(st.list)+64 {
		// Forget records that are gone (deleted here or by another Queue over the store).
		for k := range q.decoded {
			if _, ok := st.byID[strings.TrimPrefix(k, prefix)]; !ok {
				delete(q.decoded, k)
			}
		}
	}
	return st, nil
}

// decode decodes a stored hint, reusing the previous decoding when the stored bytes are the same:
// every operation reads the whole queue in its transaction (that read is what makes the store
// detect conflicting operations), but only changed records cost a JSON decode. The caller holds
// decMu.
func (q *Queue) decode(key string, raw []byte) (Hint, bool) {
	if c, ok := q.decoded[key]; ok && bytes.Equal(c.raw, raw) {
		return c.h, true
	}
	var h Hint
	if err := json.Unmarshal(raw, &h); err != nil {
		return Hint{}, false
	}
	q.decoded[key] = decodedHint{raw: raw, h: h}
	return h, true
}

// mutate runs fn in one store transaction over the loaded state. When fn changed something, the
// old consumed and cancelled hints are compacted, the changes and the bumped revision written,
// and the new snapshot and fn's actions published after the commit.
func (q *Queue) mutate(ctx context.Context, fn func(tx *store.Tx, st *txState) error) (*txState, error) {
	var out *txState
	// Every change reads the queue and bumps one revision: over a shared store, queue them on
	// one lock instead of letting them collide and retry (an embedded store runs Update).
	err := q.st.UpdateSerial(ctx, "hint-queue", func(tx *store.Tx) error {
		out = nil
		st, err := q.load(tx)
		if err != nil {
			return err
		}
		if err := fn(tx, st); err != nil {
			return err
		}
		if !st.changed {
			out = st
			return nil
		}
		q.compact(st)
		for id := range st.dirty {
			if err := hints.Put(tx, id, *st.byID[id]); err != nil {
				return err
			}
		}
		for _, id := range st.deleted {
			if err := hints.Delete(tx, id); err != nil {
				return err
			}
		}
		st.rev++
		if err := meta.Put(tx, revisionID, st.rev); err != nil {
			return err
		}
		for i := range st.actions {
			st.actions[i].Revision = st.rev
		}
		st.snapshot = q.snapshotOf(st)
		if q.rl != nil {
			// Shared store: the relays of every replica publish it (shared.go).
			if err := q.logChange(tx, st.rev, st.actions); err != nil {
				return err
			}
			out = st
			return nil
		}
		snap, acts := st.snapshot, st.actions
		tx.AfterCommit(func() { q.bc.publish(snap, acts) })
		out = st
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// compact deletes the consumed hints beyond the KeepConsumed most recent ones (never one an open
// take still holds: a rollback must find it) and the cancelled hints beyond as many.
func (q *Queue) compact(st *txState) {
	var consumed, cancelled []*Hint
	for _, h := range st.list {
		switch h.State {
		case Consumed:
			consumed = append(consumed, h)
		case Cancelled:
			cancelled = append(cancelled, h)
		}
	}
	gone := map[string]bool{}
	newestFirst := func(at func(*Hint) time.Time) func(a, b *Hint) int {
		return func(a, b *Hint) int {
			if c := at(b).Compare(at(a)); c != 0 {
				return c
			}
			return strings.Compare(b.ID, a.ID)
		}
	}
	slices.SortFunc(consumed, newestFirst(func(h *Hint) time.Time { return h.ConsumedAt }))
	for i, h := range consumed {
		if i >= q.cfg.KeepConsumed && h.TakeID == "" {
			gone[h.ID] = true
		}
	}
	slices.SortFunc(cancelled, newestFirst(func(h *Hint) time.Time { return h.CancelledAt }))
	for i, h := range cancelled {
		if i >= q.cfg.KeepConsumed {
			gone[h.ID] = true
		}
	}
	if len(gone) == 0 {
		return
	}
	kept := st.list[:0]
	for _, h := range st.list {
		if gone[h.ID] {
			st.deleted = append(st.deleted, h.ID)
			delete(st.dirty, h.ID)
			delete(st.byID, h.ID)
			continue
		}
		kept = append(kept, h)
	}
	st.list = kept
}

func (q *Queue) snapshotOf(st *txState) Snapshot {
	s := Snapshot{Revision: st.rev, Pending: []Hint{}, Consumed: []Hint{}}
	for _, h := range st.list {
		switch h.State {
		case Pending:
			s.Pending = append(s.Pending, *h)
		case Consumed:
			s.Consumed = append(s.Consumed, *h)
		}
	}
	sortNewestConsumed(s.Consumed)
	if len(s.Consumed) > q.cfg.KeepConsumed {
		s.Consumed = s.Consumed[:q.cfg.KeepConsumed]
	}
	return s
}

func sortNewestConsumed(hs []Hint) {
	slices.SortFunc(hs, func(a, b Hint) int {
		if c := b.ConsumedAt.Compare(a.ConsumedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
}

// Snapshot returns the current state.
func (q *Queue) Snapshot(ctx context.Context) (Snapshot, error) {
	var snap Snapshot
	err := q.st.View(ctx, func(tx *store.Tx) error {
		st, err := q.load(tx)
		if err != nil {
			return err
		}
		snap = q.snapshotOf(st)
		return nil
	})
	if err != nil {
		return Snapshot{}, errs.Wrap(errs.Internal, err, "hint: read the queue")
	}
	return snap, nil
}

// Put queues text for session (empty means global). Blank text is refused with errs.Invalid;
// text over MaxContentChars code points is truncated. When the session already has
// MaxPendingPerSession pending hints, its oldest pending hints are cancelled (evicted) in the
// same transaction and reported in PutResult.Dropped.
func (q *Queue) Put(ctx context.Context, session, text string) (PutResult, error) {
	if err := checkSession(session, true); err != nil {
		return PutResult{}, err
	}
	text, err := q.cleanText(text)
	if err != nil {
		return PutResult{}, err
	}
	var res PutResult
	st, err := q.mutate(ctx, func(tx *store.Tx, st *txState) error {
		res = PutResult{}
		var pending []*Hint
		for _, h := range st.list {
			if h.State == Pending && h.SessionID == session {
				pending = append(pending, h)
			}
		}
		for len(pending) >= q.cfg.MaxPendingPerSession {
			old := pending[0]
			pending = pending[1:]
			old.State, old.CancelledAt, old.Dropped = Cancelled, st.now, true
			st.touch(old)
			st.act(ActionCancelled, old, "dropped")
			res.Dropped = append(res.Dropped, *old)
		}
		h := &Hint{ID: q.newID("h", st.now), Text: text, SessionID: session, CreatedAt: st.now, State: Pending}
		st.add(h)
		st.act(ActionAdded, h, "")
		res.Hint = *h
		return nil
	})
	if err != nil {
		return PutResult{}, q.wrap(err, "queue the hint")
	}
	res.Revision = st.rev
	res.Running = q.Running(session)
	return res, nil
}

// Cancel cancels a pending hint. It fails with errs.NotFound for an unknown id and errs.Conflict
// for a hint already consumed or cancelled.
func (q *Queue) Cancel(ctx context.Context, id string) (Hint, error) {
	if id == "" {
		return Hint{}, errs.New(errs.Invalid, "id is required")
	}
	if !validID("h", id) {
		return Hint{}, errs.New(errs.NotFound, "%s", q.msg.ErrNotFound)
	}
	var out Hint
	_, err := q.mutate(ctx, func(tx *store.Tx, st *txState) error {
		h := st.byID[id]
		switch {
		case h == nil:
			return errs.New(errs.NotFound, "%s", q.msg.ErrNotFound)
		case h.State == Consumed:
			return errs.New(errs.Conflict, "%s", q.msg.ErrConsumed)
		case h.State == Cancelled:
			return errs.New(errs.Conflict, "%s", q.msg.ErrCancelled)
		}
		h.State, h.CancelledAt = Cancelled, st.now
		st.touch(h)
		st.act(ActionCancelled, h, "")
		out = *h
		return nil
	})
	if err != nil {
		return Hint{}, q.wrap(err, "cancel the hint")
	}
	return out, nil
}

// HasPending reports whether a take for session would hand anything out: a pending hint of
// session or a global one (for the empty session, a global one). It is one read and no write, so
// a caller can check on every step and parse or take only when it says yes; a take that follows
// may still find nothing (another step took the hints meanwhile).
func (q *Queue) HasPending(ctx context.Context, session string) (bool, error) {
	if err := checkSession(session, true); err != nil {
		return false, err
	}
	found := false
	err := q.st.View(ctx, func(tx *store.Tx) error {
		st, err := q.load(tx)
		if err != nil {
			return err
		}
		for _, h := range st.list {
			if h.State == Pending && (h.SessionID == session || h.SessionID == "") {
				found = true
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return false, q.wrap(err, "read the queue")
	}
	return found, nil
}

// Take hands out session's pending hints together with the global ones, oldest first, at most
// MaxPerStep, and marks them consumed under a lease in the same transaction. With an empty
// session only global hints are taken: a hint whose owner is unknown is never fed to another
// session. The caller must Confirm or Rollback the returned take ID; an unconfirmed take is
// rolled back after Config.Lease. Nothing pending means an empty Take and no write at all.
func (q *Queue) Take(ctx context.Context, session string) (Take, error) {
	return q.take(ctx, session, false)
}

// TakeAndConfirm is Take and Confirm in one transaction, for callers that cannot fail after
// taking: there is no lease and nothing to roll back.
func (q *Queue) TakeAndConfirm(ctx context.Context, session string) (Take, error) {
	return q.take(ctx, session, true)
}

func (q *Queue) take(ctx context.Context, session string, confirm bool) (Take, error) {
	if err := checkSession(session, true); err != nil {
		return Take{}, err
	}
	var res Take
	st, err := q.mutate(ctx, func(tx *store.Tx, st *txState) error {
		res = Take{SessionID: session, Hints: []Hint{}, Confirmed: confirm}
		var picked []*Hint
		for _, h := range st.list {
			if h.State == Pending && (h.SessionID == session || h.SessionID == "") {
				picked = append(picked, h)
				if len(picked) == q.cfg.MaxPerStep {
					break
				}
			}
		}
		if len(picked) == 0 {
			return nil
		}
		if !confirm {
			l := lease{ID: q.newID("t", st.now), SessionID: session, TakenAt: st.now, ExpiresAt: st.now.Add(q.cfg.Lease)}
			for _, h := range picked {
				l.HintIDs = append(l.HintIDs, h.ID)
			}
			if err := leases.Put(tx, l.ID, l); err != nil {
				return err
			}
			res.ID, res.ExpiresAt = l.ID, l.ExpiresAt
		}
		for _, h := range picked {
			h.State, h.ConsumedAt, h.TakeID = Consumed, st.now, res.ID
			st.touch(h)
			if confirm {
				st.act(ActionConsumed, h, "")
			}
			res.Hints = append(res.Hints, *h)
		}
		return nil
	})
	if err != nil {
		return Take{}, q.wrap(err, "take hints")
	}
	res.Revision = st.rev
	res.Message = q.Render(res.Hints)
	return res, nil
}

// Confirm closes an open take: its hints stay consumed for good, and their consumed actions (the
// receipts) are published. It returns how many hints it confirmed. Confirm is idempotent: a
// repeated confirm of a confirmed take (a retry whose first answer was lost) succeeds again with
// the same count and changes nothing. It fails with errs.Conflict when the take was rolled back
// or its lease expired first (details {"take": "rolled-back"|"expired"}; the hints are pending
// again and an expired take's will be delivered again), and with errs.NotFound for a take it does
// not know. Closed takes are remembered for ClosedTakeMemory.
func (q *Queue) Confirm(ctx context.Context, takeID string) (int, error) {
	return q.finish(ctx, takeID, true)
}

// Rollback returns an open take's hints to pending (only those still consumed under that take),
// so the next step takes them again. It returns how many hints it returned. Like Confirm it is
// idempotent: rolling back a rolled-back or expired take succeeds (its hints are pending
// already; the count is the first rollback's, 0 for an expired take). It fails with
// errs.Conflict for a confirmed take (details {"take": "confirmed"}) and errs.NotFound for an
// unknown one.
func (q *Queue) Rollback(ctx context.Context, takeID string) (int, error) {
	return q.finish(ctx, takeID, false)
}

// Renew extends an open take's lease to Config.Lease from now, for a caller that is still
// legitimately waiting to learn whether the step happened (a model API that sends its status line
// only after the whole answer). It returns the new expiry, and fails with errs.NotFound when the
// take is not open. A renewal changes no hint, so it publishes nothing.
func (q *Queue) Renew(ctx context.Context, takeID string) (time.Time, error) {
	if takeID == "" {
		return time.Time{}, errs.New(errs.Invalid, "takeId is required")
	}
	if !validID("t", takeID) {
		return time.Time{}, errs.New(errs.NotFound, "%s", q.msg.ErrTakeNotFound)
	}
	var exp time.Time
	err := q.st.UpdateSerial(ctx, "hint-queue", func(tx *store.Tx) error {
		l, err := leases.Get(tx, takeID)
		if errors.Is(err, store.ErrNotFound) {
			return errs.New(errs.NotFound, "%s", q.msg.ErrTakeNotFound)
		}
		if err != nil {
			return err
		}
		l.ExpiresAt = q.cfg.Now().UTC().Add(q.cfg.Lease)
		exp = l.ExpiresAt
		return leases.Put(tx, l.ID, l)
	})
	if err != nil {
		return time.Time{}, q.wrap(err, "renew the take")
	}
	return exp, nil
}

// ClosedTakeMemory is how long a confirmed, rolled-back or expired take is remembered, so that a
// repeated confirm or rollback gets the first one's answer rather than "not found".
const ClosedTakeMemory = 10 * time.Minute

// How a take was closed.
const (
	takeConfirmed  = "confirmed"
	takeRolledBack = "rolled-back"
	takeExpired    = "expired"
)

// closedTake remembers how a take ended (hint-take-closed/<take id>, with a TTL).
type closedTake struct {
	Outcome  string    `json:"outcome"`
	Hints    int       `json:"hints"`
	ClosedAt time.Time `json:"closedAt"`
}

var closedTakes = store.NewCollection[closedTake]("hint-take-closed")

func (q *Queue) finish(ctx context.Context, takeID string, confirm bool) (int, error) {
	if takeID == "" {
		return 0, errs.New(errs.Invalid, "takeId is required")
	}
	if !validID("t", takeID) {
		return 0, errs.New(errs.NotFound, "%s", q.msg.ErrTakeNotFound)
	}
	var n int
	_, err := q.mutate(ctx, func(tx *store.Tx, st *txState) error {
		l, err := leases.Get(tx, takeID)
		if errors.Is(err, store.ErrNotFound) {
			n, err = q.repeat(tx, takeID, confirm)
			return err
		}
		if err != nil {
			return err
		}
		outcome := takeRolledBack
		if confirm {
			outcome = takeConfirmed
		}
		n, err = q.close(tx, st, l, outcome)
		return err
	})
	if err != nil {
		what := "roll back the take"
		if confirm {
			what = "confirm the take"
		}
		return 0, q.wrap(err, what)
	}
	return n, nil
}

// repeat answers a confirm or rollback of a take that is no longer open from how it was closed.
func (q *Queue) repeat(tx *store.Tx, takeID string, confirm bool) (int, error) {
	c, err := closedTakes.Get(tx, takeID)
	if errors.Is(err, store.ErrNotFound) {
		return 0, errs.New(errs.NotFound, "%s", q.msg.ErrTakeNotFound)
	}
	if err != nil {
		return 0, err
	}
	conflict := func(msg string) error {
		return errs.New(errs.Conflict, "%s", msg).WithDetails(map[string]any{"take": c.Outcome, "closedAt": c.ClosedAt})
	}
	switch {
	case confirm && c.Outcome == takeConfirmed, !confirm && c.Outcome == takeRolledBack:
		return c.Hints, nil
	case !confirm && c.Outcome == takeExpired:
		return 0, nil
	case confirm && c.Outcome == takeExpired:
		return 0, conflict(q.msg.ErrTakeExpired)
	case confirm:
		return 0, conflict(q.msg.ErrTakeRolledBack)
	}
	return 0, conflict(q.msg.ErrTakeConfirmed)
}

// close confirms or rolls back (outcome) one lease inside a transaction, deletes it and
// remembers how it was closed.
func (q *Queue) close(tx *store.Tx, st *txState, l lease, outcome string) (int, error) {
	confirm := outcome == takeConfirmed
	n := 0
	for _, id := range l.HintIDs {
		h := st.byID[id]
		if h == nil || h.State != Consumed || h.TakeID != l.ID {
			continue
		}
		h.TakeID = ""
		if confirm {
			st.act(ActionConsumed, h, "")
		} else {
			h.State, h.ConsumedAt = Pending, time.Time{}
		}
		st.touch(h)
		n++
	}
	st.changed = true
	if err := closedTakes.PutTTL(tx, l.ID, closedTake{Outcome: outcome, Hints: n, ClosedAt: st.now}, ClosedTakeMemory); err != nil {
		return 0, err
	}
	return n, leases.Delete(tx, l.ID)
}

// sweepEvery is how often expired leases are looked for.
func (q *Queue) sweepEvery() time.Duration {
	return min(max(q.cfg.Lease/4, 10*time.Millisecond), 15*time.Second)
}

func (q *Queue) sweepLoop() {
	defer q.wg.Done()
	t := time.NewTicker(q.sweepEvery())
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-q.stop
		cancel()
	}()
	for {
		// One replica sweeps at a time (an embedded store always leads, without a write).
		if lead, err := q.st.Lead(ctx, "hint-lease-sweep", 3*q.sweepEvery()+time.Second); err != nil && ctx.Err() == nil {
			q.log.Warn("hint: lease sweep failed", "err", err)
		} else if lead {
			if _, err := q.sweep(ctx); err != nil && ctx.Err() == nil {
				q.log.Warn("hint: lease sweep failed", "err", err)
			}
		}
		select {
		case <-q.stop:
			return
		case <-t.C:
		}
	}
}

// sweep rolls back every take whose lease has expired and returns how many it rolled back.
func (q *Queue) sweep(ctx context.Context) (int, error) {
	now := q.cfg.Now()
	var due []string
	err := q.st.View(ctx, func(tx *store.Tx) error {
		return leases.Each(tx, "", store.ScanOptions{}, func(id string, l lease) error {
			if !l.ExpiresAt.After(now) {
				due = append(due, id)
			}
			return nil
		})
	})
	if err != nil || len(due) == 0 {
		return 0, err
	}
	var expired []lease
	_, err = q.mutate(ctx, func(tx *store.Tx, st *txState) error {
		expired = nil
		for _, id := range due {
			l, err := leases.Get(tx, id)
			if errors.Is(err, store.ErrNotFound) {
				continue // confirmed or rolled back meanwhile
			}
			if err != nil {
				return err
			}
			if l.ExpiresAt.After(st.now) {
				continue
			}
			if _, err := q.close(tx, st, l, takeExpired); err != nil {
				return err
			}
			expired = append(expired, l)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, l := range expired {
		q.log.Warn("hint: a take was neither confirmed nor rolled back in time; its hints are pending again",
			"take", l.ID, "session", l.SessionID, "hints", len(l.HintIDs), "takenAt", l.TakenAt)
	}
	return len(expired), nil
}

// wrap gives uncoded (store) errors a code; coded errors pass through.
func (q *Queue) wrap(err error, what string) error {
	var ce *errs.Error
	if errors.As(err, &ce) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if errors.Is(err, store.ErrConflict) {
		return errs.Wrap(errs.Conflict, err, "hint: could not %s: too many concurrent updates, try again", what)
	}
	return errs.Wrap(errs.Internal, err, "hint: could not %s", what)
}

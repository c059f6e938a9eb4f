package locus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pixie-dev/pixie/internal/clip"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
)

// MaxReasonChars caps a no-reply or failure reason.
const MaxReasonChars = 500

// Outcome is how a Delivery ends.
type Outcome struct {
	State string // DeliveryDone, DeliveryFailed or DeliveryTimedOut
	// Reply is the body to send (DeliveryDone with a reply).
	Reply string
	// NoReply is the executor's reason for not replying (DeliveryDone without a reply).
	NoReply string
	// Fail says why it failed or timed out.
	Fail string
	// Agent, when set, is the final record of the built-in executor's agent run (it replaces
	// what RecordAgent wrote while the run went on).
	Agent *AgentRun
}

// Check validates the settling caller against the current Delivery and its Locus.
type Check func(d Delivery, l Locus) error

// Send sends the reply of a settling Delivery d (the caller's Lark side) and returns the
// reply's message id.
type Send func(ctx context.Context, d Delivery) (replyID string, err error)

// Settle ends the current Delivery id with o. The Delivery must be current and pass check (nil
// checks nothing); with a reply, send sends it first (on failure the Delivery stays current
// and the error is returned). Then, under the Locus's side lock, the Delivery's images are
// deleted and one transaction marks it settled, adds the question and answer to the child's
// history, makes the next queued Delivery current and prunes the settled ones; any run of it
// is stopped. Only one settlement of a Delivery runs at a time: in this process, and over a
// shared store in every replica (a mark in lark-settling, and the note "settled <id>" that
// every replica hears). It returns the settled Delivery and the next one, now current (nil
// when none); the reactions and the next Delivery's start are the caller's.
func (q *Queue) Settle(ctx context.Context, id string, check Check, o Outcome, send Send) (Delivery, *Delivery, error) {
	if !q.claim(q.settling, id) {
		return Delivery{}, nil, errs.New(errs.Conflict, "the Delivery is being settled by another request")
	}
	defer q.release(q.settling, id)
	if q.st.Shared() {
		release, err := q.claimSettle(ctx, id)
		if err != nil {
			return Delivery{}, nil, err
		}
		defer release()
	}

	d, l, err := q.loadCurrent(ctx, id)
	if err != nil {
		return Delivery{}, nil, err
	}
	if check != nil {
		if err := check(d, l); err != nil {
			return Delivery{}, nil, err
		}
	}
	replyID := ""
	if o.Reply != "" {
		if replyID, err = send(ctx, d); err != nil {
			return Delivery{}, nil, err
		}
	}
	unlock, err := q.sideLock(ctx, l.ID)
	if err != nil {
		return Delivery{}, nil, err
	}
	_ = q.spool.Remove(d.ID)
	var settled Delivery
	var next *Delivery
	err = q.st.Update(ctx, func(tx *store.Tx) error {
		d, l, err := currentIn(tx, id)
		if err != nil {
			return err
		}
		if check != nil {
			// Again, inside the transaction: a wait may have moved the deadline meanwhile.
			if err := check(d, l); err != nil {
				return err
			}
		}
		if q.st.Shared() {
			if err := tx.Notify(q.cfg.Topic, noteSettled+id); err != nil {
				return err
			}
			if err := colReady.Delete(tx, id); err != nil {
				return err
			}
		}
		now := q.now()
		d.State, d.SettledAt = o.State, ptime(now)
		d.Replied, d.ReplyMessageID = o.Reply != "", replyID
		d.NoReplyReason, d.FailReason = o.NoReply, o.Fail
		if o.Agent != nil {
			d.Agent = o.Agent
		}
		if err := colDelivery.Put(tx, deliveryKey(l.ID, d.Seq), d); err != nil {
			return err
		}
		if o.Reply != "" {
			if err := q.remember(tx, l.ChildID, d.Text, o.Reply, now); err != nil {
				return err
			}
		}
		next, err = q.promoteNext(tx, &l, d.Seq)
		if err != nil {
			return err
		}
		if err := colLocus.Put(tx, l.ID, l); err != nil {
			return err
		}
		settled = d
		return pruneSettled(tx, l.ID)
	})
	unlock()
	if err != nil {
		return Delivery{}, nil, err
	}
	q.cancelRun(id)
	q.forgetReady(id)
	return settled, next, nil
}

// RecordAgent writes run as the agent record of Delivery id while it is current (the built-in
// executor calls it as each tool call is made). A Delivery no longer current is left alone:
// its settlement wrote the record it keeps.
func (q *Queue) RecordAgent(ctx context.Context, id string, run AgentRun) error {
	err := q.st.Update(ctx, func(tx *store.Tx) error {
		d, l, err := currentIn(tx, id)
		if err != nil {
			return err
		}
		d.Agent = &run
		return colDelivery.Put(tx, deliveryKey(l.ID, d.Seq), d)
	})
	if errs.Is(err, errs.Conflict) || errs.Is(err, errs.NotFound) {
		return nil
	}
	return err
}

// remember appends a question and answer to the child's own history (bounded).
func (q *Queue) remember(tx *store.Tx, childID, question, answer string, at time.Time) error {
	ch, err := colChild.Get(tx, childID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	ch.History = append(ch.History, Turn{Question: clip.Runes(question, 4000), Answer: clip.Runes(answer, 4000), At: at})
	if n := len(ch.History) - q.cfg.HistoryTurns; n > 0 {
		ch.History = append([]Turn(nil), ch.History[n:]...)
	}
	return colChild.Put(tx, ch.ID, ch)
}

// loadCurrent reads Delivery id and its Locus, requiring it to be the Locus's current one.
func (q *Queue) loadCurrent(ctx context.Context, id string) (d Delivery, l Locus, err error) {
	err = q.st.View(ctx, func(tx *store.Tx) error {
		d, l, err = currentIn(tx, id)
		return err
	})
	return d, l, err
}

// Activation is the caller's side of activating a current Delivery: its Lark side effects.
type Activation struct {
	// React adds the working reaction to cur's message and returns its id ("" when it could
	// not).
	React func(ctx context.Context, cur Delivery) string
	// Unreact takes back reaction rid, added while cur was being settled.
	Unreact func(ctx context.Context, cur Delivery, rid string)
	// Download fetches the image key of cur's message (for the spool).
	Download func(ctx context.Context, cur Delivery, key string) ([]byte, error)
	// Start starts cur's executor run, if the caller runs one (after the side lock is given up,
	// before the activation's claim is).
	Start func(cur Delivery, l Locus)
}

// Activate activates Delivery d, once it is current: once per process at a time (a second
// call while one runs does nothing), and under its Locus's side lock, so that its settlement
// never overtakes it. The working reaction is added (unless d has one) and recorded, and taken
// back when d was settled meanwhile; its images go into the spool; Current stops waiting for
// it, here and over a shared store on every replica (lark-ready/<id> and the note "ready
// <id>"). Then a's Start runs. A Delivery no longer current is left alone.
func (q *Queue) Activate(ctx context.Context, d Delivery, a Activation) {
	if !q.claim(q.activating, d.ID) {
		return
	}
	defer q.release(q.activating, d.ID)
	unlock, err := q.sideLock(ctx, d.LocusID)
	if err != nil {
		return
	}
	// Still current? (It may have been settled while waiting for the lock.)
	cur, l, err := q.loadCurrent(ctx, d.ID)
	if err != nil {
		unlock()
		return
	}
	if cur.WorkingReaction == "" {
		if rid := a.React(ctx, cur); rid != "" {
			err := q.st.Update(ctx, func(tx *store.Tx) error {
				x, _, err := currentIn(tx, d.ID)
				if err != nil {
					return err
				}
				x.WorkingReaction = rid
				return colDelivery.Put(tx, deliveryKey(x.LocusID, x.Seq), x)
			})
			if err != nil {
				// Settled meanwhile: take the reaction back.
				a.Unreact(ctx, cur, rid)
			}
		}
	}
	q.spool.Fetch(ctx, cur.ID, cur.Images, func(ctx context.Context, key string) ([]byte, error) {
		return a.Download(ctx, cur, key)
	})
	q.markReady(cur.ID)
	if q.st.Shared() {
		if err := q.announceReady(ctx, cur.ID); err != nil {
			q.cfg.Logger.Warn("lark: the activation could not be announced", "delivery", cur.ID, "err", err.Error())
		}
	}
	unlock()
	if a.Start != nil {
		a.Start(cur, l)
	}
}

// announceReady records that Delivery id's activation is done, for Current on every replica.
func (q *Queue) announceReady(ctx context.Context, id string) error {
	return q.st.Update(context.WithoutCancel(ctx), func(tx *store.Tx) error {
		if err := colReady.PutTTL(tx, id, true, q.cfg.MaxDeadline+time.Hour); err != nil {
			return err
		}
		return tx.Notify(q.cfg.Topic, noteReady+id)
	})
}

// AfterSettle runs f for settled Delivery d under its Locus's side lock (so that it never
// overtakes an activation still under way), with the working reaction recorded on d now (the
// activation may have recorded it after d was read). It does nothing when ctx ends before the
// lock is free.
func (q *Queue) AfterSettle(ctx context.Context, d Delivery, f func(working string)) {
	unlock, err := q.sideLock(ctx, d.LocusID)
	if err != nil {
		return
	}
	defer unlock()
	working := d.WorkingReaction
	_ = q.st.View(ctx, func(tx *store.Tx) error {
		if x, err := colDelivery.Get(tx, deliveryKey(d.LocusID, d.Seq)); err == nil {
			working = x.WorkingReaction
		}
		return nil
	})
	f(working)
}

// Notes of the queue on its topic (shared stores).
const (
	noteSettled = "settled "
	noteReady   = "ready "
)

// Heard applies another replica's note on the queue's topic to this process: a Delivery
// settled (its run is stopped, its local images dropped) or activated. ok reports whether
// payload was such a note; settledID names the Delivery settled.
func (q *Queue) Heard(payload string) (settledID string, ok bool) {
	switch {
	case strings.HasPrefix(payload, noteSettled):
		id := strings.TrimPrefix(payload, noteSettled)
		q.cancelRun(id)
		q.forgetReady(id)
		q.spool.RemoveLocal(id)
		return id, true
	case strings.HasPrefix(payload, noteReady):
		q.markReady(strings.TrimPrefix(payload, noteReady))
		return "", true
	}
	return "", false
}

// claimSettle marks Delivery id as being settled by this replica; the returned func clears
// the mark.
func (q *Queue) claimSettle(ctx context.Context, id string) (func(), error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	mark := q.st.Instance() + "/" + hex.EncodeToString(b[:])
	errBusy := errs.New(errs.Conflict, "the Delivery is being settled by another request")
	err := q.st.Update(ctx, func(tx *store.Tx) error {
		ok, err := colSettling.Has(tx, id)
		if err != nil {
			return err
		}
		if ok {
			return errBusy
		}
		return colSettling.PutTTL(tx, id, mark, q.cfg.SettleTTL)
	})
	if err != nil {
		return nil, err
	}
	return func() {
		bg, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = q.st.Update(bg, func(tx *store.Tx) error {
			if v, err := colSettling.Get(tx, id); err != nil || v != mark {
				return nil
			}
			return colSettling.Delete(tx, id)
		})
	}, nil
}

// readyInStore reports whether Delivery id's activation is recorded as done.
func (q *Queue) readyInStore(ctx context.Context, id string) bool {
	ok := false
	_ = q.st.View(ctx, func(tx *store.Tx) (err error) {
		ok, err = colReady.Has(tx, id)
		return err
	})
	return ok
}

// FinishRequest ends the current Delivery: a reply body, or no reply with a reason.
type FinishRequest struct {
	DeliveryID string `json:"deliveryId"`
	// Reply is the body sent to the triggering message; "@Name" becomes a mention when Name is
	// exactly one chat member.
	Reply string `json:"reply,omitempty"`
	// NoReply ends the Delivery without a reply; Reason is then required.
	NoReply bool   `json:"noReply,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// FinishOutcome validates a finish and returns its outcome.
func (q *Queue) FinishOutcome(req FinishRequest) (Outcome, error) {
	reply := strings.TrimSpace(req.Reply)
	reason := strings.TrimSpace(req.Reason)
	switch {
	case req.NoReply && reply != "":
		return Outcome{}, errs.New(errs.Invalid, "give either a reply or noReply with a reason, not both")
	case req.NoReply && reason == "":
		return Outcome{}, errs.New(errs.Invalid, "noReply needs a reason")
	case !req.NoReply && reply == "":
		return Outcome{}, errs.New(errs.Invalid, "reply is empty: send a body, or noReply with a reason")
	case utf8.RuneCountInString(reply) > q.cfg.MaxReplyChars:
		return Outcome{}, errs.New(errs.TooLarge, "reply is over %d characters", q.cfg.MaxReplyChars)
	case utf8.RuneCountInString(reason) > MaxReasonChars:
		return Outcome{}, errs.New(errs.TooLarge, "reason is over %d characters", MaxReasonChars)
	}
	if req.NoReply {
		return Outcome{State: DeliveryDone, NoReply: reason}, nil
	}
	return Outcome{State: DeliveryDone, Reply: reply}, nil
}

// CallerCheck binds a finish or wait to the child serving the Delivery and to an external
// executor (the built-in executor settles on its own).
func CallerCheck(childID string) Check {
	return func(d Delivery, l Locus) error {
		if l.ChildID != childID {
			return errs.New(errs.Forbidden, "this delivery is not served by child %s", childID)
		}
		if l.Executor != ExecutorExternal {
			return errs.New(errs.Conflict, "this Locus is served by the %s executor", l.Executor)
		}
		return nil
	}
}

// WaitRequest extends the current Delivery's deadline.
type WaitRequest struct {
	DeliveryID string `json:"deliveryId"`
	// ExtendSeconds moves the deadline to now plus this many seconds (default 3600), capped at
	// MaxDeadline (24h) after acceptance. A deadline is never shortened.
	ExtendSeconds int64 `json:"extendSeconds,omitempty"`
}

// WaitResult is the new deadline.
type WaitResult struct {
	DeliveryID string    `json:"deliveryId"`
	Deadline   time.Time `json:"deadline"`
	// Capped is true when the deadline stopped at the 24-hour cap.
	Capped bool `json:"capped"`
}

// Extend moves the current Delivery's deadline (a wait), if check passes. It fails with
// conflict once the deadline is at the cap.
func (q *Queue) Extend(ctx context.Context, req WaitRequest, check Check) (WaitResult, error) {
	ext := time.Duration(req.ExtendSeconds) * time.Second
	if req.ExtendSeconds == 0 {
		ext = q.cfg.InitialDeadline
	}
	if req.ExtendSeconds < 0 || ext > q.cfg.MaxDeadline {
		return WaitResult{}, errs.New(errs.Invalid, "extendSeconds must be between 1 and %d", int64(q.cfg.MaxDeadline/time.Second))
	}
	var out WaitResult
	err := q.st.Update(ctx, func(tx *store.Tx) error {
		d, l, err := currentIn(tx, req.DeliveryID)
		if err != nil {
			return err
		}
		if check != nil {
			if err := check(d, l); err != nil {
				return err
			}
		}
		now := q.now()
		if d.Deadline != nil && !now.Before(*d.Deadline) {
			return errs.New(errs.Conflict, "the deadline has passed; the delivery is timing out")
		}
		limit := d.AcceptedAt.Add(q.cfg.MaxDeadline)
		if d.Deadline != nil && !d.Deadline.Before(limit) {
			return errs.New(errs.Conflict, "the deadline is already at the %s cap", q.cfg.MaxDeadline)
		}
		nd := now.Add(ext)
		capped := false
		if nd.After(limit) {
			nd, capped = limit, true
		}
		if d.Deadline != nil && nd.Before(*d.Deadline) {
			nd = *d.Deadline
		}
		d.Deadline = ptime(nd)
		out = WaitResult{DeliveryID: d.ID, Deadline: nd, Capped: capped}
		return colDelivery.Put(tx, deliveryKey(l.ID, d.Seq), d)
	})
	return out, err
}

// Overdue lists the current Deliveries whose deadline is before now.
func (q *Queue) Overdue(ctx context.Context, now time.Time) []string {
	var due []string
	_ = q.st.View(ctx, func(tx *store.Tx) error {
		return colLocus.Each(tx, "", store.ScanOptions{}, func(_ string, l Locus) error {
			if l.Current == "" {
				return nil
			}
			lid, seq, ok := parseDeliveryID(l.Current)
			if !ok {
				return nil
			}
			d, err := colDelivery.Get(tx, deliveryKey(lid, seq))
			if err == nil && d.Deadline != nil && now.After(*d.Deadline) {
				due = append(due, d.ID)
			}
			return nil
		})
	})
	return due
}

// CurrentID returns the id of Locus id's current Delivery ("" when idle).
func (q *Queue) CurrentID(ctx context.Context, id string) (string, error) {
	var cur string
	err := q.st.View(ctx, func(tx *store.Tx) error {
		l, err := getLocus(tx, id)
		cur = l.Current
		return err
	})
	return cur, err
}

// Resume lists what to activate after a start: every active Locus's current Delivery, and for
// an idle Locus with Deliveries queued the first of them, made current here.
func (q *Queue) Resume(ctx context.Context) ([]Delivery, error) {
	var resume []Delivery
	err := q.st.Update(ctx, func(tx *store.Tx) error {
		resume = resume[:0]
		var loci []Locus
		if err := colLocus.Each(tx, "", store.ScanOptions{}, func(_ string, l Locus) error {
			if l.State == LocusActive {
				loci = append(loci, l)
			}
			return nil
		}); err != nil {
			return err
		}
		for _, l := range loci {
			if l.Current != "" {
				d, _, err := currentIn(tx, l.Current)
				if err == nil {
					resume = append(resume, d)
					continue
				}
				if !errs.Is(err, errs.Conflict) && !errs.Is(err, errs.NotFound) {
					return err
				}
			}
			next, err := q.promoteNext(tx, &l, 0)
			if err != nil {
				return err
			}
			if err := colLocus.Put(tx, l.ID, l); err != nil {
				return err
			}
			if next != nil {
				resume = append(resume, *next)
			}
		}
		return nil
	})
	return resume, err
}

// FailQueued fails every queued Delivery of Locus id with reason, in one transaction, and
// returns them (their reactions are the caller's).
func (q *Queue) FailQueued(ctx context.Context, id, reason string) ([]Delivery, error) {
	var failed []Delivery
	err := q.st.Update(ctx, func(tx *store.Tx) error {
		failed = failed[:0]
		l, err := colLocus.Get(tx, id)
		if err != nil {
			return err
		}
		now := q.now()
		err = colDelivery.Each(tx, id+"/", store.ScanOptions{}, func(key string, d Delivery) error {
			if d.State != DeliveryQueued {
				return nil
			}
			d.State, d.SettledAt, d.FailReason = DeliveryFailed, ptime(now), reason
			failed = append(failed, d)
			return nil
		})
		if err != nil {
			return err
		}
		for _, d := range failed {
			if err := colDelivery.Put(tx, deliveryKey(id, d.Seq), d); err != nil {
				return err
			}
		}
		l.Queued = 0
		return colLocus.Put(tx, id, l)
	})
	if err != nil {
		return nil, err
	}
	return failed, nil
}

package lark

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pixie-dev/pixie/internal/channel/lark/larkapi"
	"github.com/pixie-dev/pixie/internal/clip"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
)

// MaxReasonChars caps a no-reply or failure reason.
const MaxReasonChars = 500

// outcome is how a Delivery ends.
type outcome struct {
	state string // DeliveryDone, DeliveryFailed or DeliveryTimedOut
	// reply is the body to send (DeliveryDone with a reply).
	reply string
	// noReply is the executor's reason for not replying (DeliveryDone without a reply).
	noReply string
	// fail says why it failed or timed out.
	fail string
}

// settleCheck validates the settling caller against the current Delivery and its Locus.
type settleCheck func(d Delivery, l Locus) error

// settle ends the current Delivery id with o: the reply (if any) is sent to the triggering
// message first (on failure the Delivery stays current and the error is returned), the
// Delivery's images are deleted, and then one transaction marks it settled and makes the next
// queued Delivery current. Reactions and the next Delivery's start follow asynchronously.
func (c *Channel) settle(ctx context.Context, id string, check settleCheck, o outcome) (Delivery, error) {
	if !c.q.beginSettle(id) {
		return Delivery{}, errs.New(errs.Conflict, "the Delivery is being settled by another request")
	}
	defer c.q.endSettle(id)
	if c.isShared() {
		release, err := c.claimSettle(ctx, id)
		if err != nil {
			return Delivery{}, err
		}
		defer release()
	}

	d, l, err := c.q.loadCurrent(ctx, id)
	if err != nil {
		return Delivery{}, err
	}
	if check != nil {
		if err := check(d, l); err != nil {
			return Delivery{}, err
		}
	}
	replyID := ""
	if o.reply != "" {
		b := c.binding()
		if b == nil {
			return Delivery{}, errs.New(errs.Unavailable, "the Lark channel is unavailable: the reply cannot be sent")
		}
		body := o.reply
		if members, err := c.members.Members(ctx, b.api, d.ChatID, c.now()); err == nil {
			body = larkapi.RenderMentions(body, members)
		} else {
			c.outboundFailed("members", err)
			body = larkapi.RenderMentions(body, nil)
		}
		replyID, err = b.api.Reply(ctx, d.MessageID, body, "reply-"+d.ID)
		if err != nil {
			c.outboundFailed("reply", err)
			return Delivery{}, err
		}
	}
	unlock, err := c.q.sideLock(ctx, l.ID)
	if err != nil {
		return Delivery{}, err
	}
	_ = c.q.spool.Remove(d.ID)
	var settled Delivery
	var next *Delivery
	err = c.st.Update(ctx, func(tx *store.Tx) error {
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
		if c.isShared() {
			if err := c.notifyTx(tx, noteSettled+id); err != nil {
				return err
			}
			if err := colReady.Delete(tx, id); err != nil {
				return err
			}
		}
		now := c.now()
		d.State, d.SettledAt = o.state, ptime(now)
		d.Replied, d.ReplyMessageID = o.reply != "", replyID
		d.NoReplyReason, d.FailReason = o.noReply, o.fail
		if err := colDelivery.Put(tx, deliveryKey(l.ID, d.Seq), d); err != nil {
			return err
		}
		if o.reply != "" {
			if err := c.q.remember(tx, l.ChildID, d.Text, o.reply, now); err != nil {
				return err
			}
		}
		next, err = c.q.promoteNext(tx, &l, d.Seq)
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
		return Delivery{}, err
	}
	c.q.cancelRun(id)
	c.q.forgetReady(id)
	outcomeLabel := o.state
	if o.state == DeliveryDone && o.reply == "" {
		outcomeLabel = "no_reply"
	} else if o.state == DeliveryDone {
		outcomeLabel = "reply"
	}
	c.met.settled.WithLabelValues(outcomeLabel).Inc()
	c.goOutbound(func(ctx context.Context) { c.afterSettle(ctx, settled, next) })
	return settled, nil
}

// remember appends a question and answer to the child's own history (bounded).
func (q *queue) remember(tx *store.Tx, childID, question, answer string, at time.Time) error {
	ch, err := colChild.Get(tx, childID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	ch.History = append(ch.History, Turn{Question: clip.Runes(question, 4000), Answer: clip.Runes(answer, 4000), At: at})
	if n := len(ch.History) - q.historyTurns; n > 0 {
		ch.History = append([]Turn(nil), ch.History[n:]...)
	}
	return colChild.Put(tx, ch.ID, ch)
}

// afterSettle swaps the working reaction for done or failed, then starts the next Delivery.
func (c *Channel) afterSettle(ctx context.Context, settled Delivery, next *Delivery) {
	if b := c.binding(); b != nil {
		if unlock, err := c.q.sideLock(ctx, settled.LocusID); err == nil {
			// Re-read: the activation may have recorded the working reaction after we loaded it.
			working := settled.WorkingReaction
			_ = c.st.View(ctx, func(tx *store.Tx) error {
				if d, err := colDelivery.Get(tx, deliveryKey(settled.LocusID, settled.Seq)); err == nil {
					working = d.WorkingReaction
				}
				return nil
			})
			if working != "" {
				if err := b.api.DeleteReaction(ctx, settled.MessageID, working); err != nil {
					c.outboundFailed("reaction_delete", err)
				}
			}
			emoji := ReactionDone
			if settled.State != DeliveryDone {
				emoji = ReactionFailed
			}
			if _, err := b.api.AddReaction(ctx, settled.MessageID, emoji); err != nil {
				c.outboundFailed("reaction", err)
			}
			unlock()
		}
	}
	if next != nil && c.leads() {
		c.activate(ctx, *next) // over a shared store the leader does, when it hears the settlement
	}
}

// loadCurrent reads Delivery id and its Locus, requiring it to be the Locus's current one.
func (q *queue) loadCurrent(ctx context.Context, id string) (d Delivery, l Locus, err error) {
	err = q.st.View(ctx, func(tx *store.Tx) error {
		d, l, err = currentIn(tx, id)
		return err
	})
	return d, l, err
}

func stateWord(s string) string {
	if s == deliveryStateNone {
		return "unknown"
	}
	return strings.ReplaceAll(s, "_", " ")
}

// activate starts a Delivery that just became current: the working reaction, the images, and
// the executor. It is idempotent per process (a second call while one runs is ignored).
func (c *Channel) activate(ctx context.Context, d Delivery) {
	if !c.leads() {
		return
	}
	if !c.q.beginActivate(d.ID) {
		return
	}
	defer c.q.endActivate(d.ID)
	b := c.binding()
	if b == nil {
		return
	}
	unlock, err := c.q.sideLock(ctx, d.LocusID)
	if err != nil {
		return
	}
	// Still current? (It may have been settled while waiting for the lock.)
	cur, l, err := c.q.loadCurrent(ctx, d.ID)
	if err != nil {
		unlock()
		return
	}
	if cur.WorkingReaction == "" {
		rid, err := b.api.AddReaction(ctx, cur.MessageID, ReactionWorking)
		if err != nil {
			c.outboundFailed("reaction", err)
		} else {
			err := c.st.Update(ctx, func(tx *store.Tx) error {
				x, _, err := currentIn(tx, d.ID)
				if err != nil {
					return err
				}
				x.WorkingReaction = rid
				return colDelivery.Put(tx, deliveryKey(x.LocusID, x.Seq), x)
			})
			if err != nil {
				// Settled meanwhile: take the reaction back.
				if derr := b.api.DeleteReaction(ctx, cur.MessageID, rid); derr != nil {
					c.outboundFailed("reaction_delete", derr)
				}
			}
		}
	}
	c.q.spool.Fetch(ctx, cur.ID, cur.Images, func(ctx context.Context, key string) ([]byte, error) {
		data, err := b.api.Download(ctx, cur.MessageID, key, c.cfg.MaxImageBytes)
		if err != nil {
			return nil, errors.New(describeErr(err))
		}
		return data, nil
	})
	c.q.markReady(cur.ID)
	if c.isShared() {
		c.announceReady(ctx, cur.ID)
	}
	unlock()
	if l.Executor == ExecutorBuiltin {
		c.startBuiltin(cur, l)
	}
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

func (c *Channel) checkFinish(req FinishRequest) (outcome, error) {
	reply := strings.TrimSpace(req.Reply)
	reason := strings.TrimSpace(req.Reason)
	switch {
	case req.NoReply && reply != "":
		return outcome{}, errs.New(errs.Invalid, "give either a reply or noReply with a reason, not both")
	case req.NoReply && reason == "":
		return outcome{}, errs.New(errs.Invalid, "noReply needs a reason")
	case !req.NoReply && reply == "":
		return outcome{}, errs.New(errs.Invalid, "reply is empty: send a body, or noReply with a reason")
	case utf8.RuneCountInString(reply) > c.cfg.MaxReplyChars:
		return outcome{}, errs.New(errs.TooLarge, "reply is over %d characters", c.cfg.MaxReplyChars)
	case utf8.RuneCountInString(reason) > MaxReasonChars:
		return outcome{}, errs.New(errs.TooLarge, "reason is over %d characters", MaxReasonChars)
	}
	if req.NoReply {
		return outcome{state: DeliveryDone, noReply: reason}, nil
	}
	return outcome{state: DeliveryDone, reply: reply}, nil
}

// callerCheck binds a finish or wait to the child serving the Delivery and to an external
// executor (the built-in executor settles on its own).
func callerCheck(childID string) settleCheck {
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

// Finish ends the current Delivery of childID's Locus (pet_locus_finish). The Delivery must be
// the current one and the Locus's executor external.
func (c *Channel) Finish(ctx context.Context, childID string, req FinishRequest) (DeliveryView, error) {
	o, err := c.checkFinish(req)
	if err != nil {
		return DeliveryView{}, err
	}
	d, err := c.settle(ctx, req.DeliveryID, callerCheck(childID), o)
	if err != nil {
		return DeliveryView{}, err
	}
	return c.q.viewOf(ctx, d)
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

// Wait extends the current Delivery's deadline (pet_locus_wait). It fails with conflict once
// the deadline is at the cap.
func (c *Channel) Wait(ctx context.Context, childID string, req WaitRequest) (WaitResult, error) {
	return c.q.extend(ctx, req, callerCheck(childID))
}

func (q *queue) extend(ctx context.Context, req WaitRequest, check settleCheck) (WaitResult, error) {
	ext := time.Duration(req.ExtendSeconds) * time.Second
	if req.ExtendSeconds == 0 {
		ext = q.initialDeadline
	}
	if req.ExtendSeconds < 0 || ext > q.maxDeadline {
		return WaitResult{}, errs.New(errs.Invalid, "extendSeconds must be between 1 and %d", int64(q.maxDeadline/time.Second))
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
		limit := d.AcceptedAt.Add(q.maxDeadline)
		if d.Deadline != nil && !d.Deadline.Before(limit) {
			return errs.New(errs.Conflict, "the deadline is already at the %s cap", q.maxDeadline)
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

// sweep times out every current Delivery whose deadline has passed; the next queued Delivery
// starts on the same child.
func (c *Channel) sweep(ctx context.Context) {
	now := c.now()
	var due []string
	_ = c.st.View(ctx, func(tx *store.Tx) error {
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
	for _, id := range due {
		_, err := c.settle(ctx, id, func(d Delivery, _ Locus) error {
			if d.Deadline == nil || !c.now().After(*d.Deadline) {
				return errs.New(errs.Conflict, "extended meanwhile")
			}
			return nil
		}, outcome{state: DeliveryTimedOut, fail: "the deadline passed without a finish"})
		if err != nil && !errs.Is(err, errs.Conflict) && !errs.Is(err, errs.NotFound) {
			c.log.Warn("lark: timing out a delivery failed", "delivery", id, "err", err.Error())
		}
	}
}

func (c *Channel) sweeper() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			if c.leads() {
				c.sweep(c.ctx)
			}
		}
	}
}

// Cancel ends a Locus's current Delivery as failed (the reason is recorded) and starts the next.
func (c *Channel) Cancel(ctx context.Context, locusID, reason string) (DeliveryView, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		reason = "cancelled"
	}
	if utf8.RuneCountInString(reason) > MaxReasonChars {
		return DeliveryView{}, errs.New(errs.TooLarge, "reason is over %d characters", MaxReasonChars)
	}
	var cur string
	err := c.st.View(ctx, func(tx *store.Tx) error {
		l, err := colLocus.Get(tx, locusID)
		if errors.Is(err, store.ErrNotFound) {
			return errs.New(errs.NotFound, "no such locus")
		}
		cur = l.Current
		return err
	})
	if err != nil {
		return DeliveryView{}, err
	}
	if cur == "" {
		return DeliveryView{}, errs.New(errs.Conflict, "the Locus has no current delivery")
	}
	d, err := c.settle(ctx, cur, nil, outcome{state: DeliveryFailed, fail: reason})
	if err != nil {
		return DeliveryView{}, err
	}
	return c.q.viewOf(ctx, d)
}

// recover resumes after a start: every current Delivery is activated again (its reaction is
// kept if it has one, its images are fetched again, the built-in executor runs it again), and a
// Locus that is idle with Deliveries queued starts the first.
func (c *Channel) recover(ctx context.Context) {
	var resume []Delivery
	err := c.st.Update(ctx, func(tx *store.Tx) error {
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
			next, err := c.q.promoteNext(tx, &l, 0)
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
	if err != nil {
		c.log.Error("lark: could not resume deliveries", "err", err.Error())
		return
	}
	for _, d := range resume {
		c.goOutbound(func(ctx context.Context) { c.activate(ctx, d) })
	}
}

// goOutbound runs f in the background with the channel's lifetime, bounded by a few Lark calls'
// worth of time.
func (c *Channel) goOutbound(f func(ctx context.Context)) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(c.ctx, 10*c.cfg.HTTPTimeout)
		defer cancel()
		f(ctx)
	}()
}

func (c *Channel) outboundFailed(call string, err error) {
	c.met.outbound.WithLabelValues(call).Inc()
	c.log.Warn("lark: call failed", "call", call, "err", describeErr(err))
}

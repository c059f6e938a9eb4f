package lark

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pixie-dev/pixie/internal/channel/lark/larkapi"
	"github.com/pixie-dev/pixie/internal/channel/lark/locus"
	"github.com/pixie-dev/pixie/internal/clip"
	"github.com/pixie-dev/pixie/internal/errs"
)

// The channel's side of the Delivery lifecycle (doc.go): what talks to Lark (the reply, the
// reactions, the images' download), the metrics, and the background work. The records and
// their operations are the queue's (locus.Queue).

// settle ends the current Delivery id with o through the queue (locus.Queue.Settle): the reply
// (if any) is sent to the triggering message first, with its mentions rendered against the
// chat's members. Reactions and the next Delivery's start follow asynchronously.
func (c *Channel) settle(ctx context.Context, id string, check locus.Check, o locus.Outcome) (Delivery, error) {
	settled, next, err := c.q.Settle(ctx, id, check, o, func(ctx context.Context, d Delivery) (string, error) {
		b := c.binder.live()
		if b == nil {
			return "", errs.New(errs.Unavailable, "the Lark channel is unavailable: the reply cannot be sent")
		}
		body := o.Reply
		if members, err := c.members.Members(ctx, b.api, d.ChatID, c.now()); err == nil {
			body = larkapi.RenderMentions(body, members)
		} else {
			c.outboundFailed("members", err)
			body = larkapi.RenderMentions(body, nil)
		}
		replyID, err := b.api.Reply(ctx, d.MessageID, body, "reply-"+d.ID)
		if err != nil {
			c.outboundFailed("reply", err)
		}
		return replyID, err
	})
	if err != nil {
		return Delivery{}, err
	}
	outcomeLabel := o.State
	if o.State == DeliveryDone && o.Reply == "" {
		outcomeLabel = "no_reply"
	} else if o.State == DeliveryDone {
		outcomeLabel = "reply"
	}
	c.met.settled.WithLabelValues(outcomeLabel).Inc()
	c.goOutbound(func(ctx context.Context) { c.afterSettle(ctx, settled, next) })
	return settled, nil
}

// afterSettle swaps the working reaction for done or failed, then starts the next Delivery.
func (c *Channel) afterSettle(ctx context.Context, settled Delivery, next *Delivery) {
	if b := c.binder.live(); b != nil {
		c.q.AfterSettle(ctx, settled, func(working string) {
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
		})
	}
	if next != nil && c.leads() {
		c.activate(ctx, *next) // over a shared store the leader does, when it hears the settlement
	}
}

// activate starts a Delivery that just became current (locus.Queue.Activate): the working
// reaction, the images, and the executor. It is idempotent per process (a second call while
// one runs is ignored).
func (c *Channel) activate(ctx context.Context, d Delivery) {
	if !c.leads() {
		return
	}
	b := c.binder.live()
	if b == nil {
		return
	}
	c.q.Activate(ctx, d, locus.Activation{
		React: func(ctx context.Context, cur Delivery) string {
			rid, err := b.api.AddReaction(ctx, cur.MessageID, ReactionWorking)
			if err != nil {
				c.outboundFailed("reaction", err)
			}
			return rid
		},
		Unreact: func(ctx context.Context, cur Delivery, rid string) {
			if err := b.api.DeleteReaction(ctx, cur.MessageID, rid); err != nil {
				c.outboundFailed("reaction_delete", err)
			}
		},
		Download: func(ctx context.Context, cur Delivery, key string) ([]byte, error) {
			data, err := b.api.Download(ctx, cur.MessageID, key, c.cfg.MaxImageBytes)
			if err != nil {
				return nil, errors.New(describeErr(err))
			}
			return data, nil
		},
		Start: func(cur Delivery, l Locus) {
			if l.Executor == ExecutorBuiltin {
				c.startBuiltin(cur, l)
			}
		},
	})
}

// Finish ends the current Delivery of childID's Locus (pet_locus_finish). The Delivery must be
// the current one and the Locus's executor external.
func (c *Channel) Finish(ctx context.Context, childID string, req FinishRequest) (DeliveryView, error) {
	o, err := c.q.FinishOutcome(req)
	if err != nil {
		return DeliveryView{}, err
	}
	d, err := c.settle(ctx, req.DeliveryID, locus.CallerCheck(childID), o)
	if err != nil {
		return DeliveryView{}, err
	}
	return c.q.View(ctx, d)
}

// Wait extends the current Delivery's deadline (pet_locus_wait). It fails with conflict once
// the deadline is at the cap.
func (c *Channel) Wait(ctx context.Context, childID string, req WaitRequest) (WaitResult, error) {
	return c.q.Extend(ctx, req, locus.CallerCheck(childID))
}

// sweep times out every current Delivery whose deadline has passed; the next queued Delivery
// starts on the same child.
func (c *Channel) sweep(ctx context.Context) {
	for _, id := range c.q.Overdue(ctx, c.now()) {
		_, err := c.settle(ctx, id, func(d Delivery, _ Locus) error {
			if d.Deadline == nil || !c.now().After(*d.Deadline) {
				return errs.New(errs.Conflict, "extended meanwhile")
			}
			return nil
		}, locus.Outcome{State: DeliveryTimedOut, Fail: "the deadline passed without a finish"})
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
	cur, err := c.q.CurrentID(ctx, locusID)
	if err != nil {
		return DeliveryView{}, err
	}
	if cur == "" {
		return DeliveryView{}, errs.New(errs.Conflict, "the Locus has no current delivery")
	}
	d, err := c.settle(ctx, cur, nil, locus.Outcome{State: DeliveryFailed, Fail: reason})
	if err != nil {
		return DeliveryView{}, err
	}
	return c.q.View(ctx, d)
}

// ArchiveLocus ends a Locus (the /unbind of its entry): its current and queued Deliveries fail
// with reason, its child is archived, and the entry is free for a new Locus.
func (c *Channel) ArchiveLocus(ctx context.Context, id, reason string) (LocusView, error) {
	if reason = strings.TrimSpace(reason); reason == "" {
		reason = "unbound"
	}
	reason = clip.Runes(reason, MaxReasonChars)
	// The current Delivery settles through the usual path (reply-free, failed reaction).
	for attempt := 0; ; attempt++ {
		if attempt == 50 {
			return LocusView{}, errs.New(errs.Conflict, "the Locus keeps getting new work; try again")
		}
		cur, err := c.q.CurrentID(ctx, id)
		if err != nil {
			return LocusView{}, err
		}
		if cur == "" {
			break
		}
		// Queued Deliveries are failed first so that settling the current one does not start
		// the next.
		if err := c.failQueued(ctx, id, reason); err != nil {
			return LocusView{}, err
		}
		if _, err := c.settle(ctx, cur, nil, locus.Outcome{State: DeliveryFailed, Fail: reason}); err != nil {
			if !errs.Is(err, errs.Conflict) {
				return LocusView{}, err
			}
			// Settled by someone else meanwhile, or being settled right now: look again.
			time.Sleep(20 * time.Millisecond)
		}
	}
	if err := c.failQueued(ctx, id, reason); err != nil {
		return LocusView{}, err
	}
	return c.q.ArchiveIdle(ctx, id)
}

// failQueued fails every queued Delivery of a Locus, in one transaction, and gives each
// triggering message the failed reaction.
func (c *Channel) failQueued(ctx context.Context, id, reason string) error {
	failed, err := c.q.FailQueued(ctx, id, reason)
	if err != nil {
		return err
	}
	for _, d := range failed {
		c.met.settled.WithLabelValues(DeliveryFailed).Inc()
		c.goOutbound(func(ctx context.Context) { c.afterSettle(ctx, d, nil) })
	}
	return nil
}

// ArchiveSession archives a main session and every Locus attached to it (their current and
// queued Deliveries fail with the reason "session archived").
func (c *Channel) ArchiveSession(ctx context.Context, id string) (Session, error) {
	out, loci, err := c.q.SessionLoci(ctx, id)
	if err != nil {
		return out, err
	}
	for _, lid := range loci {
		if _, err := c.ArchiveLocus(ctx, lid, "session archived"); err != nil && !errs.Is(err, errs.NotFound) {
			return out, err
		}
	}
	return c.q.ArchiveSessionRecord(ctx, id)
}

// recover resumes after a start: every current Delivery is activated again (its reaction is
// kept if it has one, its images are fetched again, the built-in executor runs it again), and a
// Locus that is idle with Deliveries queued starts the first.
func (c *Channel) recover(ctx context.Context) {
	resume, err := c.q.Resume(ctx)
	if err != nil {
		c.log.Error("lark: could not resume deliveries", "err", err.Error())
		return
	}
	for _, d := range resume {
		c.goOutbound(func(ctx context.Context) { c.activate(ctx, d) })
	}
}

// Current returns the current Delivery of childID's Locus (what an external executor pulls).
// While the channel is bound it waits for the Delivery's activation (working reaction, images)
// to finish first (at most two minutes).
func (c *Channel) Current(ctx context.Context, childID string) (DeliveryView, error) {
	return c.q.Current(ctx, childID, c.binder.live() != nil)
}

// WaitCurrent is Current with a long poll: when the Locus is idle it waits up to max for a
// Delivery to become current (max zero means no waiting).
func (c *Channel) WaitCurrent(ctx context.Context, childID string, max time.Duration) (DeliveryView, error) {
	deadline := time.Now().Add(max)
	for {
		v, err := c.Current(ctx, childID)
		if err == nil || !errs.Is(err, errs.NotFound) || !time.Now().Before(deadline) {
			return v, err
		}
		if v, _ := c.q.ChildExists(ctx, childID); !v {
			return DeliveryView{}, err
		}
		select {
		case <-ctx.Done():
			return DeliveryView{}, errs.Wrap(errs.NotFound, ctx.Err(), "no current delivery")
		case <-c.ctx.Done():
			return DeliveryView{}, errs.New(errs.Unavailable, "the channel is shutting down")
		case <-time.After(pollInterval):
		}
	}
}

// pollInterval is how often WaitCurrent looks for a new Delivery.
const pollInterval = 200 * time.Millisecond

// Image returns the bytes and media type of image index (1-based) of the current Delivery of
// childID's Locus.
func (c *Channel) Image(ctx context.Context, childID, deliveryID string, index int) ([]byte, string, error) {
	return c.q.Image(ctx, childID, deliveryID, index)
}

// Loci lists every Locus (archived ones included, flagged), in id order.
func (c *Channel) Loci(ctx context.Context) ([]LocusView, error) { return c.q.Loci(ctx) }

// GetLocus returns one Locus with its Deliveries.
func (c *Channel) GetLocus(ctx context.Context, id string) (LocusDetail, error) {
	return c.q.Detail(ctx, id)
}

// UpdateLocus changes the tool tier or the executor of an active Locus. A change of executor
// applies from the next Delivery on.
func (c *Channel) UpdateLocus(ctx context.Context, id string, u LocusUpdate) (LocusView, error) {
	return c.q.Update(ctx, id, u)
}

// RegisterSession records a host session (idempotent: a known, unarchived id is returned as is,
// with its workspace filled in if it had none).
func (c *Channel) RegisterSession(ctx context.Context, req SessionRequest) (Session, error) {
	return c.q.RegisterSession(ctx, req)
}

// Sessions lists main sessions (archived ones too, flagged).
func (c *Channel) Sessions(ctx context.Context) ([]Session, error) { return c.q.Sessions(ctx) }

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

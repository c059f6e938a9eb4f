package lark

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/pixie-dev/pixie/internal/channel/lark/larkapi"
	"github.com/pixie-dev/pixie/internal/clip"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
)

// createLocus associates an entry with a main session and a new child, in tx.
func (q *queue) createLocus(tx *store.Tx, chatID, threadID, chatType string, main Session, qa bool) (Locus, error) {
	entry := larkapi.EntryKey(chatID, threadID)
	l := Locus{
		ID: newID("l", 12), Entry: entry, ChatID: chatID, ThreadID: threadID, ChatType: chatType,
		MainSessionID: main.ID, ToolTier: TierRead, Executor: q.executor, State: LocusActive, QA: qa,
		Created: q.now(), NextSeq: 1,
	}
	ch, err := q.newChild(tx, main.ID, l.ID, entry)
	if err != nil {
		return Locus{}, err
	}
	l.ChildID = ch.ID
	if err := colLocus.Put(tx, l.ID, l); err != nil {
		return Locus{}, err
	}
	return l, colEntry.Put(tx, entry, l.ID)
}

// bootstrap builds the tree for a new entry on demand, in tx: the chat's main session (created
// in the default workspace if the chat has none), then the Locus with its child. A topic first
// ensures its group's Locus and then gets a sibling child under the group's main session.
func (c *Channel) bootstrap(tx *store.Tx, msg larkapi.Message) (Locus, error) {
	if msg.ThreadID == "" {
		main, err := c.chatSession(tx, msg.ChatID)
		if err != nil {
			return Locus{}, err
		}
		return c.q.createLocus(tx, msg.ChatID, "", msg.ChatType, main, false)
	}
	group, ok, err := activeLocus(tx, msg.ChatID)
	if err != nil {
		return Locus{}, err
	}
	if !ok {
		main, err := c.chatSession(tx, msg.ChatID)
		if err != nil {
			return Locus{}, err
		}
		if group, err = c.q.createLocus(tx, msg.ChatID, "", msg.ChatType, main, false); err != nil {
			return Locus{}, err
		}
	}
	main, err := colSession.Get(tx, group.MainSessionID)
	if err != nil {
		return Locus{}, err
	}
	return c.q.createLocus(tx, msg.ChatID, msg.ThreadID, msg.ChatType, main, false)
}

// LocusView is a Locus for the settings page: the association, its sessions and its queue.
type LocusView struct {
	Locus
	MainSession *Session      `json:"mainSession,omitempty"`
	Child       *ChildView    `json:"child,omitempty"`
	CurrentView *DeliveryView `json:"currentDelivery,omitempty"`
}

// ChildView is a child session without its history text.
type ChildView struct {
	ID       string `json:"id"`
	ParentID string `json:"parentId"`
	Turns    int    `json:"turns"`
	Archived bool   `json:"archived"`
}

// Loci lists every Locus (archived ones included, flagged), newest state first by id order.
func (c *Channel) Loci(ctx context.Context) ([]LocusView, error) {
	var ls []Locus
	err := c.st.View(ctx, func(tx *store.Tx) error {
		return colLocus.Each(tx, "", store.ScanOptions{}, func(_ string, l Locus) error {
			ls = append(ls, l)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	out := make([]LocusView, 0, len(ls))
	for _, l := range ls {
		v, err := c.q.locusView(ctx, l)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// LocusDetail is one Locus with its recent Deliveries (oldest first).
type LocusDetail struct {
	LocusView
	Deliveries []DeliveryView `json:"deliveries"`
}

// GetLocus returns one Locus with its Deliveries.
func (c *Channel) GetLocus(ctx context.Context, id string) (LocusDetail, error) {
	var l Locus
	var ds []Delivery
	err := c.st.View(ctx, func(tx *store.Tx) error {
		var err error
		l, err = colLocus.Get(tx, id)
		if errors.Is(err, store.ErrNotFound) {
			return errs.New(errs.NotFound, "no such locus")
		} else if err != nil {
			return err
		}
		return colDelivery.Each(tx, id+"/", store.ScanOptions{}, func(_ string, d Delivery) error {
			ds = append(ds, d)
			return nil
		})
	})
	if err != nil {
		return LocusDetail{}, err
	}
	v, err := c.q.locusView(ctx, l)
	if err != nil {
		return LocusDetail{}, err
	}
	out := LocusDetail{LocusView: v, Deliveries: make([]DeliveryView, 0, len(ds))}
	for _, d := range ds {
		out.Deliveries = append(out.Deliveries, c.q.view(d, l))
	}
	return out, nil
}

func (q *queue) locusView(ctx context.Context, l Locus) (LocusView, error) {
	v := LocusView{Locus: l}
	err := q.st.View(ctx, func(tx *store.Tx) error {
		if s, err := colSession.Get(tx, l.MainSessionID); err == nil {
			v.MainSession = &s
		}
		if ch, err := colChild.Get(tx, l.ChildID); err == nil {
			v.Child = &ChildView{ID: ch.ID, ParentID: ch.ParentID, Turns: len(ch.History), Archived: ch.Archived}
		}
		if l.Current != "" {
			if lid, seq, ok := parseDeliveryID(l.Current); ok {
				if d, err := colDelivery.Get(tx, deliveryKey(lid, seq)); err == nil {
					dv := q.view(d, l)
					v.CurrentView = &dv
				}
			}
		}
		return nil
	})
	return v, err
}

// LocusUpdate changes a Locus's settings; empty fields are left as they are.
type LocusUpdate struct {
	ToolTier string `json:"toolTier,omitempty"`
	Executor string `json:"executor,omitempty"`
}

// UpdateLocus changes the tool tier or the executor of an active Locus. A change of executor
// applies from the next Delivery on.
func (c *Channel) UpdateLocus(ctx context.Context, id string, u LocusUpdate) (LocusView, error) {
	switch u.ToolTier {
	case "", TierRead, TierShell:
	default:
		return LocusView{}, errs.New(errs.Invalid, "toolTier must be %q or %q", TierRead, TierShell)
	}
	switch u.Executor {
	case "", ExecutorBuiltin, ExecutorExternal:
	default:
		return LocusView{}, errs.New(errs.Invalid, "executor must be %q or %q", ExecutorBuiltin, ExecutorExternal)
	}
	var l Locus
	err := c.st.Update(ctx, func(tx *store.Tx) error {
		var err error
		l, err = colLocus.Get(tx, id)
		if errors.Is(err, store.ErrNotFound) {
			return errs.New(errs.NotFound, "no such locus")
		} else if err != nil {
			return err
		}
		if l.State != LocusActive {
			return errs.New(errs.Conflict, "the Locus is archived")
		}
		if u.ToolTier != "" {
			l.ToolTier = u.ToolTier
		}
		if u.Executor != "" {
			l.Executor = u.Executor
		}
		return colLocus.Put(tx, id, l)
	})
	if err != nil {
		return LocusView{}, err
	}
	return c.q.locusView(ctx, l)
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
		var cur string
		err := c.st.View(ctx, func(tx *store.Tx) error {
			l, err := colLocus.Get(tx, id)
			if errors.Is(err, store.ErrNotFound) {
				return errs.New(errs.NotFound, "no such locus")
			}
			cur = l.Current
			return err
		})
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
		if _, err := c.settle(ctx, cur, nil, outcome{state: DeliveryFailed, fail: reason}); err != nil {
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
	var l Locus
	err := c.st.Update(ctx, func(tx *store.Tx) error {
		var err error
		l, err = colLocus.Get(tx, id)
		if err != nil {
			return err
		}
		if l.State == LocusArchived {
			return nil
		}
		if l.Current != "" {
			return errs.New(errs.Conflict, "a delivery started meanwhile; try again")
		}
		l.State, l.Archived = LocusArchived, ptime(c.now())
		if err := colLocus.Put(tx, id, l); err != nil {
			return err
		}
		if eid, err := colEntry.Get(tx, l.Entry); err == nil && eid == id {
			if err := colEntry.Delete(tx, l.Entry); err != nil {
				return err
			}
		}
		if ch, err := colChild.Get(tx, l.ChildID); err == nil {
			ch.Archived = true
			if err := colChild.Put(tx, ch.ID, ch); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return LocusView{}, err
	}
	return c.q.locusView(ctx, l)
}

// failQueued fails every queued Delivery of a Locus, in one transaction, and gives each
// triggering message the failed reaction.
func (c *Channel) failQueued(ctx context.Context, id, reason string) error {
	var failed []Delivery
	err := c.st.Update(ctx, func(tx *store.Tx) error {
		failed = failed[:0]
		l, err := colLocus.Get(tx, id)
		if err != nil {
			return err
		}
		now := c.now()
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
		return err
	}
	for _, d := range failed {
		c.met.settled.WithLabelValues(DeliveryFailed).Inc()
		c.goOutbound(func(ctx context.Context) { c.afterSettle(ctx, d, nil) })
	}
	return nil
}

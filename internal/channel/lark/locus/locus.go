package locus

import (
	"context"
	"errors"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
)

// CreateLocus associates entry e with a main session and a new child, in tx.
func (q *Queue) CreateLocus(tx *store.Tx, e Entry, main Session, qa bool) (Locus, error) {
	l := Locus{
		ID: newID("l", 12), Entry: e.Key, ChatID: e.ChatID, ThreadID: e.ThreadID, ChatType: e.ChatType,
		MainSessionID: main.ID, ToolTier: TierRead, Executor: q.cfg.Executor, State: LocusActive, QA: qa,
		Created: q.now(), NextSeq: 1,
	}
	ch, err := q.newChild(tx, main.ID, l.ID, e.Key)
	if err != nil {
		return Locus{}, err
	}
	l.ChildID = ch.ID
	if err := colLocus.Put(tx, l.ID, l); err != nil {
		return Locus{}, err
	}
	return l, colEntry.Put(tx, e.Key, l.ID)
}

// Bootstrap builds the tree for a new entry on demand, in tx: the chat's main session (created
// in the default workspace if the chat has none; ErrNoWorkspace when there is none to use),
// then the Locus with its child. A topic first ensures its group's Locus (the entry named by
// the chat id) and then gets a sibling child under the group's main session.
func (q *Queue) Bootstrap(tx *store.Tx, e Entry) (Locus, error) {
	group := Entry{Key: e.ChatID, ChatID: e.ChatID, ChatType: e.ChatType}
	if e.ThreadID == "" {
		main, err := q.chatSession(tx, e.ChatID)
		if err != nil {
			return Locus{}, err
		}
		return q.CreateLocus(tx, group, main, false)
	}
	gl, ok, err := ActiveLocus(tx, e.ChatID)
	if err != nil {
		return Locus{}, err
	}
	if !ok {
		main, err := q.chatSession(tx, e.ChatID)
		if err != nil {
			return Locus{}, err
		}
		if gl, err = q.CreateLocus(tx, group, main, false); err != nil {
			return Locus{}, err
		}
	}
	main, err := colSession.Get(tx, gl.MainSessionID)
	if err != nil {
		return Locus{}, err
	}
	return q.CreateLocus(tx, e, main, false)
}

// getLocus reads Locus id in tx (not found: "no such locus").
func getLocus(tx *store.Tx, id string) (Locus, error) {
	l, err := colLocus.Get(tx, id)
	if errors.Is(err, store.ErrNotFound) {
		return Locus{}, errs.New(errs.NotFound, "no such locus")
	}
	return l, err
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

// Loci lists every Locus (archived ones included, flagged), in id order.
func (q *Queue) Loci(ctx context.Context) ([]LocusView, error) {
	var ls []Locus
	err := q.st.View(ctx, func(tx *store.Tx) error {
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
		v, err := q.ViewLocus(ctx, l)
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

// Detail returns Locus id with its Deliveries.
func (q *Queue) Detail(ctx context.Context, id string) (LocusDetail, error) {
	var l Locus
	var ds []Delivery
	err := q.st.View(ctx, func(tx *store.Tx) error {
		var err error
		if l, err = getLocus(tx, id); err != nil {
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
	v, err := q.ViewLocus(ctx, l)
	if err != nil {
		return LocusDetail{}, err
	}
	out := LocusDetail{LocusView: v, Deliveries: make([]DeliveryView, 0, len(ds))}
	for _, d := range ds {
		out.Deliveries = append(out.Deliveries, q.view(d, l))
	}
	return out, nil
}

// ViewLocus is l with its sessions and its current Delivery.
func (q *Queue) ViewLocus(ctx context.Context, l Locus) (LocusView, error) {
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

// EntryLocus returns the Locus an entry names, and whether it is active.
func (q *Queue) EntryLocus(ctx context.Context, entry string) (Locus, bool, error) {
	var l Locus
	var ok bool
	err := q.st.View(ctx, func(tx *store.Tx) error {
		var err error
		l, ok, err = ActiveLocus(tx, entry)
		return err
	})
	return l, ok, err
}

// LocusUpdate changes a Locus's settings; empty fields are left as they are.
type LocusUpdate struct {
	ToolTier string `json:"toolTier,omitempty"`
	Executor string `json:"executor,omitempty"`
}

// Update changes the tool tier or the executor of an active Locus. A change of executor
// applies from the next Delivery on.
func (q *Queue) Update(ctx context.Context, id string, u LocusUpdate) (LocusView, error) {
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
	err := q.st.Update(ctx, func(tx *store.Tx) error {
		var err error
		if l, err = getLocus(tx, id); err != nil {
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
	return q.ViewLocus(ctx, l)
}

// ArchiveIdle archives Locus id, which must have no current Delivery (conflict when one
// started meanwhile): its child is archived, and its entry is free for a new Locus. An archived
// Locus stays as it is.
func (q *Queue) ArchiveIdle(ctx context.Context, id string) (LocusView, error) {
	var l Locus
	err := q.st.Update(ctx, func(tx *store.Tx) error {
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
		l.State, l.Archived = LocusArchived, ptime(q.now())
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
	return q.ViewLocus(ctx, l)
}

// Bound says what BindEntry did.
type Bound int

// What BindEntry did.
const (
	// BindNoMatch: no single session matches the prefix (several matches say the same).
	BindNoMatch Bound = iota
	// BindAlready: the entry is bound to that session already.
	BindAlready
	// BindBusy: the entry's Locus has Deliveries current or queued; nothing changed.
	BindBusy
	// BindDone: the entry is bound, with a new Locus and child.
	BindDone
)

// BindResult is what BindEntry did, with the session the prefix named and the entry's Locus.
type BindResult struct {
	Bound   Bound
	Session Session
	Locus   Locus
}

// BindEntry attaches entry e to the main session named by prefix (see ResolvePrefix). An entry
// with no Locus yet is bound directly, with a new child under that session. An entry already
// bound elsewhere is moved only while nothing is queued or being answered: its child is
// retired and a new one is created under the new session (a child never changes parent).
func (q *Queue) BindEntry(ctx context.Context, e Entry, prefix string) (BindResult, error) {
	var out BindResult
	err := q.st.Update(ctx, func(tx *store.Tx) error {
		out = BindResult{}
		s, ok, err := resolvePrefix(tx, prefix)
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		out.Session = s
		l, active, err := ActiveLocus(tx, e.Key)
		if err != nil {
			return err
		}
		if active {
			out.Locus = l
			if l.MainSessionID == s.ID {
				out.Bound = BindAlready
				return nil
			}
			if l.Current != "" || l.Queued > 0 {
				out.Bound = BindBusy
				return nil
			}
			l.State, l.Archived = LocusArchived, ptime(q.now())
			if err := colLocus.Put(tx, l.ID, l); err != nil {
				return err
			}
			if ch, err := colChild.Get(tx, l.ChildID); err == nil {
				ch.Archived = true
				if err := colChild.Put(tx, ch.ID, ch); err != nil {
					return err
				}
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		nl, err := q.CreateLocus(tx, e, s, false)
		if err != nil {
			return err
		}
		out.Bound, out.Locus = BindDone, nl
		return nil
	})
	return out, err
}

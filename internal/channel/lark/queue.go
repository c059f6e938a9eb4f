package lark

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/pixie-dev/pixie/internal/channel/lark/larkapi"
	"github.com/pixie-dev/pixie/internal/channel/lark/spool"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/keylock"
	"github.com/pixie-dev/pixie/internal/store"
)

// queue is the Loci's durable queue of Deliveries and what this process knows of them: the
// records' operations on the store (enqueue, promote the next, prune the settled, find the
// current one, extend its deadline; create a Locus with its child session and the main session
// it serves; keep a child's history; the views of Deliveries and Loci), the keyed locks (a
// Locus's Lark side effects, a session's Q&A group), the image spool, and the maps of the
// Deliveries being settled, activated and run here, and of those whose activation is done. It
// owns its locks and maps; the Channel drives it and does everything that talks to Lark or
// to other replicas (the lifecycle is in doc.go). It is safe for concurrent use.
type queue struct {
	st              *store.Store
	maxQueue        int           // Deliveries that may wait behind the current one
	initialDeadline time.Duration // a new current Delivery's deadline, and a wait's default
	maxDeadline     time.Duration // how far past its acceptance a deadline may move
	historyTurns    int           // question/answer pairs a child keeps
	executor        string        // the executor of new Loci
	now             func() time.Time

	spool *spool.Spool
	locks keylock.Mutex

	// mu guards the four maps.
	mu sync.Mutex
	// settling holds the Deliveries being settled right now (one settlement at a time).
	settling map[string]bool
	// runs are the cancel functions of running built-in executor turns, by Delivery id.
	runs map[string]context.CancelFunc
	// activating holds Deliveries whose activation (reaction, spool, executor) is under way.
	activating map[string]bool
	// ready holds, per current Delivery, a channel closed once its activation is done.
	ready map[string]chan struct{}
}

// newQueue returns the queue over st with cfg's limits (cfg has its defaults).
func newQueue(st *store.Store, cfg Config, now func() time.Time, sp *spool.Spool) *queue {
	return &queue{st: st, maxQueue: cfg.MaxQueue, initialDeadline: cfg.InitialDeadline,
		maxDeadline: cfg.MaxDeadline, historyTurns: cfg.HistoryTurns, executor: cfg.Executor,
		now: now, spool: sp,
		settling: map[string]bool{}, runs: map[string]context.CancelFunc{},
		activating: map[string]bool{}, ready: map[string]chan struct{}{}}
}

// errQueueFull refuses a Delivery when the Locus's queue is at MaxQueue.
var errQueueFull = errs.New(errs.Conflict, "the queue is full")

// enqueue appends a Delivery for msg to l's FIFO, in tx. When l is idle the Delivery becomes
// current at once (accepted now, deadline InitialDeadline from now). l is updated in place and
// written.
func (q *queue) enqueue(tx *store.Tx, l *Locus, msg larkapi.Message, receivedAt time.Time) (Delivery, error) {
	if l.Current != "" && l.Queued >= q.maxQueue {
		return Delivery{}, errQueueFull
	}
	if l.NextSeq < 1 {
		l.NextSeq = 1
	}
	seq := l.NextSeq
	l.NextSeq++
	d := Delivery{
		ID: deliveryID(l.ID, seq), LocusID: l.ID, Seq: seq, MessageID: msg.MessageID, ChatID: msg.ChatID,
		ThreadID: msg.ThreadID, SenderOpenID: msg.SenderOpenID, Text: msg.Text, Images: msg.Images,
		Truncated: msg.Truncated, State: DeliveryQueued, ReceivedAt: receivedAt,
	}
	if l.Current == "" {
		q.makeCurrent(&d, l)
	} else {
		l.Queued++
	}
	if err := colDelivery.Put(tx, deliveryKey(l.ID, seq), d); err != nil {
		return Delivery{}, err
	}
	return d, colLocus.Put(tx, l.ID, *l)
}

func (q *queue) makeCurrent(d *Delivery, l *Locus) {
	now := q.now()
	d.State = DeliveryCurrent
	d.AcceptedAt = ptime(now)
	d.Deadline = ptime(now.Add(q.initialDeadline))
	l.Current = d.ID
}

// promoteNext makes the first queued Delivery after afterSeq current, in tx, and returns it
// (nil when the queue is empty). l is updated in place; the caller writes it.
func (q *queue) promoteNext(tx *store.Tx, l *Locus, afterSeq int64) (*Delivery, error) {
	l.Current = ""
	var next *Delivery
	err := colDelivery.Each(tx, l.ID+"/", store.ScanOptions{After: []byte(deliveryKey(l.ID, afterSeq))},
		func(_ string, d Delivery) error {
			if d.State == DeliveryQueued {
				next = &d
				return store.ErrStop
			}
			return nil
		})
	if err != nil || next == nil {
		l.Queued = 0
		return nil, err
	}
	q.makeCurrent(next, l)
	if l.Queued > 0 {
		l.Queued--
	}
	return next, colDelivery.Put(tx, deliveryKey(l.ID, next.Seq), *next)
}

// pruneSettled keeps the newest maxKeptSettled settled Deliveries of a Locus.
func pruneSettled(tx *store.Tx, locusID string) error {
	var settled []string
	err := colDelivery.Each(tx, locusID+"/", store.ScanOptions{}, func(id string, d Delivery) error {
		if d.State != DeliveryQueued && d.State != DeliveryCurrent {
			settled = append(settled, id)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for len(settled) > maxKeptSettled {
		if err := tx.DeleteRaw(colDelivery.Key(settled[0])); err != nil {
			return err
		}
		settled = settled[1:]
	}
	return nil
}

func currentIn(tx *store.Tx, id string) (Delivery, Locus, error) {
	lid, seq, ok := parseDeliveryID(id)
	if !ok {
		return Delivery{}, Locus{}, errs.New(errs.Invalid, "malformed delivery id")
	}
	d, err := colDelivery.Get(tx, deliveryKey(lid, seq))
	if errors.Is(err, store.ErrNotFound) {
		return Delivery{}, Locus{}, errs.New(errs.NotFound, "no such delivery")
	} else if err != nil {
		return Delivery{}, Locus{}, err
	}
	l, err := colLocus.Get(tx, lid)
	if errors.Is(err, store.ErrNotFound) {
		return Delivery{}, Locus{}, errs.New(errs.NotFound, "no such locus")
	} else if err != nil {
		return Delivery{}, Locus{}, err
	}
	if d.State != DeliveryCurrent || l.Current != d.ID {
		return d, l, errs.New(errs.Conflict, "the delivery is not current (it is %s)", stateWord(d.State))
	}
	return d, l, nil
}

// activeLocus returns the active Locus of an entry.
func activeLocus(tx *store.Tx, entry string) (Locus, bool, error) {
	id, err := colEntry.Get(tx, entry)
	if errors.Is(err, store.ErrNotFound) {
		return Locus{}, false, nil
	} else if err != nil {
		return Locus{}, false, err
	}
	l, err := colLocus.Get(tx, id)
	if errors.Is(err, store.ErrNotFound) {
		return Locus{}, false, nil
	} else if err != nil {
		return Locus{}, false, err
	}
	return l, l.State == LocusActive, nil
}

// childLocus returns the active Locus served by childID.
func childLocus(tx *store.Tx, childID string) (Locus, error) {
	ch, err := colChild.Get(tx, childID)
	if errors.Is(err, store.ErrNotFound) {
		return Locus{}, errs.New(errs.NotFound, "no such child session")
	} else if err != nil {
		return Locus{}, err
	}
	if ch.Archived {
		return Locus{}, errs.New(errs.Conflict, "the child session is archived")
	}
	l, err := colLocus.Get(tx, ch.LocusID)
	if errors.Is(err, store.ErrNotFound) {
		return Locus{}, errs.New(errs.NotFound, "no such locus")
	}
	return l, err
}

// beginSettle claims the settlement of Delivery id in this process; false when one is under
// way. endSettle gives the claim up.
func (q *queue) beginSettle(id string) bool { return q.claim(q.settling, id) }
func (q *queue) endSettle(id string)        { q.release(q.settling, id) }

// beginActivate claims the activation of Delivery id in this process; false when one is under
// way. endActivate gives the claim up.
func (q *queue) beginActivate(id string) bool { return q.claim(q.activating, id) }
func (q *queue) endActivate(id string)        { q.release(q.activating, id) }

// claim adds id to set (settling or activating) unless it is there already.
func (q *queue) claim(set map[string]bool, id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if set[id] {
		return false
	}
	set[id] = true
	return true
}

func (q *queue) release(set map[string]bool, id string) {
	q.mu.Lock()
	delete(set, id)
	q.mu.Unlock()
}

// startRun records the built-in turn of Delivery id, calling start (under the queue's lock) for
// its cancel function; false, without calling start, when a turn of id already runs. endRun
// forgets the turn; cancelRun also stops it.
func (q *queue) startRun(id string, start func() context.CancelFunc) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, running := q.runs[id]; running {
		return false
	}
	q.runs[id] = start()
	return true
}

func (q *queue) endRun(id string) {
	q.mu.Lock()
	delete(q.runs, id)
	q.mu.Unlock()
}

// cancelRun stops a running built-in turn of Delivery id.
func (q *queue) cancelRun(id string) {
	q.mu.Lock()
	cancel := q.runs[id]
	delete(q.runs, id)
	q.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// readyChan returns the channel closed when Delivery id's activation is done.
func (q *queue) readyChan(id string) chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	ch, ok := q.ready[id]
	if !ok {
		ch = make(chan struct{})
		q.ready[id] = ch
	}
	return ch
}

func (q *queue) markReady(id string) {
	ch := q.readyChan(id)
	q.mu.Lock()
	defer q.mu.Unlock()
	select {
	case <-ch:
	default:
		close(ch)
	}
}

func (q *queue) forgetReady(id string) {
	q.mu.Lock()
	delete(q.ready, id)
	q.mu.Unlock()
}

// sideLock serialises the Lark side effects of one Locus (reactions, spool) so that a
// Delivery's settlement never overtakes its activation.
func (q *queue) sideLock(ctx context.Context, locusID string) (func(), error) {
	return q.lock(ctx, "locus:"+locusID)
}

// lock waits for key's turn among the channel's keyed locks; the returned func releases it.
func (q *queue) lock(ctx context.Context, key string) (func(), error) {
	unlock, err := q.locks.Lock(ctx, key)
	if err != nil {
		return nil, errs.Wrap(errs.Timeout, err, "gave up waiting for an earlier request on the same session")
	}
	return unlock, nil
}

package locus

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/pixie-dev/pixie/internal/channel/lark/spool"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/keylock"
	"github.com/pixie-dev/pixie/internal/store"
)

// Config are a Queue's limits. The channel fills every field (lark.Config's defaults); the
// zero value of a field means none.
type Config struct {
	// MaxQueue is how many Deliveries may wait behind a Locus's current one.
	MaxQueue int
	// InitialDeadline is a new current Delivery's deadline from its acceptance, and a wait's
	// default extension.
	InitialDeadline time.Duration
	// MaxDeadline caps how far past its acceptance a deadline may move.
	MaxDeadline time.Duration
	// HistoryTurns is how many question/answer pairs a child keeps.
	HistoryTurns int
	// MaxReplyChars caps a finish's reply, in characters.
	MaxReplyChars int
	// Executor is the executor of new Loci (ExecutorBuiltin or ExecutorExternal).
	Executor string
	// DefaultWorkspace is the directory automatically created main sessions belong to.
	DefaultWorkspace string
	// SettleTTL is how long a replica's mark that it settles a Delivery lives (shared stores):
	// longer than a reply's Lark calls take.
	SettleTTL time.Duration
	// Topic is the store notification topic of the settled and ready notes (shared stores).
	Topic string
	// Now is the clock; nil means time.Now in UTC.
	Now func() time.Time
	// Logger receives operational logs (never message text); nil discards them.
	Logger *slog.Logger
}

// Queue is the Loci's durable queue of Deliveries and what this process knows of them: the
// records' operations on the store (enqueue, promote the next, prune the settled, find the
// current one, extend its deadline, settle it; create a Locus with its child session and the
// main session it serves; keep a child's history; the views of Deliveries and Loci), the keyed
// locks (a Locus's Lark side effects, a session's Q&A group), the image spool, and the maps of
// the Deliveries being settled, activated and run here, and of those whose activation is done.
// It owns its locks and maps; the channel drives it and does everything that talks to Lark
// (the lifecycle is in doc.go). It is safe for concurrent use.
type Queue struct {
	st  *store.Store
	cfg Config

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

// New returns the queue over st with cfg's limits; sp is the image spool of its Deliveries.
func New(st *store.Store, cfg Config, sp *spool.Spool) *Queue {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Queue{st: st, cfg: cfg, spool: sp,
		settling: map[string]bool{}, runs: map[string]context.CancelFunc{},
		activating: map[string]bool{}, ready: map[string]chan struct{}{}}
}

func (q *Queue) now() time.Time { return q.cfg.Now().UTC() }

// Spool is the image spool of the Deliveries.
func (q *Queue) Spool() *spool.Spool { return q.spool }

// ErrQueueFull refuses a Delivery when the Locus's queue is at MaxQueue.
var ErrQueueFull = errs.New(errs.Conflict, "the queue is full")

// Enqueue appends a Delivery of in's message (MessageID, ChatID, ThreadID, SenderOpenID, Text,
// Images, Truncated, ReceivedAt) to l's FIFO, in tx. When l is idle the Delivery becomes
// current at once (accepted now, deadline InitialDeadline from now). l is updated in place and
// written.
func (q *Queue) Enqueue(tx *store.Tx, l *Locus, in Delivery) (Delivery, error) {
	if l.Current != "" && l.Queued >= q.cfg.MaxQueue {
		return Delivery{}, ErrQueueFull
	}
	if l.NextSeq < 1 {
		l.NextSeq = 1
	}
	seq := l.NextSeq
	l.NextSeq++
	d := Delivery{
		ID: deliveryID(l.ID, seq), LocusID: l.ID, Seq: seq, MessageID: in.MessageID, ChatID: in.ChatID,
		ThreadID: in.ThreadID, SenderOpenID: in.SenderOpenID, Text: in.Text, Images: in.Images,
		Truncated: in.Truncated, State: DeliveryQueued, ReceivedAt: in.ReceivedAt,
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

func (q *Queue) makeCurrent(d *Delivery, l *Locus) {
	now := q.now()
	d.State = DeliveryCurrent
	d.AcceptedAt = ptime(now)
	d.Deadline = ptime(now.Add(q.cfg.InitialDeadline))
	l.Current = d.ID
}

// promoteNext makes the first queued Delivery after afterSeq current, in tx, and returns it
// (nil when the queue is empty). l is updated in place; the caller writes it.
func (q *Queue) promoteNext(tx *store.Tx, l *Locus, afterSeq int64) (*Delivery, error) {
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
	l, err := getLocus(tx, lid)
	if err != nil {
		return Delivery{}, Locus{}, err
	}
	if d.State != DeliveryCurrent || l.Current != d.ID {
		return d, l, errs.New(errs.Conflict, "the delivery is not current (it is %s)", stateWord(d.State))
	}
	return d, l, nil
}

func stateWord(s string) string {
	if s == deliveryStateNone {
		return "unknown"
	}
	return strings.ReplaceAll(s, "_", " ")
}

// ActiveLocus returns the Locus an entry names, in tx, and whether it is active.
func ActiveLocus(tx *store.Tx, entry string) (Locus, bool, error) {
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
	return getLocus(tx, ch.LocusID)
}

// claim adds id to set (settling or activating) unless it is there already.
func (q *Queue) claim(set map[string]bool, id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if set[id] {
		return false
	}
	set[id] = true
	return true
}

func (q *Queue) release(set map[string]bool, id string) {
	q.mu.Lock()
	delete(set, id)
	q.mu.Unlock()
}

// StartRun records the built-in turn of Delivery id, calling start (under the queue's lock) for
// its cancel function; false, without calling start, when a turn of id already runs. EndRun
// forgets the turn; a settlement of id also stops it.
func (q *Queue) StartRun(id string, start func() context.CancelFunc) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, running := q.runs[id]; running {
		return false
	}
	q.runs[id] = start()
	return true
}

// EndRun forgets the built-in turn of Delivery id.
func (q *Queue) EndRun(id string) {
	q.mu.Lock()
	delete(q.runs, id)
	q.mu.Unlock()
}

// cancelRun stops a running built-in turn of Delivery id.
func (q *Queue) cancelRun(id string) {
	q.mu.Lock()
	cancel := q.runs[id]
	delete(q.runs, id)
	q.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// readyChan returns the channel closed when Delivery id's activation is done.
func (q *Queue) readyChan(id string) chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	ch, ok := q.ready[id]
	if !ok {
		ch = make(chan struct{})
		q.ready[id] = ch
	}
	return ch
}

func (q *Queue) markReady(id string) {
	ch := q.readyChan(id)
	q.mu.Lock()
	defer q.mu.Unlock()
	select {
	case <-ch:
	default:
		close(ch)
	}
}

func (q *Queue) forgetReady(id string) {
	q.mu.Lock()
	delete(q.ready, id)
	q.mu.Unlock()
}

// sideLock serialises the Lark side effects of one Locus (reactions, spool) so that a
// Delivery's settlement never overtakes its activation.
func (q *Queue) sideLock(ctx context.Context, locusID string) (func(), error) {
	return q.Lock(ctx, "locus:"+locusID)
}

// Lock waits for key's turn among the queue's keyed locks; the returned func releases it.
func (q *Queue) Lock(ctx context.Context, key string) (func(), error) {
	unlock, err := q.locks.Lock(ctx, key)
	if err != nil {
		return nil, errs.Wrap(errs.Timeout, err, "gave up waiting for an earlier request on the same session")
	}
	return unlock, nil
}

// Image returns the bytes and media type of image index (1-based) of the current Delivery of
// childID's Locus.
func (q *Queue) Image(ctx context.Context, childID, deliveryID string, index int) ([]byte, string, error) {
	err := q.st.View(ctx, func(tx *store.Tx) error {
		l, err := childLocus(tx, childID)
		if err != nil {
			return err
		}
		if l.Current != deliveryID {
			return errs.New(errs.NotFound, "the delivery is not current")
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	files, note := q.spool.Get(deliveryID)
	for _, f := range files {
		if f.Index == index {
			if q.spool.Shared() {
				data, err := q.spool.Body(ctx, deliveryID, index)
				if err != nil {
					return nil, "", errs.Wrap(errs.NotFound, err, "the image is no longer in the spool")
				}
				return data, f.MediaType, nil
			}
			data, err := os.ReadFile(f.Path)
			if err != nil {
				return nil, "", errs.Wrap(errs.NotFound, err, "the image is no longer in the spool")
			}
			return data, f.MediaType, nil
		}
	}
	if note != "" {
		return nil, "", errs.New(errs.NotFound, "image %d is unavailable: %s", index, note)
	}
	return nil, "", errs.New(errs.NotFound, "no image %d", index)
}

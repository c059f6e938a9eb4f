package hint

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/pixie-dev/pixie/internal/store"
)

// # Replicas
//
// Over a store other processes share (PostgreSQL, N replicas behind a load balancer), a hint
// put on one replica must reach the streams open on every replica, and which sessions run a
// turn must be known to all. So, over a shared store only:
//
//   - every transaction that changes the queue also writes its actions to
//     hint-event/<revision> (kept eventTTL) and notifies "hints" with the revision;
//   - each replica runs one relay goroutine that, woken by that notification (from any
//     replica, itself included), by a lost-notification mark, or by its own commits, reads the
//     revision, the actions since the last revision it published and the queue, and publishes
//     them to its subscribers in revision order. A driver that polls instead of listening
//     wakes the relay every poll tick: the same frames arrive, later;
//   - the running sessions live in the store, as hint-running/<session> with a TTL of
//     RunningTTL (a replica killed mid-turn cannot leave a session running forever);
//   - the lease sweep runs on one replica at a time (store.Store.Lead).
//
// Over an embedded store none of this runs: a commit publishes directly, and the running set
// is in memory, as before.

// RunningTTL is how long a session counts as running after its TurnStart without a TurnEnd,
// over a shared store.
const RunningTTL = 12 * time.Hour

// eventTTL is how long a change's actions are kept for relays that catch up.
const eventTTL = 10 * time.Minute

// notifyTopic is the notification of a committed change; its payload is the revision.
const notifyTopic = "hints"

var (
	events  = store.NewCollection[[]Action]("hint-event")
	running = store.NewCollection[time.Time]("hint-running")
)

func eventID(rev uint64) string { return fmt.Sprintf("%020d", rev) }

// logChange records a committed change's actions and notifies the relays (shared stores).
func (q *Queue) logChange(tx *store.Tx, rev uint64, acts []Action) error {
	if err := events.PutTTL(tx, eventID(rev), acts, eventTTL); err != nil {
		return err
	}
	if err := tx.Notify(notifyTopic, fmt.Sprint(rev)); err != nil {
		return err
	}
	tx.AfterCommit(q.rl.kick)
	return nil
}

// relay publishes the changes of every replica to this replica's subscribers.
type relay struct {
	q    *Queue
	wake chan struct{}
	stop func()
	// pub is the revision published last (known is false while nobody listens). Only the
	// relay's goroutine touches them.
	pub   uint64
	known bool
}

func (r *relay) kick() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (q *Queue) startRelay() {
	q.rl = &relay{q: q, wake: make(chan struct{}, 1)}
	q.rl.stop = q.st.Listen(notifyTopic, func(store.Note) { q.rl.kick() })
	q.wg.Add(1)
	go q.rl.run()
}

func (r *relay) run() {
	defer r.q.wg.Done()
	defer r.stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-r.q.stop
		cancel()
	}()
	for {
		select {
		case <-r.q.stop:
			return
		case <-r.wake:
		}
		if err := r.catchUp(ctx); err != nil && ctx.Err() == nil {
			r.q.log.Warn("hint: could not relay queue changes", "err", err)
			select {
			case <-r.q.stop:
				return
			case <-time.After(100 * time.Millisecond):
				r.kick() // try again
			}
		}
	}
}

// catchUp publishes what changed since the last published revision.
func (r *relay) catchUp(ctx context.Context) error {
	bc := r.q.bc
	from, any := bc.minSince()
	if !any {
		r.known = false // nobody listens: nothing to publish, nothing to remember
		return nil
	}
	if from == ^uint64(0) {
		return nil // only subscriptions reading their snapshot; they kick when done
	}
	if !r.known || r.pub < from {
		r.pub, r.known = from, true
	}
	var (
		rev  uint64
		snap Snapshot
		logs []store.Entry[[]Action]
	)
	err := r.q.st.View(ctx, func(tx *store.Tx) error {
		st, err := r.q.load(tx)
		if err != nil {
			return err
		}
		rev = st.rev
		if rev <= r.pub {
			return nil
		}
		snap = r.q.snapshotOf(st)
		logs, err = events.List(tx, "", store.ScanOptions{After: []byte(eventID(r.pub))})
		return err
	})
	if err != nil {
		return err
	}
	if rev <= r.pub {
		return nil
	}
	var last []Action
	for _, e := range logs {
		at, err := strconv.ParseUint(e.ID, 10, 64)
		if err != nil || at <= r.pub || at > rev {
			continue
		}
		if at == rev {
			last = e.Value
			continue
		}
		bc.publishAt(at, nil, e.Value)
	}
	bc.publishAt(rev, &snap, last)
	r.pub = rev
	return nil
}

// sharedRunning reads the running set from the store.
func (q *Queue) sharedRunning(session string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	found := false
	err := q.st.View(ctx, func(tx *store.Tx) error {
		if session == "" || session == AllSessions {
			return running.Each(tx, "", store.ScanOptions{Limit: 1}, func(string, time.Time) error {
				found = true
				return store.ErrStop
			})
		}
		var err error
		found, err = running.Has(tx, session)
		return err
	})
	if err != nil {
		q.log.Warn("hint: could not read the running sessions", "err", err)
	}
	return found
}

func (q *Queue) sharedRunningSessions() []string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out := []string{}
	err := q.st.View(ctx, func(tx *store.Tx) error {
		return running.Each(tx, "", store.ScanOptions{}, func(id string, _ time.Time) error {
			out = append(out, id)
			return nil
		})
	})
	if err != nil {
		q.log.Warn("hint: could not read the running sessions", "err", err)
	}
	return out
}

func (q *Queue) sharedTurn(session string, start bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := q.st.Update(ctx, func(tx *store.Tx) error {
		if start {
			return running.PutTTL(tx, session, q.cfg.Now().UTC(), RunningTTL)
		}
		return running.Delete(tx, session)
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		return q.wrap(err, "record the turn")
	}
	return err
}

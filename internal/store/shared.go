package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"
)

// Several processes over one store.
//
// A driver whose data other processes may share (PostgreSQL) implements SharedDriver; its
// transactions implement NotifyTx. Over such a driver the Store
//
//   - carries notifications between processes: Tx.Notify queues one that every process's
//     Listen callbacks receive once the transaction commits (and never when it does not);
//   - grants leases: Lead tells which one process runs a cluster-wide chore (a sweep) now;
//   - reports Shared, so that a domain package keeps its in-memory caches consistent with
//     writes made by other processes, and moves what it kept in memory into the store.
//
// Over an embedded driver (Badger) the Store is the only process: Notify reaches this
// process's listeners after the commit, Lead is always true without a write, and Shared is
// false, so nothing is added to the single-process path.

// SharedDriver is a Driver whose data other processes may share.
type SharedDriver interface {
	Driver
	// Listen calls fn for every notification committed by any process (this one included),
	// until ctx ends. It calls fn with lost set whenever notifications may have been missed
	// (after the connection that carries them was lost and re-established, or on every poll tick
	// of a driver that polls instead of listening): a listener then re-reads what it caches.
	// fn is called from one goroutine and must return quickly.
	Listen(ctx context.Context, fn func(topic, payload string, lost bool)) error
	// Lead takes or renews the lease called name for holder until ttl from now (by the
	// database's clock), and reports whether holder holds it.
	Lead(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
	// Release gives up every lease holder holds.
	Release(ctx context.Context, holder string) error
}

// SerialDriver is a SharedDriver that can queue transactions on a named lock across
// processes (Store.UpdateSerial): the lock is held from before the transaction starts until
// after it ends, so each transaction sees the previous one's commit.
type SerialDriver interface {
	SharedDriver
	UpdateSerial(ctx context.Context, lock string, fn func(DriverTx) error) error
}

// NotifyTx is implemented by the transactions of a SharedDriver: the notification is sent if
// and when the transaction commits.
type NotifyTx interface {
	Notify(topic, payload string) error
}

// MaxNotifyPayload caps a notification's topic and payload together, in bytes (PostgreSQL's
// NOTIFY takes at most 8000).
const MaxNotifyPayload = 7900

// Note is one notification received by a Listen callback.
type Note struct {
	Topic   string
	Payload string
	// Lost means notifications may have been missed: re-read whatever is cached. Topic and
	// Payload are empty then.
	Lost bool
}

// Shared reports whether other processes may share the store (its driver is a SharedDriver).
func (s *Store) Shared() bool {
	_, ok := s.d.(SharedDriver)
	return ok
}

// Instance is this Store's random id, unique per process start: the holder of its leases, and
// the name replicas know it by.
func (s *Store) Instance() string { return s.instance }

// Lead reports whether this process holds the lease called name (taking or renewing it for
// ttl). Call it before every round of a chore that must run in one process only; renew well
// within ttl. An embedded store is always the leader, at no cost.
func (s *Store) Lead(ctx context.Context, name string, ttl time.Duration) (bool, error) {
	sd, ok := s.d.(SharedDriver)
	if !ok {
		return true, nil
	}
	ok, err := sd.Lead(ctx, name, s.instance, ttl)
	return ok, s.mapErr(err)
}

// Notify queues a notification on topic for every process's Listen callbacks, sent when the
// transaction commits. topic and payload together are at most MaxNotifyPayload bytes;
// notifications with the same topic and payload in one transaction may be merged into one.
func (tx *Tx) Notify(topic, payload string) error {
	if tx.readOnly {
		return errors.New("store: notify in a read-only transaction")
	}
	if topic == "" || len(topic)+len(payload)+1 > MaxNotifyPayload {
		return errors.New("store: notification topic empty or payload too long")
	}
	if nt, ok := tx.dt.(NotifyTx); ok && tx.s.Shared() {
		return nt.Notify(topic, payload)
	}
	tx.AfterCommit(func() { tx.s.bus.deliver(topic, payload, false) })
	return nil
}

// Listen calls fn for each notification on topic (from any process sharing the store, this one
// included) and with Lost notes (for every topic) when some may have been missed. fn is called
// from one goroutine and must return quickly. The returned func stops the calls.
func (s *Store) Listen(topic string, fn func(Note)) (stop func()) {
	return s.bus.add(topic, fn)
}

// bus fans notifications out to Listen callbacks; over a SharedDriver it runs the driver's
// listener from the first Listen until Close.
type bus struct {
	d       Driver
	mu      sync.Mutex
	subs    map[string]map[*func(Note)]struct{}
	started bool
	cancel  context.CancelFunc
	done    chan struct{}
}

func (b *bus) init(d Driver) { b.d = d }

func (b *bus) add(topic string, fn func(Note)) func() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.subs == nil {
		b.subs = map[string]map[*func(Note)]struct{}{}
	}
	if b.subs[topic] == nil {
		b.subs[topic] = map[*func(Note)]struct{}{}
	}
	p := &fn
	b.subs[topic][p] = struct{}{}
	if sd, ok := b.d.(SharedDriver); ok && !b.started {
		b.started = true
		ctx, cancel := context.WithCancel(context.Background())
		b.cancel, b.done = cancel, make(chan struct{})
		go func() {
			defer close(b.done)
			_ = sd.Listen(ctx, b.deliver)
		}()
	}
	return func() {
		b.mu.Lock()
		delete(b.subs[topic], p)
		b.mu.Unlock()
	}
}

func (b *bus) deliver(topic, payload string, lost bool) {
	b.mu.Lock()
	var fns []func(Note)
	if lost {
		for _, set := range b.subs {
			for p := range set {
				fns = append(fns, *p)
			}
		}
	} else {
		for p := range b.subs[topic] {
			fns = append(fns, *p)
		}
	}
	b.mu.Unlock()
	n := Note{Topic: topic, Payload: payload, Lost: lost}
	if lost {
		n.Topic, n.Payload = "", ""
	}
	for _, f := range fns {
		f(n)
	}
}

func (b *bus) stop() {
	b.mu.Lock()
	cancel, done := b.cancel, b.done
	b.cancel = nil
	b.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func newInstanceID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

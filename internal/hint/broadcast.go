package hint

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/pixie-dev/pixie/internal/errs"
)

// Event names of frames.
const (
	EventState = "state" // Data is a Snapshot
	EventHint  = "hint"  // Data is an Action
)

// maxBacklog is how many action frames a subscriber may fall behind before the oldest are
// dropped. State frames never pile up: a subscriber holds only the newest.
const maxBacklog = 256

// Frame is one event for a subscriber, already encoded.
type Frame struct {
	// Event is EventState or EventHint.
	Event string
	// Data is the JSON of a Snapshot or an Action. It is shared between subscribers and must
	// not be modified.
	Data []byte
}

// broadcaster fans committed changes out to subscribers without ever blocking the writer.
type broadcaster struct {
	mu     sync.Mutex
	subs   map[*Subscription]struct{}
	closed bool
}

func newBroadcaster() *broadcaster { return &broadcaster{subs: map[*Subscription]struct{}{}} }

// publish hands one committed change to every subscriber. It encodes once and only appends to
// each subscriber's mailbox, so its cost does not depend on how fast subscribers read.
func (b *broadcaster) publish(snap Snapshot, acts []Action) {
	// With nobody listening there is nothing to encode. A subscriber that registers after this
	// check registers after the commit, so the snapshot Subscribe reads already holds the change.
	if b.count() == 0 {
		return
	}
	state, err := json.Marshal(snap)
	if err != nil {
		return // a Snapshot always encodes; nothing sensible to do otherwise
	}
	frames := make([][]byte, 0, len(acts))
	for _, a := range acts {
		raw, err := json.Marshal(a)
		if err != nil {
			continue
		}
		frames = append(frames, raw)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		s.offer(snap.Revision, state, frames)
	}
}

// publishAt hands one change of a shared store, relayed in revision order, to the subscribers
// whose snapshot predates it; snap is nil for a change that a later one in the same round
// supersedes (its actions still go out).
func (b *broadcaster) publishAt(rev uint64, snap *Snapshot, acts []Action) {
	var state []byte
	if snap != nil {
		var err error
		if state, err = json.Marshal(snap); err != nil {
			return
		}
	}
	frames := make([][]byte, 0, len(acts))
	for _, a := range acts {
		if raw, err := json.Marshal(a); err == nil {
			frames = append(frames, raw)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		s.offerAt(rev, state, frames)
	}
}

// minSince is the oldest snapshot revision of the ungated subscriptions, and whether there is
// any subscription.
func (b *broadcaster) minSince() (uint64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var m uint64
	first := true
	for s := range b.subs {
		s.mu.Lock()
		if !s.gated && (first || s.since < m) {
			m, first = s.since, false
		}
		s.mu.Unlock()
	}
	if first {
		// Only gated subscriptions (their snapshot is being read): publish from the newest.
		return ^uint64(0), len(b.subs) > 0
	}
	return m, true
}

func (b *broadcaster) subscribe() *Subscription {
	s := &Subscription{b: b, ready: make(chan struct{}, 1), done: make(chan struct{})}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		close(s.done)
		return s
	}
	b.subs[s] = struct{}{}
	return s
}

func (b *broadcaster) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}

func (b *broadcaster) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for s := range b.subs {
		s.closeOnce.Do(func() { close(s.done) })
		delete(b.subs, s)
	}
}

// Subscription receives the queue's changes. Wait on Ready, then call Next for the frames; stop
// when Done is closed (the queue closed) and call Close when no longer interested.
type Subscription struct {
	b         *broadcaster
	ready     chan struct{}
	done      chan struct{}
	closeOnce sync.Once

	mu      sync.Mutex
	seenRev uint64 // revision of the newest state queued or delivered
	state   []byte // newest undelivered state, nil when none
	actions [][]byte
	dropped int

	// Over a shared store (relayed changes): since is the revision of the subscription's
	// snapshot, and changes up to it are not delivered; while gated (the snapshot is being
	// read) relayed changes wait in held.
	since uint64
	gated bool
	held  []heldOffer
}

type heldOffer struct {
	rev   uint64
	state []byte
	acts  [][]byte
}

// Subscribe starts a subscription and returns it with the current snapshot; the subscription
// delivers only states newer than that snapshot.
func (q *Queue) Subscribe(ctx context.Context) (*Subscription, Snapshot, error) {
	if q.rl != nil {
		return q.subscribeShared(ctx)
	}
	s := q.bc.subscribe()
	select {
	case <-s.done:
		return nil, Snapshot{}, errs.New(errs.Unavailable, "the hint queue is shutting down")
	default:
	}
	snap, err := q.Snapshot(ctx)
	if err != nil {
		s.Close()
		return nil, Snapshot{}, err
	}
	s.mu.Lock()
	if snap.Revision >= s.seenRev {
		s.seenRev, s.state = snap.Revision, nil
	}
	s.mu.Unlock()
	return s, snap, nil
}

// subscribeShared subscribes over a shared store: relayed changes that arrive while the
// snapshot is read are held, then those newer than the snapshot are delivered.
func (q *Queue) subscribeShared(ctx context.Context) (*Subscription, Snapshot, error) {
	s := q.bc.subscribe()
	s.mu.Lock()
	s.gated = true
	s.mu.Unlock()
	select {
	case <-s.done:
		return nil, Snapshot{}, errs.New(errs.Unavailable, "the hint queue is shutting down")
	default:
	}
	snap, err := q.Snapshot(ctx)
	if err != nil {
		s.Close()
		return nil, Snapshot{}, err
	}
	s.mu.Lock()
	s.gated, s.since, s.seenRev = false, snap.Revision, snap.Revision
	held := s.held
	s.held = nil
	s.mu.Unlock()
	for _, h := range held {
		s.offerAt(h.rev, h.state, h.acts)
	}
	q.rl.kick()
	return s, snap, nil
}

// offerAt takes one relayed change (state nil: actions only).
func (s *Subscription) offerAt(rev uint64, state []byte, acts [][]byte) {
	s.mu.Lock()
	if s.gated {
		s.held = append(s.held, heldOffer{rev, state, acts})
		s.mu.Unlock()
		return
	}
	if rev <= s.since {
		s.mu.Unlock()
		return
	}
	if state != nil && rev > s.seenRev {
		s.seenRev, s.state = rev, state
	}
	for _, a := range acts {
		if len(s.actions) >= maxBacklog {
			s.actions = s.actions[1:]
			s.dropped++
		}
		s.actions = append(s.actions, a)
	}
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Subscribers is the number of open subscriptions.
func (q *Queue) Subscribers() int { return q.bc.count() }

func (s *Subscription) offer(rev uint64, state []byte, acts [][]byte) {
	s.mu.Lock()
	if rev > s.seenRev {
		s.seenRev, s.state = rev, state
	}
	for _, a := range acts {
		if len(s.actions) >= maxBacklog {
			s.actions = s.actions[1:]
			s.dropped++
		}
		s.actions = append(s.actions, a)
	}
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Ready receives a value when frames may be waiting.
func (s *Subscription) Ready() <-chan struct{} { return s.ready }

// Done is closed when the subscription ends (Close, or the queue closed).
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Next returns the waiting frames: the newest state first (if one is newer than what was
// delivered), then the action frames in order. It returns nil when nothing waits.
func (s *Subscription) Next() []Frame {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Frame
	if s.state != nil {
		out = append(out, Frame{Event: EventState, Data: s.state})
		s.state = nil
	}
	for _, a := range s.actions {
		out = append(out, Frame{Event: EventHint, Data: a})
	}
	s.actions = nil
	return out
}

// Dropped is how many action frames were dropped because the subscriber fell behind.
func (s *Subscription) Dropped() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// Close ends the subscription. It is safe to call more than once.
func (s *Subscription) Close() {
	s.b.mu.Lock()
	delete(s.b.subs, s)
	s.b.mu.Unlock()
	s.closeOnce.Do(func() { close(s.done) })
}

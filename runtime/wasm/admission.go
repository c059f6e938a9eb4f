package wasm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pixie-dev/pixie/hostfuncs"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// Admission control.
//
// Guest code runs on the server's own CPUs, and a guest cannot be preempted except where it
// calls into Go (its checks, interrupt.go). So at most Config.MaxConcurrent runs execute at
// once (by default the number of CPUs); a run that finds them all taken waits, in order, at
// most Config.QueueTimeout, and at most Config.MaxQueued runs of each class (below) wait: past
// either bound it fails at once with ErrBusy. Every linear memory and snapshot is charged to one memory budget
// (budget.go): a run that would need a new instance the budget cannot hold fails at once, and a
// guest whose memory would grow past it runs out of memory.
//
// Runs are of two classes. A run is in the background class when its module faulted recently
// (trapped, timed out, exited, broke a limit, or ran longer than demoteAfter: health) or once
// it has executed guest code for longer than demoteAfter; every other run is in the foreground
// class. Background runs never take the last slot, and at each of its checks a background run
// gives its slot up when a foreground run waits, and queues again behind it. A storm of guests that spin, recurse, bomb
// memory or spam output on other sessions therefore shares one CPU at most, and a healthy gate
// waits at most one check interval for a slot. A run also gives its slot up while it waits for
// the model (pixie_ask, pixie_judge), and takes one again (with no queue limit) when the answer
// comes. A module's background work (making instances for its pool) takes background slots too.

// Limits is admission control: the run slots and their queues, and the memory budget. An
// executor has its own unless Config.Limits gives it one that other executors share (the
// server's rule executor and Pet's), so that their guests together stay within the bounds.
type Limits struct {
	adm    *admission
	budget *memBudget
}

// NewLimits returns admission control for cfg's MaxConcurrent, MaxQueued, QueueTimeout and
// MemoryBudget (their defaults for zero values).
func NewLimits(cfg Config) *Limits {
	cfg = cfg.withDefaults()
	return &Limits{adm: newAdmission(cfg), budget: newBudget(cfg.MemoryBudget)}
}

// MaxConcurrent returns how many guest runs may execute at once.
func (l *Limits) MaxConcurrent() int { return l.adm.slots }

// ErrBusy is the error of a run refused by admission control.
var ErrBusy = errors.New("the WASM runtime is busy")

// demoteAfter is how long a run executes in the foreground class before it moves to the
// background.
const demoteAfter = 20 * time.Millisecond

// admission is the executor's slots and their queues.
type admission struct {
	slots, bgSlots int
	maxQueued      int
	wait           time.Duration

	mu                 sync.Mutex
	running, bgRunning int
	// queued counts the bounded waiters of each class (0 foreground, 1 background): each class
	// has its own bound, so background runs never fill the queue of healthy ones.
	queued [2]int
	fg, bg []*waiter
	// fgWaiting is len(fg), read without the lock by background runs' checks.
	fgWaiting atomic.Int32
}

type waiter struct {
	ready   chan struct{}
	bg      bool
	bounded bool
	granted bool
}

func newAdmission(cfg Config) *admission {
	return &admission{slots: cfg.MaxConcurrent, bgSlots: max(1, cfg.MaxConcurrent-1), maxQueued: cfg.MaxQueued, wait: cfg.QueueTimeout}
}

// ticket is one run's hold on the slots.
type ticket struct {
	a    *admission
	bg   bool
	held bool
	// start is when the run's guest code started executing (or last took its slot back after
	// the model answered); health is its module's, told when the run is demoted.
	start  time.Time
	health *health
	// checks counts the run's checks so far.
	checks int
	// ctx is the run's context (for the thread it lowers, below); inPlace is the caller's
	// thread when a demotion lowered it (lower.go), raised again by finish.
	ctx     context.Context
	inPlace *inPlace
	// refill marks a healthy module's pool refill: background work, but a short one that the
	// processors do not narrow for (procs.go); noted is whether the held slot is counted there.
	refill, noted bool
}

// hold marks the slot t was given as held.
func (t *ticket) hold() {
	t.held = true
	t.noteHeld()
}

// noteHeld counts a held background slot for the processors' governor (procs.go).
func (t *ticket) noteHeld() {
	if t.held && t.bg && !t.refill && !t.noted {
		t.noted = true
		noteBackground(1)
	}
}

// lowered reports whether the run's code executes on a lowered thread because of its demotion.
func (t *ticket) lowered() bool { return t != nil && t.inPlace != nil }

// finish ends the run's hold: its slot, and the lowering of its thread.
func (t *ticket) finish() {
	if t == nil {
		return
	}
	t.release()
	t.inPlace.restore()
	t.inPlace = nil
}

func (a *admission) free(bg bool) bool {
	return a.running < a.slots && (!bg || a.bgRunning < a.bgSlots)
}

func (a *admission) take(bg bool) {
	a.running++
	if bg {
		a.bgRunning++
	}
}

// class is the index of a run's class in admission.queued.
func class(bg bool) int {
	if bg {
		return 1
	}
	return 0
}

// dispatchLocked hands free slots to waiters: foreground first, background only when no
// foreground run waits.
func (a *admission) dispatchLocked() {
	for len(a.fg) > 0 && a.free(false) {
		w := a.fg[0]
		a.fg = a.fg[1:]
		a.grantLocked(w)
	}
	for len(a.fg) == 0 && len(a.bg) > 0 && a.free(true) {
		w := a.bg[0]
		a.bg = a.bg[1:]
		a.grantLocked(w)
	}
	a.fgWaiting.Store(int32(len(a.fg)))
}

func (a *admission) grantLocked(w *waiter) {
	a.take(w.bg)
	if w.bounded {
		a.queued[class(w.bg)]--
	}
	w.granted = true
	close(w.ready)
}

// acquire takes a slot for a new run (bounded: the queue limit and the wait apply).
func (a *admission) acquire(ctx context.Context, bg bool) (*ticket, error) {
	t := &ticket{a: a, bg: bg}
	if err := a.get(ctx, t, true); err != nil {
		return nil, err
	}
	return t, nil
}

// get makes t hold a slot of its class, waiting for it; bounded waits are refused when the
// queue is full and end after a.wait.
func (a *admission) get(ctx context.Context, t *ticket, bounded bool) error {
	a.mu.Lock()
	queue := &a.fg
	if t.bg {
		queue = &a.bg
	}
	if len(*queue) == 0 && (t.bg && len(a.fg) == 0 || !t.bg) && a.free(t.bg) {
		a.take(t.bg)
		a.mu.Unlock()
		t.hold()
		return nil
	}
	if bounded && a.queued[class(t.bg)] >= a.maxQueued {
		running, waiting := a.running, len(a.fg)+len(a.bg)
		a.mu.Unlock()
		return errs.Wrap(errs.Unavailable, ErrBusy, "%v: %d guest runs executing and %d waiting (wasm.maxConcurrent, wasm.maxQueued)", ErrBusy, running, waiting)
	}
	w := &waiter{ready: make(chan struct{}), bg: t.bg, bounded: bounded}
	*queue = append(*queue, w)
	if bounded {
		a.queued[class(t.bg)]++
	}
	a.fgWaiting.Store(int32(len(a.fg)))
	a.mu.Unlock()

	var timeout <-chan time.Time
	if bounded {
		tm := time.NewTimer(a.wait)
		defer tm.Stop()
		timeout = tm.C
	}
	var why error
	select {
	case <-w.ready:
		t.hold()
		return nil
	case <-ctx.Done():
		why = ctx.Err()
	case <-timeout:
		why = errs.Wrap(errs.Unavailable, ErrBusy, "%v: no guest run slot freed within %s (wasm.maxConcurrent, wasm.queueTimeout)", ErrBusy, a.wait)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if w.granted { // granted meanwhile: keep it
		t.hold()
		return nil
	}
	for i, o := range *queue {
		if o == w {
			*queue = append((*queue)[:i], (*queue)[i+1:]...)
			break
		}
	}
	if bounded {
		a.queued[class(t.bg)]--
	}
	a.fgWaiting.Store(int32(len(a.fg)))
	return why
}

// release gives t's slot back.
func (t *ticket) release() {
	if t == nil || !t.held {
		return
	}
	a := t.a
	a.mu.Lock()
	a.running--
	if t.bg {
		a.bgRunning--
	}
	t.held = false
	if t.noted {
		t.noted = false
		noteBackground(-1)
	}
	a.dispatchLocked()
	a.mu.Unlock()
}

// reacquire takes a slot again for a run that gave its own up (a host call, a yield): it waits
// behind the others of its class, as long as ctx allows.
func (t *ticket) reacquire(ctx context.Context) error {
	if t == nil || t.held {
		return nil
	}
	return t.a.get(ctx, t, false)
}

// tick is called at the run's checks: a foreground run that executed for demoteAfter moves to
// the background class, and a background run gives its slot up to a waiting foreground run.
func (t *ticket) tick(ctx context.Context) error {
	if t == nil || !t.held {
		return nil
	}
	t.checks++
	if !t.bg && !t.start.IsZero() && time.Since(t.start) > demoteAfter {
		// A run this long counts against its module (its next runs start in the background),
		// unless this is its first check: it has then executed at most about a millisecond of
		// guest code, and what took the time was the OS or a GC holding its thread. Holding that
		// against a healthy module (a 1 ms run descheduled for 20 ms on a busy 2-core machine)
		// left all its runs one slot of two for tens of seconds. The run itself moves either
		// way: a run that waits inside host calls can reach its first check late.
		// Its code moves to an idle thread (lower.go) on the same condition: a healthy run that
		// lost its CPU before its first check would only be made later still.
		if t.checks > 1 {
			t.health.fault()
			if t.ctx != nil && !isLowered(t.ctx) {
				t.inPlace = lowerInPlace(t.ctx)
			}
		}
		a := t.a
		a.mu.Lock()
		if a.bgRunning < a.bgSlots {
			a.bgRunning++
			t.bg = true
			a.mu.Unlock()
			t.noteHeld()
		} else {
			a.running--
			t.held = false
			t.bg = true
			a.dispatchLocked()
			a.mu.Unlock()
			return t.reacquire(ctx)
		}
	}
	if t.bg && t.a.fgWaiting.Load() > 0 {
		t.release()
		return t.reacquire(ctx)
	}
	return nil
}

// slotHelper releases the run's slot while the helper answers (a model call takes seconds and
// no CPU here).
type slotHelper struct {
	h hostfuncs.Helper
	t *ticket
}

func (s *slotHelper) Ask(ctx context.Context, req abi.AskRequest) (abi.AskResponse, error) {
	s.t.release()
	res, err := s.h.Ask(ctx, req)
	if rerr := s.t.reacquire(ctx); rerr != nil && err == nil {
		err = rerr
	}
	s.t.start = time.Now()
	return res, err
}

func (s *slotHelper) Judge(ctx context.Context, req abi.JudgeRequest) (abi.JudgeResponse, error) {
	s.t.release()
	res, err := s.h.Judge(ctx, req)
	if rerr := s.t.reacquire(ctx); rerr != nil && err == nil {
		err = rerr
	}
	s.t.start = time.Now()
	return res, err
}

func (s *slotHelper) Log(level, message string) { s.h.Log(level, message) }

// health is a module's recent faults: a score that each fault raises by one and that halves
// every faultHalfLife. A module whose score is above one half runs in the background class.
type health struct {
	mu    sync.Mutex
	score float64
	at    time.Time
}

const faultHalfLife = 10 * time.Second

func (h *health) decayLocked(now time.Time) {
	if !h.at.IsZero() {
		h.score *= math.Exp2(-now.Sub(h.at).Seconds() / faultHalfLife.Seconds())
	}
	h.at = now
}

func (h *health) fault() {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.decayLocked(time.Now())
	h.score++
	h.mu.Unlock()
}

func (h *health) unhealthy() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.decayLocked(time.Now())
	return h.score > 0.5
}

// budgetError is the error of a run the memory budget cannot hold.
// need is the bytes it needed, when known.
func budgetError(b *memBudget, need int) error {
	more := ""
	if need > 0 {
		more = fmt.Sprintf(", %d MiB more needed", (need+(1<<20)-1)>>20)
	}
	return errs.Wrap(errs.Unavailable, ErrBusy, "%v: the WASM memory budget is exhausted (%d MiB of %d MiB in use%s; wasm.memoryBudget)",
		ErrBusy, b.Used()>>20, b.limit.Load()>>20, more)
}

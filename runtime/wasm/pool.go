package wasm

import (
	"context"
	"time"
)

// The pool.
//
// A module keeps up to Config.PoolSize instances ready (idle), made in the background by its
// worker (refill), so that a run takes one instead of making one. An instance that ran without
// fault is reset to the module's snapshot after its run, off the run's path (once the answer
// is sent: internal/later), and goes back to the pool; the pool holds up to idleCap instances,
// so that the runs in flight find one: a run holds its instance from when it gets its slot
// until its answer is sent, so more runs than slots hold one at a time (up to one per
// connection). An instance that trapped, timed out, exited, broke a limit, or whose module
// cannot be reset is closed instead, and the worker makes a new one: from the snapshot
// (instantiate, then copy the snapshot's memory and globals in) when the module allows it, by
// instantiating and initialising it otherwise.

// idlePerSlot is how many instances per run slot a module keeps at most: a run holds its
// instance while its answer is written, and a recycled instance the pool cannot hold is
// closed, to be cloned again (milliseconds for a Go guest) by the next run that finds none.
const idlePerSlot = 4

// idleCap is how many ready instances a module keeps at most (the refill makes only
// Config.PoolSize; the rest are instances that served a run).
func (x *Executor) idleCap() int {
	if x.e.cfg.PoolSize == 0 {
		return 0
	}
	return max(x.e.cfg.PoolSize, idlePerSlot*x.adm.slots)
}

// take returns a ready instance, or makes one when none is ready.
func (m *module) take(ctx context.Context) (*instance, error) {
	select {
	case inst := <-m.idle:
		return inst, nil
	default:
	}
	// A new instance needs at least the snapshot's memory: refused at once when the budget
	// cannot hold it (otherwise the instantiation fails on it, also with the budget's error).
	if s := m.snap.Load(); s != nil {
		if need := s.guest.len() + s.kernel.len(); !m.x.budget.fits(need) {
			return nil, budgetError(m.x.budget, need)
		}
	}
	return m.newInstance(ctx)
}

// recycle ends inst's run: healthy and resettable, it is reset and put back; otherwise, or
// when the pool is full or the module evicted, it is closed. The worker then tops the pool up.
func (m *module) recycle(inst *instance, healthy bool) {
	if healthy && m.reuse.Load() && cap(m.idle) > 0 && !m.isEvicted() {
		if err := inst.reset(); err == nil {
			m.resets.Add(1)
			select {
			case m.idle <- inst:
				return
			default:
			}
		}
	}
	inst.close()
	m.kick()
}

// kick asks the module's worker to top the pool up.
func (m *module) kick() {
	select {
	case m.kickc <- struct{}{}:
	default:
	}
}

func (m *module) lastInitErr() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.initErr
}

// refill is the module's worker until the module is evicted: on each kick it fills the pool up
// to Config.PoolSize. An instance that fails to start stops the refill until the next kick, and
// the error is kept for Warm.
func (m *module) refill() {
	for {
		select {
		case <-m.done:
			return
		case <-m.kickc:
		}
		// The run that kicked finishes its answer first: making an instance keeps a CPU busy
		// (and its guest code cannot be preempted), which on a small machine would hold the
		// answer back.
		if len(m.idle) > 0 {
			select {
			case <-m.done:
				return
			case <-time.After(refillDelay):
			}
		}
		for len(m.idle) < m.x.e.cfg.PoolSize {
			// The worker holds the module like a run does: an eviction while it prepares an
			// instance interrupts the guest (the context) but closes the compiled module only
			// when the worker lets go, never under running guest code.
			if !m.tryAcquire() {
				return
			}
			// Making an instance is background work: it waits for a background slot.
			t := &ticket{a: m.x.adm, bg: true, refill: !m.health.unhealthy()}
			if err := t.reacquire(m.ctx); err != nil {
				m.release()
				return
			}
			ctx, cancel := context.WithTimeout(m.ctx, DefaultInitTimeout)
			var inst *instance
			var err error
			if m.health.unhealthy() { // a faulting module's instances: made on an idle thread (lower.go)
				onIdleThread(ctx, func(ctx context.Context) { inst, err = m.newInstance(ctx) })
			} else {
				inst, err = m.newInstance(ctx)
			}
			cancel()
			t.release()
			m.mu.Lock()
			m.initErr = err
			m.mu.Unlock()
			if err == nil {
				select {
				case m.idle <- inst:
				default:
					inst.close()
				}
			}
			m.release()
			if err != nil {
				break
			}
		}
	}
}

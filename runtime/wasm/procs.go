package wasm

import (
	"context"
	goruntime "runtime"
	"sync/atomic"
	"time"
)

// Go processors that follow background guest code (GovernProcs).
//
// A server that shares its CPUs with its clients gains from more Go processors than CPUs: when
// the OS preempts a thread that runs a processor (a client woke on its CPU), the goroutines
// queued on that processor wait until the thread runs again, unless another processor is free
// to steal them. With one processor per CPU that stall set the WASM gate's p99 at 8
// connections on 2 cores; with two per CPU the other processors keep serving.
//
// But more processors than CPUs also hand the sharing of the CPUs to the OS, which shares them
// in slices of milliseconds. Background guest code (a faulting module's runs, a run that went
// on too long: admission.go) then holds a CPU for its whole slice while a healthy request
// waits, where Go's scheduler would have switched to it at the background run's next check (a
// storm of fault guests pushed a good gate's p99 to 2.4–3.2× its quiet p99). So the processors
// follow the background work: while any background slot is held, the process runs one
// processor per CPU; once none has been held for widenAfter, it goes back to the wide count.
//
// (Threads of the OS's idle class, lower.go, solve the same problem without narrowing, but
// they break the time limit on a machine that other processes keep busy; they are opt-in.)

// bgHeld counts the background slots held across every admission of the process.
var bgHeld atomic.Int32

// bgChanged is signalled when bgHeld goes from zero to more, or back to zero.
var bgChanged = make(chan struct{}, 1)

// widenAfter is how long no background slot must be held before the processors widen again:
// long enough that a storm whose runs follow each other does not flip them at every run.
var widenAfter = 2 * time.Second

// noteBackground adds d to the background slots held.
func noteBackground(d int) {
	n := bgHeld.Add(int32(d))
	if n == 0 || d > 0 && n == int32(d) {
		select {
		case bgChanged <- struct{}{}:
		default:
		}
	}
}

// governing is whether a GovernProcs runs: only one may.
var governing atomic.Bool

// GovernProcs runs the process with wide Go processors (GOMAXPROCS) while no background guest
// code holds a run slot, and with the processors it had when called (one per CPU, by default)
// while some does: it narrows at once, and widens again once no background slot has been held
// for widenAfter. It sets the processors for now before it returns, and governs them until ctx
// is done; then it gives back the processors it found and closes the returned channel. Only
// one governor runs at a time: another call's channel is closed at once. `pixie serve` runs it
// (cmd/pixie: procs.go).
func GovernProcs(ctx context.Context, wide int) <-chan struct{} {
	done := make(chan struct{})
	narrow := goruntime.GOMAXPROCS(0)
	if wide <= narrow || !governing.CompareAndSwap(false, true) {
		close(done)
		return done
	}
	g := &governor{narrow: narrow, wide: wide, cur: narrow}
	if bgHeld.Load() == 0 {
		g.set(wide)
	}
	go func() {
		defer close(done)
		defer governing.Store(false)
		defer g.set(narrow)
		g.run(ctx)
	}()
	return done
}

// governor is GovernProcs' state.
type governor struct {
	narrow, wide, cur int
	quiet             *time.Timer // running while no background slot is held and cur is narrow
}

func (g *governor) set(n int) {
	if g.cur != n {
		goruntime.GOMAXPROCS(n)
		g.cur = n
	}
}

func (g *governor) stopQuiet() {
	if g.quiet != nil {
		g.quiet.Stop()
		g.quiet = nil
	}
}

func (g *governor) run(ctx context.Context) {
	defer g.stopQuiet()
	for {
		var quietC <-chan time.Time
		if g.quiet != nil {
			quietC = g.quiet.C
		}
		select {
		case <-ctx.Done():
			return
		case <-bgChanged:
			g.stopQuiet() // restarted below: background code may have come and gone since
			if bgHeld.Load() > 0 {
				g.set(g.narrow)
			} else if g.cur != g.wide {
				g.quiet = time.NewTimer(widenAfter)
			}
		case <-quietC:
			g.quiet = nil
			if bgHeld.Load() == 0 {
				g.set(g.wide)
			}
		}
	}
}

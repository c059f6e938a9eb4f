package wasm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero/api"

	"github.com/pixie-dev/pixie/runtime/wasm/internal/extismx"
	"github.com/pixie-dev/pixie/runtime/wasm/internal/instrument"
)

// Interrupting a guest.
//
// A rule has a time limit, and no guest code may dodge it: not a loop, not recursion without
// a loop (direct, mutual, through call_indirect), not the Extism kernel's code, not a host call.
// Every module Pixie runs, the guest and the Extism kernel alike, is rewritten by
// internal/instrument: it spends fuel at every function entry, loop header and bulk memory
// instruction, and every instrument.Budget units of fuel (about a millisecond of code at most)
// it calls the host function instrument.CheckModule.CheckName, which is check below. check
// ends the guest with a trap (an *interruptError) once the run's context is done, and, being a
// call into Go, lets the Go scheduler and the garbage collector stop the goroutine: machine code
// compiled from WebAssembly cannot be preempted, so a guest that never called into Go would
// hold a stop-the-world (and with it the whole server) until it ended.
//
// check finds the run's context in two places: the context of the call it is part of (the
// guest's call, an instantiation running a start function, Pixie's own calls into the kernel),
// and the instance the calling module belongs to, for the calls Extism makes into the kernel
// with context.Background() (its memory helpers, used by host functions): every guest and
// kernel module is registered with its instance while the instance lives (checks).
//
// A module that cannot be rewritten is refused when it is uploaded, with the reason; there is
// no fallback to wazero's own check (WithCloseOnContextDone), which only checks at loop
// headers and so cannot stop recursion either.

// interruptError is the trap check raises: the run's context ended (its cause is
// context.DeadlineExceeded or context.Canceled).
type interruptError struct{ cause error }

func (e *interruptError) Error() string { return "the guest was interrupted: " + e.cause.Error() }
func (e *interruptError) Unwrap() error { return e.cause }

// checks maps the guest and kernel modules of live instances to their instance.
type checks struct{ m sync.Map }

func (c *checks) add(inst *instance, mods ...api.Module) {
	for _, m := range mods {
		c.m.Store(m, inst)
	}
}

func (c *checks) remove(mods ...api.Module) {
	for _, m := range mods {
		c.m.Delete(m)
	}
}

// fn is the host function instrumented code calls.
func (c *checks) fn(ctx context.Context, mod api.Module, stack []uint64) {
	if err := ctx.Err(); err != nil {
		panic(&interruptError{cause: err})
	}
	budget := int64(instrument.Budget)
	if isLowered(ctx) {
		budget /= loweredDivisor
	}
	if v, ok := c.m.Load(mod); ok {
		if s := v.(*instance).run.Load(); s != nil {
			if err := s.ctx.Err(); err != nil {
				panic(&interruptError{cause: err})
			}
			// Admission: a run may have to give its slot up here (admission.go).
			if err := s.ticket.tick(s.ctx); err != nil {
				panic(&interruptError{cause: err})
			}
			if s.ticket.lowered() {
				budget = instrument.Budget / loweredDivisor
			}
		}
	}
	stack[0] = uint64(budget)
}

// runState is what an instance knows of the run it serves.
type runState struct {
	ctx    context.Context
	ticket *ticket
}

// instanceRun is embedded in instance.
type instanceRun struct {
	run atomic.Pointer[runState]
}

// kernel is Extism's kernel, instrumented once.
var kernel = sync.OnceValues(func() (*instrument.Result, error) {
	res, err := instrument.Rewrite(extismx.Kernel())
	if err != nil {
		return nil, fmt.Errorf("wasm: instrument the Extism kernel: %w", err)
	}
	if !res.Resettable {
		return nil, fmt.Errorf("wasm: the Extism kernel cannot be reset: %s", res.NotResettable)
	}
	return res, nil
})

// isInterrupt reports whether err is check's trap, and its cause.
func isInterrupt(err error) (error, bool) {
	var ie *interruptError
	if errors.As(err, &ie) {
		return ie.cause, true
	}
	return nil, false
}

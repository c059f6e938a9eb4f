// Package later puts work that a request sets off, but that its answer does not wait for,
// after the answer is sent.
//
// Such work usually starts by waking a goroutine or arming a timer: starting the run-record
// writer, or the worker that refills a WASM module's instance pool. On a small machine each
// of these costs a system call (a futex wake of an idle thread, or a write that wakes the
// network poller) and wakes the other CPU, which holds the answer back by tens of µs
// (internal/wasmit's BenchmarkEvaluateBlockRisky). A handler makes a Queue, hands it down,
// sends its answer, and then calls Release; code that sets work off calls the Queue's Do.
//
// The Queue is handed down explicitly, as a field of the request it belongs to
// (gate.EvalRequest.After, hooks.Call.After, and across runtime.Executor.Run
// runtime.Request.After, which takes any runtime.Later); it never travels in a context.
package later

import (
	"sync"

	"github.com/pixie-dev/pixie/runtime"
)

var _ runtime.Later = (*Queue)(nil)

// Queue is the work held until an answer is sent. The zero value holds; a nil *Queue holds
// nothing (Do runs at once). It is safe for concurrent use.
type Queue struct {
	mu    sync.Mutex
	work  []func()
	ended bool
}

// Do runs f after the answer when q holds (q is not nil and not yet released), and at once
// otherwise. f must not block for long: it runs on the goroutine that calls Release.
func (q *Queue) Do(f func()) {
	if q != nil && q.hold(f) {
		return
	}
	f()
}

// Release runs the held work and ends the holding (later Do calls run at once). Call it once
// the answer is sent, and always: defer it. Calls after the first do nothing.
func (q *Queue) Release() {
	q.mu.Lock()
	work := q.work
	q.work, q.ended = nil, true
	q.mu.Unlock()
	for _, f := range work {
		f()
	}
}

func (q *Queue) hold(f func()) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ended {
		return false
	}
	q.work = append(q.work, f)
	return true
}

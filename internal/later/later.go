// Package later puts work that a request sets off, but that its answer does not wait for,
// after the answer is sent.
//
// Such work usually starts by waking a goroutine or arming a timer: starting the run-record
// writer, or the worker that refills a WASM module's instance pool. On a small machine each
// of these costs a system call (a futex wake of an idle thread, or a write that wakes the
// network poller) and wakes the other CPU, which holds the answer back by tens of µs
// (internal/wasmit's BenchmarkEvaluateBlockRisky). A handler calls Defer, passes the context
// down, sends its answer, and then calls the function Defer returned; code that sets work off
// calls Do with the context it was given.
package later

import (
	"context"
	"sync"
)

type key struct{}

// queue is the work held until the answer is sent.
type queue struct {
	mu    sync.Mutex
	work  []func()
	ended bool
}

// Defer returns a context under which Do holds work, and the function that runs the held work
// and ends the holding (later Do calls run at once). Call it once the answer is sent, and
// always: defer it. Calls after the first do nothing.
func Defer(ctx context.Context) (context.Context, func()) {
	q := &queue{}
	return context.WithValue(ctx, key{}, q), q.end
}

// Do runs f after the answer when ctx comes from Defer and the answer is not sent yet, and at
// once otherwise. f must not block for long: it runs on the handler's goroutine.
func Do(ctx context.Context, f func()) {
	if q, ok := ctx.Value(key{}).(*queue); ok && q.hold(f) {
		return
	}
	f()
}

func (q *queue) hold(f func()) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ended {
		return false
	}
	q.work = append(q.work, f)
	return true
}

func (q *queue) end() {
	q.mu.Lock()
	work := q.work
	q.work, q.ended = nil, true
	q.mu.Unlock()
	for _, f := range work {
		f()
	}
}

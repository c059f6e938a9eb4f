package gate

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/pixie-dev/pixie/internal/later"
	"github.com/pixie-dev/pixie/internal/store"
)

// maxRecordBatch bounds the records one background transaction writes (a record may carry a
// target of up to MaxTargetSize).
const maxRecordBatch = 32

// recordDelay is how long the recorder waits after the first record of a batch before it
// writes: long enough for the evaluation that queued it to send its answer first (a synced
// commit running beside the response on a two-core machine delayed a WASM gate's answer over
// HTTP by about 0.2 ms: internal/wasmit's BenchmarkEvaluateBlockRisky), and it lets a busy
// server gather more records into one commit.
const recordDelay = 2 * time.Millisecond

// recorder writes run records in the background. A store commit costs more than a WASM rule's
// whole run, so an evaluation hands its record to the recorder and answers at once; the
// recorder commits what has queued meanwhile in one transaction, without waiting for the disk
// (store.UpdateLazy: a commit that waits for its sync held one of a two-core server's two
// processors often enough to double a WASM gate's p99 at 8 connections). Every read of records
// (Record, Records, ChatNotes, SessionGates) first waits until the records queued before it are
// written, so a client always reads its own runs, and Service.Close writes what is queued: a
// clean shutdown loses nothing. A crash of the process loses at most the records still queued
// (the last few milliseconds), a power loss also those the disk had not been given yet
// (UpdateLazy), never a decision: runs whose decision depends on the store (a redo counted
// against the turn's limit) are recorded synchronously, as before.
//
// The worker runs only while records are queued; it starts recordDelay after the first, or
// after the answer that queued it is sent (internal/later).
type recorder struct {
	st     *store.Store
	log    *slog.Logger
	write  func(tx *store.Tx, recs []*Record) error // Service.writeRecords
	commit *sync.Mutex                              // held around each commit (sessionCache.commit)

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []*Record
	queued  uint64 // records added so far
	written uint64 // records written (or given up on) so far
	running bool
}

func newRecorder(st *store.Store, log *slog.Logger, commit *sync.Mutex, write func(tx *store.Tx, recs []*Record) error) *recorder {
	r := &recorder{st: st, log: log, write: write, commit: commit}
	r.cond = sync.NewCond(&r.mu)
	return r
}

// add queues one record and starts the worker, after the answer when after holds
// (EvalRequest.After): starting it arms a timer, which can cost a system call.
func (r *recorder) add(after *later.Queue, rec *Record) {
	r.mu.Lock()
	r.queue = append(r.queue, rec)
	r.queued++
	r.mu.Unlock()
	after.Do(r.start)
}

// start starts the worker, recordDelay from now, unless it is running or nothing is queued.
func (r *recorder) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.running && len(r.queue) > 0 {
		r.running = true
		time.AfterFunc(recordDelay, r.run)
	}
}

func (r *recorder) run() {
	for {
		r.mu.Lock()
		n := min(len(r.queue), maxRecordBatch)
		if n == 0 {
			r.running = false
			r.mu.Unlock()
			return
		}
		batch := r.queue[:n:n]
		r.queue = r.queue[n:]
		if len(r.queue) == 0 {
			r.queue = nil // let the backing array go
		}
		r.mu.Unlock()

		ctx := context.Background()
		err := r.commitBatch(ctx, batch)
		if err != nil && len(batch) > 1 {
			// One at a time, so that one bad record (too big for a batch) loses only itself.
			for i := range batch {
				if err := r.commitBatch(ctx, batch[i:i+1:i+1]); err != nil {
					r.log.Error("a gate run record could not be written", "err", err)
				}
			}
		} else if err != nil {
			r.log.Error("a gate run record could not be written", "err", err)
		}
		r.mu.Lock()
		r.written += uint64(n)
		r.cond.Broadcast()
		r.mu.Unlock()
	}
}

// commitBatch writes recs in one commit that does not wait for the disk, holding the commit
// lock (sessionCache) around it.
func (r *recorder) commitBatch(ctx context.Context, recs []*Record) error {
	r.commit.Lock()
	defer r.commit.Unlock()
	return r.st.UpdateLazy(ctx, func(tx *store.Tx) error { return r.write(tx, recs) })
}

// flush waits until every record added before the call is written, starting the worker at
// once when records wait for an answer to be sent (internal/later).
func (r *recorder) flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	target := r.queued
	if r.written < target && !r.running {
		r.running = true
		go r.run()
	}
	for r.written < target {
		r.cond.Wait()
	}
}

// Flush writes the run records still queued, and the missing presets counted (missing.go). The
// Service stays usable (later records are written in the background again).
func (s *Service) Flush(context.Context) error {
	s.rec.flush()
	s.missing.flush()
	return nil
}

// Close stops hearing other replicas' changes and the records' retention sweep, and writes what
// is still queued (Flush).
// Call it before closing the store. It may be called more than once.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	unlisten := s.unlisten
	s.unlisten = nil
	s.mu.Unlock()
	if unlisten != nil {
		unlisten()
	}
	s.ret.close()
	return s.Flush(ctx)
}

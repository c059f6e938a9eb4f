package gate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
)

// Retention of run records (records.maxBytes, records.maxAge): a background sweep deletes the
// oldest records first, those older than MaxAge, then more until the records take at most
// MaxBytes. What the records take is counted as they are written, in the store:
//
//	gate-run-bytes/i/<instance>  bytes and records this process added (each batch adds to it)
//	gate-run-bytes/base          what the sweep took away (negative), and what it folded in from
//	                             processes that stopped; the records' total is the sum of all
//	gate-run-old/<time>/<run id> records written before run ids sorted by time, listed once
//	                             (oldest first) so that the sweep can take them first
//
// The count is exact: every record's size is added in the transaction that writes it and taken
// away in the one that deletes it, and records have no TTL (nothing else deletes them). A
// record's size is its key and value and its id index entry's (recordSize); the sessions' own
// entries (one per session) are not counted. Over a shared store one replica sweeps at a time
// (store.Lead).

// RecordRetention bounds the run records kept. The zero value keeps every record.
type RecordRetention struct {
	// MaxBytes is the most the records may take (see recordSize); zero means no bound.
	MaxBytes int64
	// MaxAge is how long a record is kept after its run started; zero means no bound.
	MaxAge time.Duration
	// Interval is the time between sweeps; zero means a minute. A process that wrote a
	// sixteenth of MaxBytes since the last sweep sweeps sooner (at most every 5 s, or every
	// Interval when that is shorter).
	Interval time.Duration
}

var (
	ledgerCol = store.NewCollection[ledger]("gate-run-bytes")
	oldRunCol = store.NewCollection[oldRun]("gate-run-old")
)

// ledger is one entry of the count.
type ledger struct {
	Bytes   int64     `json:"bytes"`
	Records int64     `json:"records"`
	At      time.Time `json:"at"`
}

// oldRun lists a record written before version 1 (its id index entry holds its key).
type oldRun struct {
	Key  string `json:"key"`
	Size int64  `json:"size"`
}

const (
	ledgerBase = "base"
	// cfgRecordsIndex marks that the records written before version 1 are listed in
	// gate-run-old and counted.
	cfgRecordsIndex = "records-index"
	// sweepBatch is the records deleted per transaction.
	sweepBatch = 256
	// foldAfter is how long a process's count must be untouched before the sweep folds it into
	// the base (it stopped, or writes nothing).
	foldAfter  = 10 * time.Minute
	sweepLease = "gate-records-sweep"
)

// retention is the count and the sweep of one Service.
type retention struct {
	st    *store.Store
	cfg   RecordRetention
	log   *slog.Logger
	now   func() time.Time
	inst  string
	poke  chan struct{}
	stop  chan struct{}
	done  chan struct{}
	since atomic.Int64 // bytes written by this process since the last sweep
	// total and count are the records' size and number at the last sweep (or count).
	total, count atomic.Int64
	// swept counts the records the sweeps deleted (for tests and metrics).
	swept atomic.Int64
	mu    sync.Mutex // one sweep at a time
	// cursor is the id of the last record the sweep deleted, where the next sweep starts (run
	// ids are in time order), and fullAt when a sweep last started from the first id. A
	// deleted record leaves a tombstone that an iterator still walks until compaction drops
	// it, and a sweep that started from the first id each time walked every record deleted
	// since: under make soak, once records reached records.maxBytes, the server's throughput
	// halved within a minute. A record written with an id older than the cursor (a run that
	// took long to finish) is left to the next full pass, at least every fullSweepEvery.
	cursor string
	fullAt time.Time
}

// fullSweepEvery is how often a sweep starts from the first record anyway.
const fullSweepEvery = time.Hour

func newRetention(st *store.Store, cfg RecordRetention, log *slog.Logger, now func() time.Time) *retention {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	return &retention{st: st, cfg: cfg, log: log, now: now, inst: "i/" + st.Instance(),
		poke: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

func (r *retention) bounded() bool { return r.cfg.MaxBytes > 0 || r.cfg.MaxAge > 0 }

// add counts records written in tx by this process.
func (r *retention) add(tx *store.Tx, bytes, records int64) error {
	l, err := ledgerCol.Get(tx, r.inst)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	l.Bytes += bytes
	l.Records += records
	l.At = r.now().UTC()
	if err := ledgerCol.Put(tx, r.inst, l); err != nil {
		return err
	}
	if r.cfg.MaxBytes > 0 {
		tx.AfterCommit(func() {
			if r.since.Add(bytes) >= r.cfg.MaxBytes/16 {
				select {
				case r.poke <- struct{}{}:
				default:
				}
			}
		})
	}
	return nil
}

// markFresh marks a store without records as one whose records are all of version 1, so that
// the first sweep does not read every record written since the start looking for older ones.
func (r *retention) markFresh(ctx context.Context) error {
	return r.st.Update(ctx, func(tx *store.Tx) error {
		if _, err := configCol.Get(tx, cfgRecordsIndex); !errors.Is(err, store.ErrNotFound) {
			return err
		}
		empty := true
		if err := tx.ScanRaw(runIDCol.Name()+"/", store.ScanOptions{Limit: 1}, func(string, []byte) error {
			empty = false
			return nil
		}); err != nil || !empty {
			return err
		}
		return configCol.Put(tx, cfgRecordsIndex, "1")
	})
}

// start runs the sweep in the background until close, when records are bounded: every
// Interval (the first one Interval after the start), and sooner when poked.
func (r *retention) start() {
	if !r.bounded() {
		close(r.done)
		return
	}
	go r.loop()
}

func (r *retention) close() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.done
}

func (r *retention) loop() {
	defer close(r.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-r.stop; cancel() }()
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		case <-r.poke:
			if wait := min(5*time.Second, r.cfg.Interval) - time.Since(last); wait > 0 {
				select {
				case <-r.stop:
					return
				case <-time.After(wait):
				}
			}
		}
		if _, err := r.sweep(ctx); err != nil && ctx.Err() == nil {
			r.log.Error("the gate records' retention sweep failed", "err", err)
		}
		last = time.Now()
	}
}

// sweep deletes the records past the bounds, oldest first, and returns how many. Over a
// shared store only the replica holding the lease sweeps.
func (r *retention) sweep(ctx context.Context) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.since.Store(0)
	lead, err := r.st.Lead(ctx, sweepLease, 3*r.cfg.Interval)
	if err != nil || !lead {
		return 0, err
	}
	if err := r.listOld(ctx); err != nil {
		return 0, fmt.Errorf("list the records of an older version: %w", err)
	}
	if err := r.fold(ctx); err != nil {
		return 0, err
	}
	total, count, err := r.measure(ctx)
	if err != nil {
		return 0, err
	}
	deleted := 0
	cutoff := time.Time{}
	if r.cfg.MaxAge > 0 {
		cutoff = r.now().Add(-r.cfg.MaxAge)
	}
	// Oldest first: the records of an older version (all older than any other), then the run id
	// index, which is in time order.
	for _, src := range []func(context.Context, time.Time, *int64) (int, bool, error){r.sweepOld, r.sweepIndex} {
		n, more, err := src(ctx, cutoff, &total)
		deleted += n
		count -= int64(n)
		if err != nil {
			return deleted, err
		}
		if !more {
			break
		}
	}
	r.total.Store(total)
	r.count.Store(count)
	r.swept.Add(int64(deleted))
	return deleted, nil
}

// over reports whether a record of size started at t must go: older than cutoff, or the
// records over MaxBytes.
func (r *retention) over(t, cutoff time.Time, total int64) bool {
	return (!cutoff.IsZero() && t.Before(cutoff)) || (r.cfg.MaxBytes > 0 && total > r.cfg.MaxBytes)
}

// sweepIndex deletes version-1 records from the run id index, oldest first, while they are
// over the bounds. more is false when it stopped at a record it keeps.
func (r *retention) sweepIndex(ctx context.Context, cutoff time.Time, total *int64) (int, bool, error) {
	deleted := 0
	after := r.cursor
	if after == "" || r.now().Sub(r.fullAt) >= fullSweepEvery || r.now().Before(r.fullAt) {
		after, r.fullAt = "", r.now()
	}
	for {
		n, stopped := 0, false
		next := *total
		var last, lastDeleted string
		err := r.st.UpdateLazy(ctx, func(tx *store.Tx) error {
			n, stopped, next, last, lastDeleted = 0, false, *total, after, ""
			var freed, gone int64
			opts := store.ScanOptions{Limit: sweepBatch}
			if after != "" {
				opts.After = []byte(runIDCol.Key(after))
			}
			err := tx.ScanRaw(runIDCol.Name()+"/", opts, func(k string, v []byte) error {
				id := strings.TrimPrefix(k, runIDCol.Name()+"/")
				last = id
				idx, err := decodeIndex(id, v)
				if err != nil {
					return err
				}
				if idx.Legacy {
					return nil // listed in gate-run-old, deleted by sweepOld
				}
				t, _ := runIDTime(id)
				if !r.over(t, cutoff, next) {
					stopped = true
					return store.ErrStop
				}
				if err := tx.DeleteRaw(runsCol.Key(idx.Key)); err != nil {
					return err
				}
				if err := tx.DeleteRaw(k); err != nil {
					return err
				}
				next -= idx.Size
				freed += idx.Size
				gone++
				n++
				lastDeleted = id
				return nil
			})
			if err != nil && !errors.Is(err, store.ErrStop) {
				return err
			}
			if gone == 0 {
				return nil
			}
			return r.takeAway(tx, freed, gone)
		})
		if err != nil {
			return deleted, true, err
		}
		deleted += n
		*total = next
		if lastDeleted != "" {
			r.cursor = lastDeleted
		}
		if stopped || last == after {
			return deleted, !stopped, nil
		}
		after = last
		if err := ctx.Err(); err != nil {
			return deleted, true, err
		}
	}
}

// sweepOld deletes the records of an older version (gate-run-old), oldest first, while they
// are over the bounds.
func (r *retention) sweepOld(ctx context.Context, cutoff time.Time, total *int64) (int, bool, error) {
	deleted := 0
	for {
		n, stopped, empty := 0, false, true
		next := *total
		err := r.st.UpdateLazy(ctx, func(tx *store.Tx) error {
			n, stopped, empty, next = 0, false, true, *total
			var freed, gone int64
			err := oldRunCol.Each(tx, "", store.ScanOptions{Limit: sweepBatch}, func(k string, o oldRun) error {
				empty = false
				ts, id, _ := strings.Cut(k, "/")
				t := parseSortableTime(ts)
				if !r.over(t, cutoff, next) {
					stopped = true
					return store.ErrStop
				}
				for _, key := range []string{runsCol.Key(o.Key), runIDCol.Key(id), oldRunCol.Key(k)} {
					if err := tx.DeleteRaw(key); err != nil {
						return err
					}
				}
				next -= o.Size
				freed += o.Size
				gone++
				n++
				return nil
			})
			if err != nil {
				return err
			}
			if gone == 0 {
				return nil
			}
			return r.takeAway(tx, freed, gone)
		})
		if err != nil {
			return deleted, true, err
		}
		deleted += n
		*total = next
		if stopped {
			return deleted, false, nil
		}
		if empty {
			return deleted, true, nil
		}
		if err := ctx.Err(); err != nil {
			return deleted, true, err
		}
	}
}

// takeAway counts deleted records in the base.
func (r *retention) takeAway(tx *store.Tx, bytes, records int64) error {
	b, err := ledgerCol.Get(tx, ledgerBase)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	b.Bytes -= bytes
	b.Records -= records
	b.At = r.now().UTC()
	return ledgerCol.Put(tx, ledgerBase, b)
}

// measure is the records' total size and number: the sum of the count's entries.
func (r *retention) measure(ctx context.Context) (total, count int64, err error) {
	err = r.st.View(ctx, func(tx *store.Tx) error {
		total, count = 0, 0
		return ledgerCol.Each(tx, "", store.ScanOptions{}, func(_ string, l ledger) error {
			total += l.Bytes
			count += l.Records
			return nil
		})
	})
	if err == nil {
		r.total.Store(total)
		r.count.Store(count)
	}
	return total, count, err
}

// fold moves the counts of processes that have not written for foldAfter into the base, so
// that the count keeps one entry per live process. A process reads its entry at every write,
// so one folded while it lives starts again from zero, and nothing is counted twice.
func (r *retention) fold(ctx context.Context) error {
	return r.st.Update(ctx, func(tx *store.Tx) error {
		var folded ledger
		var keys []string
		err := ledgerCol.Each(tx, "i/", store.ScanOptions{}, func(id string, l ledger) error {
			if id == r.inst || r.now().Sub(l.At) < foldAfter {
				return nil
			}
			folded.Bytes += l.Bytes
			folded.Records += l.Records
			keys = append(keys, id)
			return nil
		})
		if err != nil || len(keys) == 0 {
			return err
		}
		for _, k := range keys {
			if err := ledgerCol.Delete(tx, k); err != nil {
				return err
			}
		}
		return r.takeAway(tx, -folded.Bytes, -folded.Records)
	})
}

// listOld lists and counts, once, the records written before version 1 (their id index entry
// is a JSON string): each gets a gate-run-old entry, in time order, and its size is added to
// the base. It is idempotent (an entry already listed is not counted again), and marks the
// store when done.
func (r *retention) listOld(ctx context.Context) error {
	var done bool
	if err := r.st.View(ctx, func(tx *store.Tx) error {
		v, err := configCol.Get(tx, cfgRecordsIndex)
		done = err == nil && v == "1"
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	}); err != nil || done {
		return err
	}
	var after string
	for {
		var last string
		err := r.st.Update(ctx, func(tx *store.Tx) error {
			last = after
			opts := store.ScanOptions{Limit: sweepBatch}
			if after != "" {
				opts.After = []byte(runIDCol.Key(after))
			}
			var bytes, records int64
			err := tx.ScanRaw(runIDCol.Name()+"/", opts, func(k string, v []byte) error {
				id := strings.TrimPrefix(k, runIDCol.Name()+"/")
				last = id
				idx, err := decodeIndex(id, v)
				if err != nil || !idx.Legacy {
					return err
				}
				_, rest, _ := strings.Cut(idx.Key, "/")
				rev, _, _ := strings.Cut(rest, "/")
				okey := sortableFromReverse(rev) + "/" + id
				if has, err := oldRunCol.Has(tx, okey); err != nil || has {
					return err
				}
				val, err := tx.GetRaw(runsCol.Key(idx.Key))
				if errors.Is(err, store.ErrNotFound) {
					return nil // expired (records had a TTL then); its index entry goes with it
				}
				if err != nil {
					return err
				}
				size := int64(len(runsCol.Key(idx.Key)) + len(val) + len(k) + len(v))
				if err := oldRunCol.Put(tx, okey, oldRun{Key: idx.Key, Size: size}); err != nil {
					return err
				}
				bytes += size
				records++
				return nil
			})
			if err != nil || records == 0 {
				return err
			}
			return r.takeAway(tx, -bytes, -records)
		})
		if err != nil {
			return err
		}
		if last == after {
			break
		}
		after = last
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return r.st.Update(ctx, func(tx *store.Tx) error { return configCol.Put(tx, cfgRecordsIndex, "1") })
}

// sortableFromReverse turns a ReverseSortableTime into the SortableTime of the same instant.
func sortableFromReverse(rev string) string {
	var v uint64
	for _, c := range []byte(rev) {
		if c < '0' || c > '9' {
			return rev
		}
		v = v*10 + uint64(c-'0')
	}
	return fmt.Sprintf("%020d", uint64(1<<63-1)-v)
}

// parseSortableTime reads a SortableTime (zero on a malformed one).
func parseSortableTime(s string) time.Time {
	var v int64
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return time.Time{}
		}
		v = v*10 + int64(c-'0')
	}
	return time.Unix(0, v).UTC()
}

// RecordsUsage is what the run records take: Bytes (what records.maxBytes bounds) and Records,
// as of the last sweep or count.
type RecordsUsage struct {
	Bytes    int64 `json:"bytes"`
	Records  int64 `json:"records"`
	MaxBytes int64 `json:"maxBytes"`
	// MaxAgeSeconds is records.maxAge in seconds (0: no bound).
	MaxAgeSeconds int64 `json:"maxAgeSeconds"`
	// Swept is the records the sweeps of this process deleted since it started.
	Swept int64 `json:"swept"`
}

// RecordsUsage reports the run records' size and bounds (the last sweep's count; over an
// unbounded store, counted now).
func (s *Service) RecordsUsage(ctx context.Context) (RecordsUsage, error) {
	if !s.ret.bounded() {
		if _, _, err := s.ret.measure(ctx); err != nil {
			return RecordsUsage{}, errs.Wrap(errs.Internal, err, "cannot count the gate records")
		}
	}
	return RecordsUsage{Bytes: s.ret.total.Load(), Records: s.ret.count.Load(), MaxBytes: s.ret.cfg.MaxBytes,
		MaxAgeSeconds: int64(s.ret.cfg.MaxAge / time.Second), Swept: s.ret.swept.Load()}, nil
}

// SweepRecords runs a retention sweep now (it also runs in the background every
// RecordRetention.Interval) and returns how many records it deleted. Records queued for
// writing are written first.
func (s *Service) SweepRecords(ctx context.Context) (int, error) {
	s.rec.flush()
	return s.ret.sweep(ctx)
}

// sessionTTL is the TTL of a session's entries (its last preset and run, its place in the
// sessions list): they live as long as its records may, and a day more.
func (s *Service) sessionTTL() time.Duration {
	if s.ret.cfg.MaxAge <= 0 {
		return 0
	}
	return max(s.cfg.RecordTTL, s.ret.cfg.MaxAge+24*time.Hour)
}

// Package badgerstore is the Badger v4 driver of internal/store. It owns opening and closing the
// database, the value-log GC loop, and mapping Badger's errors to the store's own: nothing of
// Badger is visible to callers, who get a *store.Store.
package badgerstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/pixie-dev/pixie/internal/store"
)

// Options configures Open. The zero value works except for Dir.
type Options struct {
	// Dir is the database directory; it is created if missing.
	Dir string
	// GCInterval is how often the value-log GC runs; zero means 5 minutes, negative disables it.
	GCInterval time.Duration
	// Logger receives Badger's warnings and errors; nil discards them.
	Logger *slog.Logger
}

// Open opens (creating if needed) the Badger database in opts.Dir and starts its GC loop.
// Close the returned store to stop the loop and flush.
//
// Badger's SyncWrites is off; Update syncs after its commit instead (so a nil error still means
// the write is on disk), and UpdateLazy does not (store.UpdateLazy).
func Open(ctx context.Context, opts Options) (*store.Store, error) {
	if opts.Dir == "" {
		return nil, errors.New("badgerstore: no directory")
	}
	bo := badger.DefaultOptions(opts.Dir).
		WithSyncWrites(false).
		WithLogger(logAdapter{opts.Logger}).
		WithNumVersionsToKeep(1).
		// Small memtables: Pixie's data is small, and 2-core machines with many tests opening
		// stores in parallel should not pay Badger's 64 MiB defaults.
		WithMemTableSize(memTableSize).
		// A memtable takes a transaction of at most 15 % of its size, and a value above the
		// threshold goes to the value log instead (a record with a target of hundreds of KB).
		WithValueThreshold(256 << 10).
		WithValueLogFileSize(64 << 20).
		WithBlockCacheSize(16 << 20).
		WithIndexCacheSize(8 << 20).
		WithNumCompactors(2).
		// Small tables, the same size at every level. Each table is built in an arena of its
		// own (ristretto's z.Allocator) that starts at twice the table size and doubles as the
		// table fills; the size counts compressed bytes, so a table holds about three times
		// that raw, and the compressed copy of each block is allocated at its bound, raw size
		// and more. Badger keeps up to eight arenas in a pool for the next tables and frees one
		// only after two seconds without a build, which a steady stream of writes (a gate run
		// record per decision) never leaves: the arenas are held for good, each grown to the
		// largest table it ever built. With the defaults (2 MiB tables, doubling at each level,
		// and 8 MiB memtables) they held 524 MB of the 621 MB of a server's heap after three
		// minutes of make soak (issue 32); with 512 KiB tables at every level and 4 MiB
		// memtables, 56 MB (docs/bench.md, "The soak").
		WithBaseTableSize(512 << 10)
	bo.TableSizeMultiplier = 1
	db, err := badger.Open(bo)
	if err != nil {
		return nil, fmt.Errorf("badgerstore: open %s: %w", opts.Dir, store.DriverError(err))
	}
	d := &driver{db: db, stop: make(chan struct{})}
	d.txDone = sync.NewCond(&d.txMu)
	interval := opts.GCInterval
	if interval == 0 {
		interval = 5 * time.Minute
	}
	if interval > 0 {
		d.wg.Add(1)
		go d.gcLoop(interval)
	}
	return store.New(d, store.Options{}), nil
}

// memTableSize is Badger's memtable size: its writes' log and skiplist, and the size of a
// table flushed to level 0.
const memTableSize = 4 << 20

type driver struct {
	db       *badger.DB
	stop     chan struct{}
	wg       sync.WaitGroup
	closeMu  sync.Once
	closeErr error

	// txMu guards closed and inFlight: Close waits until no transaction is running before it
	// closes Badger, and a transaction that begins after Close gets store.ErrClosed. Checking
	// db.IsClosed() first was not enough: a Close between the check and the transaction made
	// Badger panic ("DB Closed", in NewIterator) in whatever goroutine was scanning, such as
	// the hint queue's lease sweep (CI, internal/proxy). A counter rather than an RWMutex,
	// because a transaction may begin another inside its callback, and an RWMutex's reader
	// would then wait behind a waiting Close for good.
	txMu     sync.Mutex
	txDone   *sync.Cond
	closed   bool
	inFlight int
}

// begin registers a transaction, or reports store.ErrClosed once Close has begun.
func (d *driver) begin() error {
	d.txMu.Lock()
	defer d.txMu.Unlock()
	if d.closed || d.db.IsClosed() {
		return store.ErrClosed
	}
	d.inFlight++
	return nil
}

// end unregisters a transaction begin registered.
func (d *driver) end() {
	d.txMu.Lock()
	d.inFlight--
	if d.inFlight == 0 {
		d.txDone.Broadcast()
	}
	d.txMu.Unlock()
}

var _ store.Driver = (*driver)(nil)

func (d *driver) gcLoop(every time.Duration) {
	defer d.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			// Run until there is nothing left to rewrite, as Badger's docs advise.
			for d.db.RunValueLogGC(0.5) == nil {
				select {
				case <-d.stop:
					return
				default:
				}
			}
		}
	}
}

func (d *driver) Close() error {
	d.closeMu.Do(func() {
		close(d.stop)
		d.wg.Wait()
		d.txMu.Lock()
		d.closed = true
		for d.inFlight > 0 {
			d.txDone.Wait()
		}
		d.txMu.Unlock()
		d.closeErr = store.DriverError(d.db.Close())
	})
	return d.closeErr
}

func (d *driver) Update(ctx context.Context, fn func(store.DriverTx) error) error {
	if err := d.begin(); err != nil {
		return err
	}
	defer d.end()
	if err := d.db.Update(func(txn *badger.Txn) error { return fn(tx{txn}) }); err != nil {
		return mapErr(err)
	}
	// The write-ahead log and the value log, with every commit before this one (lazy ones
	// included).
	return mapErr(d.db.Sync())
}

// UpdateLazy commits without syncing: the logs are shared mappings of their files, so the
// commit survives the process, and reaches the disk with the next sync or the kernel's
// write-back (store.UpdateLazy).
func (d *driver) UpdateLazy(ctx context.Context, fn func(store.DriverTx) error) error {
	if err := d.begin(); err != nil {
		return err
	}
	defer d.end()
	return mapErr(d.db.Update(func(txn *badger.Txn) error { return fn(tx{txn}) }))
}

func (d *driver) View(ctx context.Context, fn func(store.DriverTx) error) error {
	if err := d.begin(); err != nil {
		return err
	}
	defer d.end()
	return mapErr(d.db.View(func(txn *badger.Txn) error { return fn(tx{txn}) }))
}

// mapErr turns Badger's errors into the store's. Errors that did not come from Badger (a
// callback's own) pass through untouched.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, badger.ErrConflict):
		return store.ErrConflict
	case errors.Is(err, badger.ErrKeyNotFound):
		return store.ErrNotFound
	case errors.Is(err, badger.ErrDBClosed):
		return store.ErrClosed
	case errors.Is(err, badger.ErrTxnTooBig):
		return fmt.Errorf("%w: transaction too big", store.DriverError(err))
	}
	if isBadgerErr(err) {
		return store.DriverError(err)
	}
	return err
}

func isBadgerErr(err error) bool {
	for _, e := range []error{badger.ErrValueLogSize, badger.ErrEmptyKey, badger.ErrInvalidKey,
		badger.ErrBannedKey, badger.ErrReadOnlyTxn, badger.ErrDiscardedTxn, badger.ErrBlockedWrites,
		badger.ErrInvalidRequest, badger.ErrTruncateNeeded, badger.ErrNoRewrite, badger.ErrRejected} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

type tx struct{ t *badger.Txn }

func (t tx) Get(key []byte) ([]byte, error) {
	item, err := t.t.Get(key)
	if err != nil {
		return nil, mapErr(err)
	}
	v, err := item.ValueCopy(nil)
	return v, mapErr(err)
}

func (t tx) Set(key, value []byte, ttl time.Duration) error {
	e := badger.NewEntry(key, value)
	if ttl > 0 {
		e = e.WithTTL(ttl)
	}
	return mapErr(t.t.SetEntry(e))
}

func (t tx) Delete(key []byte) error { return mapErr(t.t.Delete(key)) }

func (t tx) Scan(prefix []byte, opts store.ScanOptions, fn func(key, value []byte) error) error {
	io := badger.DefaultIteratorOptions
	io.Prefix = prefix
	io.Reverse = opts.Reverse
	io.PrefetchValues = true
	io.PrefetchSize = 32
	it := t.t.NewIterator(io)
	defer it.Close()

	var start []byte
	switch {
	case len(opts.After) > 0:
		start = opts.After
	case opts.Reverse:
		// Seek to the last key with this prefix: prefix followed by 0xFF bytes.
		start = append(append([]byte{}, prefix...), bytes.Repeat([]byte{0xFF}, 8)...)
	default:
		start = prefix
	}
	n := 0
	for it.Seek(start); it.ValidForPrefix(prefix); it.Next() {
		item := it.Item()
		k := item.KeyCopy(nil)
		if len(opts.After) > 0 && bytes.Equal(k, opts.After) {
			continue
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return mapErr(err)
		}
		if err := fn(k, v); err != nil {
			return err
		}
		n++
		if opts.Limit > 0 && n >= opts.Limit {
			break
		}
	}
	return nil
}

// logAdapter sends Badger's log lines to slog: warnings and errors only, since its info lines
// are noise for an embedded store.
type logAdapter struct{ l *slog.Logger }

func (a logAdapter) Errorf(f string, args ...any) {
	if a.l != nil {
		a.l.Error("badger: " + fmt.Sprintf(f, args...))
	}
}
func (a logAdapter) Warningf(f string, args ...any) {
	if a.l != nil {
		a.l.Warn("badger: " + fmt.Sprintf(f, args...))
	}
}
func (a logAdapter) Infof(string, ...any)  {}
func (a logAdapter) Debugf(string, ...any) {}

// Package store owns Pixie's persistent state: a portable transactional key-value API with typed
// JSON collections, over a small Driver interface. The production driver is Badger v4
// (internal/store/badgerstore: a nil error from Update means the write is on disk; from
// UpdateLazy, that it survives the process but not yet a power loss); the conformance suite in internal/store/storetest runs against every driver.
//
// This package imports no database: domain packages and the server depend on it without pulling
// Badger in (see the import-rule test). Driver errors never leak out of it: a driver reports
// ErrNotFound and ErrConflict, and anything else comes back wrapped as an opaque internal error.
//
// # Key layout
//
// Every key is "<collection>/<id>", with the collection name made of [a-z0-9-] and the id any
// non-empty string (ids may themselves contain "/" to form ordered sub-keys). Collections in use:
//
//	meta/<name>                      store metadata (schema version)
//	gate-def/<gate name>             saved gate definitions (internal/gate)
//	gate-preset/<preset name>        presets and their attachments (internal/gate)
//	gate-run/<session>/<rev time>/<run id>  run records, newest first per session; no TTL, the retention sweep deletes them (internal/gate)
//	gate-run-id/<run id>             run id → record size and session (run ids sort by start time); the record key before (internal/gate)
//	gate-run-bytes/{base,i/<instance>}  what the run records take, counted as they are written and swept (internal/gate)
//	gate-run-old/<time>/<run id>     records written before run ids sorted by time, oldest first, for the sweep (internal/gate)
//	gate-switch/<session>/<gate>     per-session switches (internal/gate)
//	gate-redo/<session>/<turn>/<gate> redo counters (internal/gate)
//	gate-config/<key>                gate settings: script-dir, revision (internal/gate)
//	gate-session/<session>           a session's last preset and newest run, for its switch listing (internal/gate)
//	gate-session-recent/<rev time>/<session>  sessions with records, newest run first (internal/gate)
//	gate-missing/<preset>            presets hooks asked for that do not exist, TTL 7 days, at most 100 (internal/gate)
//	module/<sha256>                  WASM module metadata; the bytes live in <home>/blobs (runtime)
//	module-body/<sha256>             a module's bytes (raw), on a shared store instead of <home>/blobs
//	module-name/<name>               module name → sha256
//	hint/<id>                        hints (internal/hint); ids are time-ordered
//	hint-lease/<take id>             open takes awaiting confirm or rollback
//	hint-meta/revision               hint queue revision, bumped by every hint transaction
//	hint-take-closed/<take id>       how a closed take ended (confirmed, rolled-back, expired), TTL 10 min, so repeats are idempotent
//	hint-event/<revision>            on a shared store: a change's actions, for other replicas' streams (TTL)
//	hint-running/<session>           on a shared store: sessions running a turn (TTL)
//	hook-turn/<session>              a hook session's turn number and turn key, with TTL (internal/hooks)
//	proxy-session/<session>          sessions the model-API proxy carried, with TTL (internal/proxy)
//	rewrite/<session>/<rule>         replacements the model-API proxy makes in a session's requests, with TTL (internal/rewrite)
//	pet-*/…                          Pet skills, drift marks, tasks, scope index, invocations, snapshots, runs, env values (full layout in internal/pet's package comment)
//	lark-*/…                         Lark channel (internal/channel/lark, its Loci in …/lark/locus, images in …/lark/spool): binding/current, allow/<open_id>, session/<id>, session-chat/<chat>, child/<id>, locus/<id>, entry/<entry>, delivery/<locus>/<seq>, inbound/<time>, dedup/{e,m}/<id> (TTL); on a shared store also pair/current, meta/epoch, ready/<id>, settling/<id>, spool/<id>, spool-body/<id>/<n> (all TTL)
//	cluster-replica/<instance>       on a shared store: each replica's URL and heartbeat (TTL) (internal/cluster)
//	cluster-secret/admin-token       on a shared store: the admin token every replica accepts
//	ui-session/<session id>          an open Studio login, with a TTL of its cookie's life; logout deletes it (server)
//	settings/{model,judge}           run-time settings of the Pixie model and the decision engine over pixie.yaml (internal/settings); their API keys live in credentials.json
//	cred/<name>                      on a shared store only: the credentials (else <home>/credentials.json) (internal/credentials)
//
// Values are JSON (module-body, lark-spool-body: raw bytes; gate-run and gate-run-id: internal/gate's
// compact binary encoding, JSON before it). Ordering is bytewise on keys, so
// ids that must sort by time use fixed-width, zero-padded time prefixes (see SortableTime).
//
// Several processes may share one store (shared.go): the PostgreSQL driver, N replicas.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"time"
)

// ErrNotFound is returned when a key does not exist.
var ErrNotFound = errors.New("store: not found")

// ErrConflict is returned when a transaction conflicted with a concurrent one and could not be
// committed even after retries, or when a caller-level optimistic check fails.
var ErrConflict = errors.New("store: conflict")

// ErrClosed is returned after Close.
var ErrClosed = errors.New("store: closed")

// ScanOptions controls a prefix scan.
type ScanOptions struct {
	// Reverse scans from the largest key down.
	Reverse bool
	// Limit stops after this many entries; zero means no limit.
	Limit int
	// After, if set, starts strictly after this full key (strictly before it when Reverse).
	After []byte
}

// DriverTx is one driver transaction. Keys and values passed in may be retained by the driver
// until commit; values returned are copies the caller may keep.
type DriverTx interface {
	Get(key []byte) ([]byte, error)
	Set(key, value []byte, ttl time.Duration) error
	Delete(key []byte) error
	Scan(prefix []byte, opts ScanOptions, fn func(key, value []byte) error) error
}

// Driver is what a storage engine implements. Update must return ErrConflict (wrapped or not)
// when the commit conflicted, so that Store can retry.
type Driver interface {
	Update(ctx context.Context, fn func(DriverTx) error) error
	View(ctx context.Context, fn func(DriverTx) error) error
	Close() error
}

// Options configures a Store. The zero value works.
type Options struct {
	// MaxRetries is how often a conflicting Update is retried; zero means 100.
	MaxRetries int
}

// Store is the portable store. It is safe for concurrent use.
type Store struct {
	d          Driver
	maxRetries int
	instance   string
	bus        bus
}

// New returns a Store over d.
func New(d Driver, opts Options) *Store {
	if opts.MaxRetries <= 0 {
		opts.MaxRetries = 100
	}
	s := &Store{d: d, maxRetries: opts.MaxRetries, instance: newInstanceID()}
	s.bus.init(d)
	return s
}

// Close stops the notification listener, gives up the leases this process holds, and closes
// the driver.
func (s *Store) Close() error {
	s.bus.stop()
	if sd, ok := s.d.(SharedDriver); ok {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = sd.Release(ctx, s.instance)
		cancel()
	}
	return s.d.Close()
}

// Tx is a transaction handed to Update and View callbacks. It must not be used after the
// callback returns.
type Tx struct {
	s        *Store
	dt       DriverTx
	readOnly bool
	// after runs once the transaction committed (for notifications); Update only.
	after []func()
}

// Update runs fn in a read-write transaction and commits it. On a conflict the whole callback
// is run again (up to MaxRetries times), so fn must not have side effects outside tx other than
// through AfterCommit.
func (s *Store) Update(ctx context.Context, fn func(tx *Tx) error) error {
	return s.update(ctx, s.d.Update, fn)
}

// UpdateLazy is Update for writes that need not be on disk when it returns (a gate's run
// records, written by the thousand per second): the commit is visible at once and atomic as
// any other, but the driver does not wait for the disk. Over Badger it survives a crash of the
// process (the log is a shared mapping the kernel writes back) and reaches the disk with the
// next Update, at Close, or when the kernel writes it back (about 30 s); a power loss or a
// kernel crash before that loses it. Over PostgreSQL it is an asynchronous commit
// (synchronous_commit off), with the same bound. A driver without LazyDriver commits as Update.
//
// Waiting for the disk blocks the committing thread for the sync, a millisecond or more, and the
// Go scheduler gives its processor to other goroutines only when it notices: on a two-core
// server that held one processor of two often enough to double a WASM gate's p99 at 8
// connections (docs/RATIONALE.md).
func (s *Store) UpdateLazy(ctx context.Context, fn func(tx *Tx) error) error {
	if ld, ok := s.d.(LazyDriver); ok {
		return s.update(ctx, ld.UpdateLazy, fn)
	}
	return s.update(ctx, s.d.Update, fn)
}

// LazyDriver is implemented by a driver that can commit without waiting for the disk
// (UpdateLazy).
type LazyDriver interface {
	UpdateLazy(ctx context.Context, fn func(DriverTx) error) error
}

// UpdateSerial is Update for transactions that all touch one hot key (a queue's revision):
// over a SharedDriver it runs them one at a time across every process sharing the store,
// queued on a lock called lock, instead of letting them collide and be retried. Over an
// embedded store it is Update.
func (s *Store) UpdateSerial(ctx context.Context, lock string, fn func(tx *Tx) error) error {
	if sd, ok := s.d.(SerialDriver); ok && lock != "" {
		return s.update(ctx, func(ctx context.Context, run func(DriverTx) error) error { return sd.UpdateSerial(ctx, lock, run) }, fn)
	}
	return s.update(ctx, s.d.Update, fn)
}

// update runs fn through commit (a driver's Update, UpdateLazy or UpdateSerial), retrying it on
// a conflict.
func (s *Store) update(ctx context.Context, commit func(context.Context, func(DriverTx) error) error, fn func(tx *Tx) error) error {
	var lastErr error
	for attempt := 0; attempt <= s.maxRetries; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		var tx *Tx
		run := func(dt DriverTx) error {
			tx = &Tx{s: s, dt: dt}
			return fn(tx)
		}
		err := commit(ctx, run)
		if err == nil {
			for _, f := range tx.after {
				f()
			}
			return nil
		}
		if !errors.Is(err, ErrConflict) {
			return s.mapErr(err)
		}
		lastErr = err
		// Back off with jitter so colliding writers spread out.
		back := time.Duration(attempt+1) * 100 * time.Microsecond
		if back > 5*time.Millisecond {
			back = 5 * time.Millisecond
		}
		time.Sleep(back/2 + time.Duration(rand.Int64N(int64(back))))
	}
	return fmt.Errorf("%w: gave up after %d retries: %v", ErrConflict, s.maxRetries, lastErr)
}

// View runs fn in a read-only transaction.
func (s *Store) View(ctx context.Context, fn func(tx *Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.mapErr(s.d.View(ctx, func(dt DriverTx) error { return fn(&Tx{s: s, dt: dt, readOnly: true}) }))
}

// mapErr keeps driver errors from leaking: ours and callers' errors pass through unchanged.
func (s *Store) mapErr(err error) error {
	if err == nil {
		return nil
	}
	var de *driverError
	if errors.As(err, &de) {
		return fmt.Errorf("store: %s", de.msg)
	}
	return err
}

// AfterCommit registers f to run after the surrounding Update commits successfully (it does not
// run when the transaction fails or is retried and then fails).
func (tx *Tx) AfterCommit(f func()) { tx.after = append(tx.after, f) }

// Raw access, for the few callers that need it (counters, dedup keys).

// GetRaw returns the value at key.
func (tx *Tx) GetRaw(key string) ([]byte, error) { return tx.dt.Get([]byte(key)) }

// SetRaw stores value at key; ttl zero means no expiry.
func (tx *Tx) SetRaw(key string, value []byte, ttl time.Duration) error {
	if tx.readOnly {
		return errors.New("store: write in a read-only transaction")
	}
	return tx.dt.Set([]byte(key), value, ttl)
}

// DeleteRaw removes key; deleting a missing key is not an error.
func (tx *Tx) DeleteRaw(key string) error {
	if tx.readOnly {
		return errors.New("store: write in a read-only transaction")
	}
	return tx.dt.Delete([]byte(key))
}

// ScanRaw calls fn for every key under prefix, in key order.
func (tx *Tx) ScanRaw(prefix string, opts ScanOptions, fn func(key string, value []byte) error) error {
	return tx.dt.Scan([]byte(prefix), opts, func(k, v []byte) error { return fn(string(k), v) })
}

// DriverError wraps an engine error so that its text is kept for logs but its type is not
// reachable by callers. Drivers return their non-sentinel errors through it.
func DriverError(err error) error {
	if err == nil {
		return nil
	}
	return &driverError{msg: err.Error()}
}

type driverError struct{ msg string }

func (e *driverError) Error() string { return "store: " + e.msg }

var collectionName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// Collection is a typed view of one key prefix. Values are stored as JSON.
type Collection[T any] struct {
	name string
}

// NewCollection returns the collection called name. It panics on a malformed name, since
// names are constants in code.
func NewCollection[T any](name string) Collection[T] {
	if !collectionName.MatchString(name) {
		panic("store: bad collection name " + name)
	}
	return Collection[T]{name: name}
}

// Name is the collection's name.
func (c Collection[T]) Name() string { return c.name }

// Key returns the full key of id.
func (c Collection[T]) Key(id string) string { return c.name + "/" + id }

// Get reads id. It returns ErrNotFound when absent.
func (c Collection[T]) Get(tx *Tx, id string) (T, error) {
	var v T
	if id == "" {
		return v, ErrNotFound
	}
	raw, err := tx.dt.Get([]byte(c.Key(id)))
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("store: decode %s: %w", c.Key(id), err)
	}
	return v, nil
}

// Has reports whether id exists.
func (c Collection[T]) Has(tx *Tx, id string) (bool, error) {
	_, err := tx.dt.Get([]byte(c.Key(id)))
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Put writes v at id.
func (c Collection[T]) Put(tx *Tx, id string, v T) error {
	return c.PutTTL(tx, id, v, 0)
}

// PutTTL writes v at id with an expiry; ttl zero means none.
func (c Collection[T]) PutTTL(tx *Tx, id string, v T, ttl time.Duration) error {
	if id == "" {
		return errors.New("store: empty id")
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("store: encode %s: %w", c.Key(id), err)
	}
	return tx.SetRaw(c.Key(id), raw, ttl)
}

// Insert writes v at id, failing with ErrConflict if id exists.
func (c Collection[T]) Insert(tx *Tx, id string, v T) error {
	ok, err := c.Has(tx, id)
	if err != nil {
		return err
	}
	if ok {
		return fmt.Errorf("%w: %s exists", ErrConflict, c.Key(id))
	}
	return c.Put(tx, id, v)
}

// Delete removes id. Deleting a missing id is not an error.
func (c Collection[T]) Delete(tx *Tx, id string) error { return tx.DeleteRaw(c.Key(id)) }

// Entry is one listed item.
type Entry[T any] struct {
	ID    string
	Value T
}

// List returns the entries whose id starts with idPrefix, in id order (reverse with
// opts.Reverse). opts.After is an id (not a full key) to page after.
func (c Collection[T]) List(tx *Tx, idPrefix string, opts ScanOptions) ([]Entry[T], error) {
	var out []Entry[T]
	err := c.Each(tx, idPrefix, opts, func(id string, v T) error {
		out = append(out, Entry[T]{ID: id, Value: v})
		return nil
	})
	return out, err
}

// ErrStop may be returned by an Each callback to end the scan early without an error.
var ErrStop = errors.New("store: stop")

// Each calls fn for each entry under idPrefix in order. Returning ErrStop ends the scan.
func (c Collection[T]) Each(tx *Tx, idPrefix string, opts ScanOptions, fn func(id string, v T) error) error {
	prefix := c.name + "/"
	if len(opts.After) > 0 {
		opts.After = []byte(prefix + string(opts.After))
	}
	err := tx.dt.Scan([]byte(prefix+idPrefix), opts, func(k, raw []byte) error {
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("store: decode %s: %w", k, err)
		}
		return fn(strings.TrimPrefix(string(k), prefix), v)
	})
	if errors.Is(err, ErrStop) {
		return nil
	}
	return err
}

// SortableTime renders t as a fixed-width string that sorts in time order (UTC nanoseconds,
// zero-padded to 20 digits).
func SortableTime(t time.Time) string { return fmt.Sprintf("%020d", t.UTC().UnixNano()) }

// ReverseSortableTime renders t so that later times sort first.
func ReverseSortableTime(t time.Time) string {
	return fmt.Sprintf("%020d", uint64(1<<63-1)-uint64(t.UTC().UnixNano()))
}

// Package pgstore is the PostgreSQL driver of internal/store (through github.com/jackc/pgx/v5),
// for N Pixie replicas on one database; it also serves PostgreSQL-compatible databases. It owns
// connecting (a bounded pool, statement and idle-transaction timeouts), the schema and its
// versioned migrations, transactions, TTL, notifications between processes and leases. Nothing
// of pgx is visible to callers, who get a *store.Store.
//
// # Schema
//
//	pixie_schema(version int primary key, applied_at)         applied migrations
//	pixie_kv(k bytea primary key, v bytea, expires_at)        the store's keys and values
//	pixie_lease(name text primary key, holder text, until)     leases (store.Store.Lead)
//
// Keys are bytea, so they order bytewise as Badger's do; a prefix scan is a range scan of the
// primary key (k >= prefix and k < the prefix's successor), forward or reverse, read in pages
// so that a callback may read inside the scan and an early stop reads no more. Migrations are
// numbered and applied at Open, each in its own transaction, under a session advisory lock, so
// replicas starting together apply each exactly once; a database whose schema is newer than
// this binary knows is refused.
//
// # Transactions
//
// Update runs SERIALIZABLE; a serialization failure (SQLSTATE 40001), a deadlock (40P01) or a
// unique violation raced into by a concurrent insert (23505) comes back as store.ErrConflict,
// so the Store runs the callback again. View runs REPEATABLE READ READ ONLY: one snapshot,
// never a serialization failure.
//
// # TTL
//
// An entry written with a TTL gets expires_at = now() + ttl by the database's clock; every read
// treats an expired row as absent, and a sweep (run by one replica, under a lease) deletes
// expired rows in batches.
//
// # Notifications
//
// Tx.Notify becomes pg_notify('pixie_events', topic || ' ' || payload) inside the transaction,
// so PostgreSQL sends it if and when the transaction commits, to every listening session. Each
// Store listens on one dedicated connection (not from the pool); when that connection is lost
// it reconnects and reports lost notifications. Options.Poll replaces listening by a lost mark
// every PollInterval, for databases without LISTEN/NOTIFY.
package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pixie-dev/pixie/internal/redact"
	"github.com/pixie-dev/pixie/internal/store"
)

// Defaults of Options.
const (
	DefaultMaxConns         = 10
	DefaultStatementTimeout = 30 * time.Second
	DefaultConnectTimeout   = 10 * time.Second
	DefaultSweepInterval    = time.Minute
	DefaultPollInterval     = time.Second
)

// channel is the LISTEN/NOTIFY channel.
const channel = "pixie_events"

// Options configures Open. The zero value works except for URL.
type Options struct {
	// URL is a PostgreSQL connection URL (postgres://user:password@host:port/db?sslmode=…) or
	// keyword/value string.
	URL string
	// MaxConns caps the pool; zero means 10. The listener holds one more connection.
	MaxConns int
	// StatementTimeout bounds every statement (statement_timeout) and the idle time inside a
	// transaction (idle_in_transaction_session_timeout); zero means 30s.
	StatementTimeout time.Duration
	// ConnectTimeout bounds connecting, at Open and after; zero means 10s.
	ConnectTimeout time.Duration
	// SweepInterval is how often expired rows are deleted (by one process of those sharing the
	// database); zero means one minute, negative disables the sweep.
	SweepInterval time.Duration
	// Poll replaces LISTEN by a lost mark every PollInterval (for PostgreSQL-compatible
	// databases without LISTEN/NOTIFY): listeners then re-read what they cache that often.
	Poll bool
	// PollInterval is the poll period with Poll; zero means one second.
	PollInterval time.Duration
	// Logger receives connection problems; nil discards them.
	Logger *slog.Logger
}

// Open connects to the database in opts.URL, applies pending migrations and starts the TTL
// sweep. An unreachable database is an error naming the address (never the password).
func Open(ctx context.Context, opts Options) (*store.Store, error) {
	d, err := open(ctx, opts)
	if err != nil {
		return nil, err
	}
	return store.New(d, store.Options{}), nil
}

type driver struct {
	pool   *pgxpool.Pool
	connCf *pgx.ConnConfig
	opts   Options
	log    *slog.Logger
	secret string // the password, scrubbed from every error text

	holder string // this driver's lease holder for its own sweep

	semMu  sync.Mutex
	sems   map[string]chan struct{} // UpdateSerial's in-process queues, by lock
	stop   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
	closed chan struct{}
}

var _ store.SerialDriver = (*driver)(nil)

func open(ctx context.Context, opts Options) (*driver, error) {
	if opts.URL == "" {
		return nil, errors.New("pgstore: no database URL")
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = DefaultMaxConns
	}
	if opts.StatementTimeout <= 0 {
		opts.StatementTimeout = DefaultStatementTimeout
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	if opts.SweepInterval == 0 {
		opts.SweepInterval = DefaultSweepInterval
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pc, err := pgxpool.ParseConfig(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("pgstore: the database URL %s is not valid: %s", Redact(opts.URL), scrub(err.Error(), redact.Password(opts.URL)))
	}
	secret := pc.ConnConfig.Password
	pc.MaxConns = int32(opts.MaxConns)
	pc.MinConns = 0
	pc.MaxConnIdleTime = 5 * time.Minute
	pc.HealthCheckPeriod = 30 * time.Second
	pc.ConnConfig.ConnectTimeout = opts.ConnectTimeout
	ms := fmt.Sprint(opts.StatementTimeout.Milliseconds())
	if pc.ConnConfig.RuntimeParams == nil {
		pc.ConnConfig.RuntimeParams = map[string]string{}
	}
	pc.ConnConfig.RuntimeParams["statement_timeout"] = ms
	pc.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = ms
	pc.ConnConfig.RuntimeParams["application_name"] = "pixie"
	d := &driver{connCf: pc.ConnConfig.Copy(), opts: opts, log: log, secret: secret,
		holder: "pgstore-" + randomHex(8), stop: make(chan struct{}), closed: make(chan struct{})}
	cctx, cancel := context.WithTimeout(ctx, opts.ConnectTimeout)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(cctx, pc)
	if err != nil {
		return nil, d.reachErr(err)
	}
	if err := pool.Ping(cctx); err != nil {
		pool.Close()
		return nil, d.reachErr(err)
	}
	d.pool = pool
	if err := d.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if opts.SweepInterval > 0 {
		d.wg.Add(1)
		go d.sweepLoop(opts.SweepInterval)
	}
	return d, nil
}

func (d *driver) reachErr(err error) error {
	return fmt.Errorf("pgstore: cannot reach the database at %s: %s", Redact(d.opts.URL), scrub(err.Error(), d.secret))
}

// Close stops the sweep and closes the pool.
func (d *driver) Close() error {
	d.once.Do(func() {
		close(d.stop)
		d.wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, _ = d.pool.Exec(ctx, "DELETE FROM pixie_lease WHERE holder = $1", d.holder) // the sweep's
		cancel()
		close(d.closed)
		d.pool.Close()
	})
	return nil
}

func (d *driver) isClosed() bool {
	select {
	case <-d.closed:
		return true
	default:
		return false
	}
}

// Update runs fn in a SERIALIZABLE transaction.
func (d *driver) Update(ctx context.Context, fn func(store.DriverTx) error) error {
	return d.run(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable}, fn)
}

// UpdateLazy runs fn in a SERIALIZABLE transaction committed asynchronously
// (synchronous_commit off for it alone): PostgreSQL answers the commit before its WAL is
// flushed, and flushes it within wal_writer_delay times three (store.UpdateLazy).
func (d *driver) UpdateLazy(ctx context.Context, fn func(store.DriverTx) error) error {
	if d.isClosed() {
		return store.ErrClosed
	}
	ptx, err := d.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	if err != nil {
		return d.mapErr(err)
	}
	if _, err := ptx.Exec(ctx, "SET LOCAL synchronous_commit TO OFF"); err != nil {
		_ = ptx.Rollback(context.WithoutCancel(ctx))
		return d.mapErr(err)
	}
	return d.finish(ctx, ptx, fn)
}

// UpdateSerial runs fn in a SERIALIZABLE transaction on a connection that holds the session
// advisory lock of lock from before BEGIN until after the commit: transactions on one lock run
// one after another across every process, and each one's snapshot includes the previous one's
// commit, so they do not abort each other. A connection that dies releases its lock.
func (d *driver) UpdateSerial(ctx context.Context, lock string, fn func(store.DriverTx) error) error {
	if d.isClosed() {
		return store.ErrClosed
	}
	// One waiter per process: the others wait here, not holding a pool connection each.
	sem := d.serialLock(lock)
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-sem }()
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return d.mapErr(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtextextended($1, 0))", "pixie:"+lock); err != nil {
		// Cancelled or timed out while waiting: the lock may have been granted just then, so
		// the connection goes (and its session's lock with it) rather than back to the pool.
		_ = conn.Conn().Close(context.WithoutCancel(ctx))
		return d.mapErr(err)
	}
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(hashtextextended($1, 0))", "pixie:"+lock); err != nil {
			// The lock stays with the session: drop the connection so that it goes with it.
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	ptx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	if err != nil {
		return d.mapErr(err)
	}
	return d.finish(ctx, ptx, fn)
}

// serialLock returns the in-process semaphore of lock.
func (d *driver) serialLock(lock string) chan struct{} {
	d.semMu.Lock()
	defer d.semMu.Unlock()
	if d.sems == nil {
		d.sems = map[string]chan struct{}{}
	}
	sem, ok := d.sems[lock]
	if !ok {
		sem = make(chan struct{}, 1)
		d.sems[lock] = sem
	}
	return sem
}

// View runs fn in a REPEATABLE READ READ ONLY transaction.
func (d *driver) View(ctx context.Context, fn func(store.DriverTx) error) error {
	return d.run(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

func (d *driver) run(ctx context.Context, o pgx.TxOptions, fn func(store.DriverTx) error) error {
	if d.isClosed() {
		return store.ErrClosed
	}
	ptx, err := d.pool.BeginTx(ctx, o)
	if err != nil {
		return d.mapErr(err)
	}
	return d.finish(ctx, ptx, fn)
}

// finish runs fn in the begun transaction ptx and commits it, or rolls it back.
func (d *driver) finish(ctx context.Context, ptx pgx.Tx, fn func(store.DriverTx) error) error {
	t := &tx{ctx: ctx, t: ptx, d: d}
	if err := fn(t); err != nil {
		_ = ptx.Rollback(context.WithoutCancel(ctx))
		if t.failed != nil && errors.Is(t.failed, store.ErrConflict) {
			// A statement hit a conflict and the callback went on (or failed differently): the
			// transaction is aborted either way; run it again.
			return store.ErrConflict
		}
		return err
	}
	if t.failed != nil {
		_ = ptx.Rollback(context.WithoutCancel(ctx))
		if errors.Is(t.failed, store.ErrConflict) {
			return store.ErrConflict
		}
		return t.failed
	}
	for _, n := range t.notes {
		t.writes = append(t.writes, write{"SELECT pg_notify($1, $2)", []any{channel, n}})
	}
	if err := t.flush(); err != nil {
		_ = ptx.Rollback(context.WithoutCancel(ctx))
		if errors.Is(err, store.ErrConflict) {
			return store.ErrConflict
		}
		return err
	}
	if err := ptx.Commit(ctx); err != nil {
		if errors.Is(err, pgx.ErrTxCommitRollback) {
			return store.ErrConflict
		}
		return d.mapErr(err)
	}
	return nil
}

// mapErr turns pgx's errors into the store's; the password never survives.
func (d *driver) mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if d.isClosed() || strings.Contains(err.Error(), "closed pool") {
		return store.ErrClosed
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40001", "40P01", "23505":
			return fmt.Errorf("%w: %s (SQLSTATE %s)", store.ErrConflict, pe.Message, pe.Code)
		case "57014":
			return store.DriverError(fmt.Errorf("statement timed out (statement_timeout %s)", d.opts.StatementTimeout))
		case "54000":
			return store.DriverError(fmt.Errorf("a key is too long for the index: %s", pe.Message))
		}
		return store.DriverError(fmt.Errorf("%s (SQLSTATE %s)", scrub(pe.Message, d.secret), pe.Code))
	}
	return store.DriverError(errors.New(scrub(err.Error(), d.secret)))
}

type tx struct {
	ctx    context.Context
	t      pgx.Tx
	d      *driver
	failed error
	notes  []string
	writes []write
}

var (
	_ store.DriverTx = (*tx)(nil)
	_ store.NotifyTx = (*tx)(nil)
)

// fail records the first statement error: PostgreSQL aborts the transaction on it.
func (t *tx) fail(err error) error {
	err = t.d.mapErr(err)
	if t.failed == nil && err != nil && !errors.Is(err, store.ErrNotFound) {
		t.failed = err
	}
	return err
}

const live = "(expires_at IS NULL OR expires_at > now())"

func (t *tx) Get(key []byte) ([]byte, error) {
	if err := t.flush(); err != nil {
		return nil, err
	}
	var v []byte
	err := t.t.QueryRow(t.ctx, "SELECT v FROM pixie_kv WHERE k = $1 AND "+live, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, t.fail(err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

func (t *tx) Set(key, value []byte, ttl time.Duration) error {
	if len(key) == 0 {
		return errors.New("pgstore: empty key")
	}
	if value == nil {
		value = []byte{}
	}
	if ttl > 0 {
		return t.queue(`INSERT INTO pixie_kv (k, v, expires_at) VALUES ($1, $2, now() + $3 * interval '1 microsecond')
			ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v, expires_at = EXCLUDED.expires_at`, key, value, ttl.Microseconds())
	}
	return t.queue(`INSERT INTO pixie_kv (k, v, expires_at) VALUES ($1, $2, NULL)
			ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v, expires_at = NULL`, key, value)
}

func (t *tx) Delete(key []byte) error {
	return t.queue("DELETE FROM pixie_kv WHERE k = $1", key)
}

// Writes are queued and sent together, in one round trip, before the next read of the
// transaction and before its commit: a transaction that writes many keys pays for one trip,
// and its reads still see its writes.

// maxQueued bounds the writes waiting in one transaction.
const maxQueued = 256

type write struct {
	sql  string
	args []any
}

func (t *tx) queue(sql string, args ...any) error {
	if t.failed != nil {
		return t.failed
	}
	t.writes = append(t.writes, write{sql, args})
	if len(t.writes) >= maxQueued {
		return t.flush()
	}
	return nil
}

// flush sends the queued writes as one batch.
func (t *tx) flush() error {
	if len(t.writes) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, w := range t.writes {
		b.Queue(w.sql, w.args...)
	}
	t.writes = t.writes[:0]
	br := t.t.SendBatch(t.ctx, b)
	var first error
	for i := 0; i < b.Len(); i++ {
		if _, err := br.Exec(); err != nil && first == nil {
			first = err
		}
	}
	if err := br.Close(); err != nil && first == nil {
		first = err
	}
	if first != nil {
		return t.fail(first)
	}
	return nil
}

// Notify implements store.NotifyTx: the notification is sent with the commit.
func (t *tx) Notify(topic, payload string) error {
	t.notes = append(t.notes, topic+" "+payload)
	return nil
}

// scanPage is how many rows a scan reads per query.
const scanPage = 256

func (t *tx) Scan(prefix []byte, opts store.ScanOptions, fn func(key, value []byte) error) error {
	end := successor(prefix)
	cursor := opts.After
	n := 0
	for {
		page := scanPage
		if opts.Limit > 0 && opts.Limit-n < page {
			page = opts.Limit - n
		}
		var conds []string
		args := []any{}
		arg := func(v any) string {
			args = append(args, v)
			return fmt.Sprintf("$%d", len(args))
		}
		if len(prefix) > 0 {
			conds = append(conds, "k >= "+arg(prefix))
		}
		if end != nil {
			conds = append(conds, "k < "+arg(end))
		}
		order := "ASC"
		if len(cursor) > 0 {
			if opts.Reverse {
				conds = append(conds, "k < "+arg(cursor))
			} else {
				conds = append(conds, "k > "+arg(cursor))
			}
		}
		if opts.Reverse {
			order = "DESC"
		}
		conds = append(conds, live)
		q := "SELECT k, v FROM pixie_kv WHERE " + strings.Join(conds, " AND ") + " ORDER BY k " + order + " LIMIT " + arg(page)
		if err := t.flush(); err != nil { // writes of this transaction (a callback's too) first
			return err
		}
		rows, err := t.t.Query(t.ctx, q, args...)
		if err != nil {
			return t.fail(err)
		}
		type kv struct{ k, v []byte }
		var got []kv
		for rows.Next() {
			var e kv
			if err := rows.Scan(&e.k, &e.v); err != nil {
				rows.Close()
				return t.fail(err)
			}
			got = append(got, e)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return t.fail(err)
		}
		for _, e := range got {
			if e.v == nil {
				e.v = []byte{}
			}
			if err := fn(e.k, e.v); err != nil {
				return err
			}
			n++
		}
		if len(got) < page || (opts.Limit > 0 && n >= opts.Limit) {
			return nil
		}
		cursor = got[len(got)-1].k
	}
}

// successor is the smallest key greater than every key with prefix p, or nil when there is
// none (p empty or all 0xFF).
func successor(p []byte) []byte {
	out := append([]byte(nil), p...)
	for i := len(out) - 1; i >= 0; i-- {
		if out[i] < 0xFF {
			out[i]++
			return out[:i+1]
		}
	}
	return nil
}

// Lead implements store.SharedDriver with one statement: the lease row is taken when absent,
// expired or already held by holder; the database's clock decides expiry.
func (d *driver) Lead(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if d.isClosed() {
		return false, store.ErrClosed
	}
	var got string
	err := d.pool.QueryRow(ctx, `INSERT INTO pixie_lease (name, holder, until) VALUES ($1, $2, now() + $3 * interval '1 microsecond')
		ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, until = EXCLUDED.until
		WHERE pixie_lease.holder = EXCLUDED.holder OR pixie_lease.until < now()
		RETURNING holder`, name, holder, ttl.Microseconds()).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, d.mapErr(err)
	}
	return got == holder, nil
}

// Release implements store.SharedDriver.
func (d *driver) Release(ctx context.Context, holder string) error {
	if d.isClosed() {
		return store.ErrClosed
	}
	_, err := d.pool.Exec(ctx, "DELETE FROM pixie_lease WHERE holder = $1", holder)
	return d.mapErr(err)
}

// Listen implements store.SharedDriver on a dedicated connection.
func (d *driver) Listen(ctx context.Context, fn func(topic, payload string, lost bool)) error {
	if d.opts.Poll {
		t := time.NewTicker(d.opts.PollInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-d.stop:
				return nil
			case <-t.C:
				fn("", "", true)
			}
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-d.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		began := time.Now()
		err := d.listenOnce(ctx, fn)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(began) > time.Minute {
			backoff = 50 * time.Millisecond // it had been listening: a fresh loss
		}
		d.log.Warn("pgstore: the notification connection was lost; reconnecting", "err", scrub(fmt.Sprint(err), d.secret))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
	return nil
}

func (d *driver) listenOnce(ctx context.Context, fn func(topic, payload string, lost bool)) error {
	cctx, cancel := context.WithTimeout(ctx, d.opts.ConnectTimeout)
	conn, err := pgx.ConnectConfig(cctx, d.connCf.Copy())
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return err
	}
	// Listening (again): what was sent before this moment, since the caller started to
	// listen or since the connection was lost, did not arrive.
	fn("", "", true)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		topic, payload, _ := strings.Cut(n.Payload, " ")
		fn(topic, payload, false)
	}
}

// sweepLoop deletes expired rows, in one process at a time (the lease), in batches.
func (d *driver) sweepLoop(every time.Duration) {
	defer d.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-d.stop
		cancel()
	}()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		if _, err := d.sweep(ctx, every); err != nil && ctx.Err() == nil {
			d.log.Warn("pgstore: TTL sweep failed", "err", err)
		}
	}
}

// sweep deletes expired rows if this driver holds the sweep lease; it returns how many.
func (d *driver) sweep(ctx context.Context, every time.Duration) (int64, error) {
	ok, err := d.Lead(ctx, "pgstore-ttl-sweep", d.holder, 3*every)
	if err != nil || !ok {
		return 0, err
	}
	var total int64
	for ctx.Err() == nil {
		tag, err := d.pool.Exec(ctx, `DELETE FROM pixie_kv WHERE k IN
			(SELECT k FROM pixie_kv WHERE expires_at <= now() LIMIT 1000)`)
		if err != nil {
			return total, d.mapErr(err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < 1000 {
			break
		}
	}
	return total, nil
}

// Redact returns a database URL with its password masked (see internal/redact).
func Redact(raw string) string { return redact.URL(raw) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func scrub(s, secret string) string { return redact.Scrub(s, secret) }

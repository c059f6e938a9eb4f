package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// AppliedVersions counts the rows of pixie_schema (tests).
func AppliedVersions(ctx context.Context, url string) (int, error) {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer c.Close(ctx)
	var n int
	err = c.QueryRow(ctx, "SELECT count(*) FROM pixie_schema").Scan(&n)
	return n, err
}

// Exec runs one statement on its own connection (tests).
func Exec(ctx context.Context, url, sql string, args ...any) error {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, sql, args...)
	return err
}

// CountRows counts pixie_kv's rows, expired ones included (tests).
func CountRows(ctx context.Context, url string) (int, error) {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer c.Close(ctx)
	var n int
	err = c.QueryRow(ctx, "SELECT count(*) FROM pixie_kv").Scan(&n)
	return n, err
}

// HoldRowLock locks key's row FOR UPDATE, closes held, and waits for release (tests).
func HoldRowLock(ctx context.Context, url string, key []byte, held, release chan struct{}) error {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		close(held)
		return err
	}
	defer c.Close(ctx)
	tx, err := c.Begin(ctx)
	if err != nil {
		close(held)
		return err
	}
	_, err = tx.Exec(ctx, "SELECT 1 FROM pixie_kv WHERE k = $1 FOR UPDATE", key)
	close(held)
	<-release
	_ = tx.Rollback(ctx)
	return err
}

// QueryInt runs a query that answers one integer, on its own connection (tests).
func QueryInt(ctx context.Context, url, sql string, args ...any) (int64, error) {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer c.Close(ctx)
	var n int64
	err = c.QueryRow(ctx, sql, args...).Scan(&n)
	return n, err
}

// Sweeper is a driver whose TTL sweep a test runs by hand (tests).
type Sweeper struct{ d *driver }

// OpenSweeper opens a driver with its sweep loop off (tests).
func OpenSweeper(ctx context.Context, url string) (*Sweeper, error) {
	d, err := open(ctx, Options{URL: url, MaxConns: 2, SweepInterval: -1})
	if err != nil {
		return nil, err
	}
	return &Sweeper{d}, nil
}

// Sweep runs one sweep (a lease of three minutes) and returns how many rows it deleted.
func (s *Sweeper) Sweep(ctx context.Context) (int64, error) { return s.d.sweep(ctx, time.Minute) }

// Close closes the driver, giving up its sweep lease.
func (s *Sweeper) Close() { _ = s.d.Close() }

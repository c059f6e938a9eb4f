package pgstore

import (
	"context"

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

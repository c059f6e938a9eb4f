package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// migrations are the schema's versions: migrations[i] takes the schema from version i to i+1.
// Append only; never edit a released entry.
var migrations = []string{
	// 1: the key-value table, its TTL index, and leases.
	`CREATE TABLE pixie_kv (
		k bytea PRIMARY KEY,
		v bytea NOT NULL,
		expires_at timestamptz
	);
	CREATE INDEX pixie_kv_expires ON pixie_kv (expires_at) WHERE expires_at IS NOT NULL;
	CREATE TABLE pixie_lease (
		name text PRIMARY KEY,
		holder text NOT NULL,
		until timestamptz NOT NULL
	);`,
}

// SchemaVersion is the schema version this binary writes.
var SchemaVersion = len(migrations)

// migrateLock is the advisory lock key that serialises migrations between processes.
const migrateLock int64 = 0x706978696531 // "pixie1"

// migrate applies the pending migrations under the advisory lock, each in its own transaction.
func (d *driver) migrate(ctx context.Context) error {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return d.reachErr(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrateLock); err != nil {
		return fmt.Errorf("pgstore: take the migration lock: %w", d.mapErr(err))
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrateLock) }()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS pixie_schema (
		version int PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("pgstore: create the schema table: %w", d.mapErr(err))
	}
	var cur int
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM pixie_schema").Scan(&cur); err != nil {
		return fmt.Errorf("pgstore: read the schema version: %w", d.mapErr(err))
	}
	if cur > len(migrations) {
		return fmt.Errorf("pgstore: the database's schema is version %d, newer than this Pixie knows (%d): run a newer Pixie", cur, len(migrations))
	}
	for v := cur; v < len(migrations); v++ {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, migrations[v]); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO pixie_schema (version) VALUES ($1)", v+1)
			return err
		})
		if err != nil {
			return fmt.Errorf("pgstore: migration %d: %w", v+1, d.mapErr(err))
		}
		d.log.Info("pgstore: schema migrated", "version", v+1)
	}
	return nil
}

// Package pgtest gives tests a fresh PostgreSQL database. The server is named by
// PIXIE_TEST_POSTGRES_URL (a URL whose role may create databases, e.g.
// postgres://pixie:pixie@127.0.0.1:5432/postgres); .ci/run starts PostgreSQL and sets it. Without
// it a test that needs PostgreSQL is skipped with a message saying so, unless
// PIXIE_REQUIRE_POSTGRES=1 (set by .ci/run), which makes it fail instead: CI never skips them
// silently.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the server tests use; EnvRequire makes its absence a failure.
const (
	EnvURL     = "PIXIE_TEST_POSTGRES_URL"
	EnvRequire = "PIXIE_REQUIRE_POSTGRES"
)

// ServerURL returns the server URL, skipping (or failing, in CI) the test when none is set.
func ServerURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvURL)
	if u == "" {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("%s is not set but %s=1: PostgreSQL tests must run here", EnvURL, EnvRequire)
		}
		t.Skipf("PostgreSQL tests skipped: set %s to a server URL whose role may create databases (e.g. postgres://pixie:pixie@127.0.0.1:5432/postgres)", EnvURL)
	}
	return u
}

// NewDatabase creates an empty database for the test, drops it when the test ends, and
// returns its URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	base := ServerURL(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "pixie_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("pgtest: connect to %s: %v", EnvURL, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Logf("pgtest: drop %s: %v", name, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("pgtest: drop %s: %v", name, err)
		}
	})
	return WithDatabase(t, base, name)
}

// WithDatabase returns base with its database replaced by name.
func WithDatabase(t testing.TB, base, name string) string {
	t.Helper()
	if !strings.Contains(base, "://") {
		return base + " dbname=" + name
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("pgtest: %s is not a URL: %v", EnvURL, err)
	}
	u.Path = "/" + name
	return u.String()
}

package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/pgstore"
	"github.com/pixie-dev/pixie/internal/store/pgstore/pgtest"
	"github.com/pixie-dev/pixie/internal/store/storetest"
)

func openURL(t testing.TB, url string) *store.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), pgstore.Options{URL: url, MaxConns: 4, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	var mu sync.Mutex
	dbs := map[string]string{} // the suite's directory → its database
	storetest.Run(t, func(t *testing.T, dir string) *store.Store {
		mu.Lock()
		url, ok := dbs[dir]
		mu.Unlock()
		if !ok {
			url = pgtest.NewDatabase(t)
			mu.Lock()
			dbs[dir] = url
			mu.Unlock()
		}
		return openURL(t, url)
	})
}

func TestConformanceShared(t *testing.T) {
	storetest.RunShared(t, func(t *testing.T) (*store.Store, *store.Store) {
		url := pgtest.NewDatabase(t)
		return openURL(t, url), openURL(t, url)
	})
}

func TestUnreachableFailsClearly(t *testing.T) {
	ctx := context.Background()
	_, err := pgstore.Open(ctx, pgstore.Options{URL: "postgres://pixie:s3cret-pass@127.0.0.1:1/pixie", ConnectTimeout: 2 * time.Second})
	if err == nil {
		t.Fatal("open of an unreachable database succeeded")
	}
	msg := err.Error()
	if strings.Contains(msg, "s3cret-pass") {
		t.Fatalf("the password leaked: %s", msg)
	}
	if !strings.Contains(msg, "cannot reach the database at postgres://pixie:xxxxx@127.0.0.1:1/pixie") {
		t.Fatalf("unclear error: %s", msg)
	}
	_, err = pgstore.Open(ctx, pgstore.Options{URL: "host=127.0.0.1 port=1 user=pixie password='p w' dbname=x", ConnectTimeout: time.Second})
	if err == nil || strings.Contains(err.Error(), "p w") {
		t.Fatalf("keyword form: %v", err)
	}
}

func TestRedact(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://u:pw@h:5432/db?sslmode=disable", "postgres://u:xxxxx@h:5432/db?sslmode=disable"},
		{"postgres://u@h/db", "postgres://u@h/db"},
		{"postgres://h/db?password=pw&user=u", "postgres://h/db?password=xxxxx&user=u"},
		{"host=h password=pw user=u", "host=h password=xxxxx user=u"},
		{"host=h password='p w' user=u", "host=h password=xxxxx user=u"},
		{"postgres://u:p%w@h/db", "postgres://u:xxxxx@h/db"},
	} {
		if got := pgstore.Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestMigrationsRunOnceUnderConcurrentStarts(t *testing.T) {
	url := pgtest.NewDatabase(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := pgstore.Open(context.Background(), pgstore.Options{URL: url, MaxConns: 2, SweepInterval: -1})
			if err != nil {
				errs <- err
				return
			}
			s.Close()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n, err := pgstore.AppliedVersions(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	if n != pgstore.SchemaVersion {
		t.Fatalf("%d migration rows, want %d", n, pgstore.SchemaVersion)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	url := pgtest.NewDatabase(t)
	openURL(t, url).Close()
	ctx := context.Background()
	if err := pgstore.Exec(ctx, url, "INSERT INTO pixie_schema (version) VALUES ($1)", pgstore.SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	_, err := pgstore.Open(ctx, pgstore.Options{URL: url, SweepInterval: -1})
	if err == nil || !strings.Contains(err.Error(), "newer than this Pixie knows") {
		t.Fatalf("got %v", err)
	}
}

func TestSweepDeletesExpiredRows(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	s, err := pgstore.Open(ctx, pgstore.Options{URL: url, MaxConns: 2, SweepInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Update(ctx, func(tx *store.Tx) error {
		if err := tx.SetRaw("x/gone", []byte("1"), 200*time.Millisecond); err != nil {
			return err
		}
		return tx.SetRaw("x/kept", []byte("1"), 0)
	}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := pgstore.CountRows(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rows left; the expired one was not swept", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestStatementTimeoutIsSet(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	s, err := pgstore.Open(ctx, pgstore.Options{URL: url, MaxConns: 2, SweepInterval: -1, StatementTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A statement that waits on a row lock held elsewhere runs into statement_timeout.
	err = s.Update(ctx, func(tx *store.Tx) error { return tx.SetRaw("x/a", []byte("1"), 0) })
	if err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	held := make(chan struct{})
	go func() {
		_ = pgstore.HoldRowLock(ctx, url, []byte("x/a"), held, hold)
	}()
	<-held
	start := time.Now()
	err = s.Update(ctx, func(tx *store.Tx) error { return tx.SetRaw("x/a", []byte("2"), 0) })
	close(hold)
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("got %v after %s", err, time.Since(start))
	}
}

// Two transactions that lock two rows in opposite orders deadlock; PostgreSQL aborts one
// (40P01), the store runs it again, and both commit.
func TestDeadlockIsRetried(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	a, b := openURL(t, url), openURL(t, url)
	defer a.Close()
	defer b.Close()
	if err := a.Update(ctx, func(tx *store.Tx) error {
		if err := tx.SetRaw("x/1", []byte("0"), 0); err != nil {
			return err
		}
		return tx.SetRaw("x/2", []byte("0"), 0)
	}); err != nil {
		t.Fatal(err)
	}
	var barrier sync.WaitGroup
	barrier.Add(2)
	var attempts atomic.Int32
	run := func(s *store.Store, first, second string) error {
		tried := false
		return s.Update(ctx, func(tx *store.Tx) error {
			attempts.Add(1)
			if err := tx.SetRaw(first, []byte("1"), 0); err != nil {
				return err
			}
			if _, err := tx.GetRaw(first); err != nil { // sends the write: the row is locked
				return err
			}
			if !tried {
				tried = true
				barrier.Done()
				barrier.Wait()
			}
			if err := tx.SetRaw(second, []byte("1"), 0); err != nil {
				return err
			}
			_, err := tx.GetRaw(second) // waits for the other's row: one of the two is aborted
			return err
		})
	}
	errs := make(chan error, 2)
	go func() { errs <- run(a, "x/1", "x/2") }()
	go func() { errs <- run(b, "x/2", "x/1") }()
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			t.Fatalf("a deadlocked transaction was not retried: %v", err)
		}
	}
	if n := attempts.Load(); n < 3 {
		t.Fatalf("%d attempts: no transaction was aborted", n)
	}
	// The abort was the deadlock detector's (PostgreSQL counts them per database).
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := pgstore.QueryInt(ctx, url, "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
		if err != nil {
			t.Fatal(err)
		}
		if n >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("PostgreSQL counted no deadlock")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// The pool never opens more than MaxConns connections (plus the listener's), however many
// transactions wait; the waiting ones run once a connection is free.
func TestPoolIsBounded(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	s, err := pgstore.Open(ctx, pgstore.Options{URL: url, MaxConns: 2, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	defer s.Listen("x", func(store.Note) {})() // the listener's connection
	var running, most atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.Update(ctx, func(tx *store.Tx) error {
				n := running.Add(1)
				defer running.Add(-1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				if _, err := tx.GetRaw("x/none"); err != nil && err != store.ErrNotFound {
					return err
				}
				time.Sleep(150 * time.Millisecond)
				return tx.SetRaw(fmt.Sprintf("x/%d", i), []byte("1"), 0)
			})
		}()
	}
	var conns int64
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
sample:
	for {
		select {
		case <-done:
			break sample
		case <-time.After(20 * time.Millisecond):
		}
		n, err := pgstore.QueryInt(ctx, url, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'pixie'")
		if err != nil {
			t.Fatal(err)
		}
		conns = max(conns, n)
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if m := most.Load(); m != 2 {
		t.Fatalf("%d transactions ran at once with MaxConns 2", m)
	}
	if conns > 3 {
		t.Fatalf("%d connections to the database with MaxConns 2 and a listener", conns)
	}
}

// The TTL sweep runs in one process of those sharing the database (a lease), and moves to
// another when that one closes.
func TestSweepRunsInOneProcess(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	s := openURL(t, url)
	defer s.Close()
	expire := func(n int) {
		t.Helper()
		if err := s.Update(ctx, func(tx *store.Tx) error {
			for i := 0; i < n; i++ {
				if err := tx.SetRaw(fmt.Sprintf("x/%d", i), []byte("1"), time.Millisecond); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	a, err := pgstore.OpenSweeper(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := pgstore.OpenSweeper(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	expire(3)
	if n, err := a.Sweep(ctx); err != nil || n != 3 {
		t.Fatalf("the first sweeper deleted %d (%v), want 3", n, err)
	}
	expire(2)
	if n, err := b.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("a second sweeper deleted %d (%v) while the first holds the lease", n, err)
	}
	a.Close()
	if n, err := b.Sweep(ctx); err != nil || n != 2 {
		t.Fatalf("after the first closed, the second deleted %d (%v), want 2", n, err)
	}
}

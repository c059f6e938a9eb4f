package pgstore_test

import (
	"context"
	"strings"
	"sync"
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

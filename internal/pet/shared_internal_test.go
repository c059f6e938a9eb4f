package pet

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store/pgstore"
	"github.com/pixie-dev/pixie/internal/store/pgstore/pgtest"
)

// Two replicas over one PostgreSQL database: a scope's Invocations run one at a time across
// both (the store lock), not only within one process.
func TestScopeLockAcrossReplicas(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	var svcs []*Service
	for range 2 {
		st, err := pgstore.Open(ctx, pgstore.Options{URL: url, MaxConns: 3, SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		s, err := New(context.Background(), Config{Store: st, Workspace: filepath.Join(t.TempDir(), "ws")})
		if err != nil {
			t.Fatal(err)
		}
		svcs = append(svcs, s)
	}
	a, b := svcs[0], svcs[1]
	unlock, err := a.lockScope(ctx, "repo:x")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = b.lockScope(wctx, "repo:x")
	cancel()
	if !errs.Is(err, errs.Timeout) {
		t.Fatalf("the other replica took a held scope: %v", err)
	}
	// Another scope is free.
	u2, err := b.lockScope(ctx, "repo:y")
	if err != nil {
		t.Fatal(err)
	}
	u2()
	got := make(chan func(), 1)
	go func() {
		u, err := b.lockScope(ctx, "repo:x")
		if err != nil {
			t.Error(err)
			u = func() {}
		}
		got <- u
	}()
	select {
	case <-got:
		t.Fatal("the other replica took the scope before it was released")
	case <-time.After(100 * time.Millisecond):
	}
	unlock()
	select {
	case u := <-got:
		u()
	case <-time.After(10 * time.Second):
		t.Fatal("the released scope was never taken by the waiting replica")
	}
}

package cluster_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/cluster"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
	"github.com/pixie-dev/pixie/internal/store/pgstore"
	"github.com/pixie-dev/pixie/internal/store/pgstore/pgtest"
)

func readToken(t *testing.T, home string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(home, cluster.TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(filepath.Join(home, cluster.TokenFile))
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v", st.Mode().Perm())
	}
	return strings.TrimSpace(string(raw))
}

// On an embedded store the token is the home's file, made once.
func TestAdminTokenEmbedded(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	st, err := badgerstore.Open(ctx, badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tok, fresh, err := cluster.AdminToken(ctx, st, home)
	if err != nil || !fresh || len(tok) != 64 || readToken(t, home) != tok {
		t.Fatalf("first: %q %v %v", tok, fresh, err)
	}
	again, fresh, err := cluster.AdminToken(ctx, st, home)
	if err != nil || fresh || again != tok {
		t.Fatalf("second: %v %v", fresh, err)
	}
	if err := os.Chmod(filepath.Join(home, cluster.TokenFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cluster.AdminToken(ctx, st, home); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a readable token file was accepted: %v", err)
	}
	n, err := cluster.New(ctx, cluster.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	if ok, _ := n.Alive(ctx, "someone-else"); ok || n.Shared() {
		t.Fatal("an embedded store has no other replica")
	}
}

func openPG(t *testing.T, url string) *store.Store {
	t.Helper()
	st, err := pgstore.Open(context.Background(), pgstore.Options{URL: url, MaxConns: 2, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Replicas starting together on an empty shared store agree on one token and each writes it
// into its own home; a replica whose home had a different token takes the store's.
func TestAdminTokenShared(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	const n = 4
	homes := make([]string, n)
	toks := make([]string, n)
	fresh := make([]bool, n)
	var wg sync.WaitGroup
	for i := range homes {
		homes[i] = t.TempDir()
		st := openPG(t, url)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			toks[i], fresh[i], err = cluster.AdminToken(ctx, st, homes[i])
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	created := 0
	for i := range homes {
		if toks[i] != toks[0] || readToken(t, homes[i]) != toks[0] {
			t.Fatalf("replica %d has another token", i)
		}
		if fresh[i] {
			created++
		}
	}
	if created != 1 {
		t.Fatalf("%d replicas report creating the token", created)
	}
	// A home with a stale token file gets the cluster's.
	stale := t.TempDir()
	if err := os.WriteFile(filepath.Join(stale, cluster.TokenFile), []byte(strings.Repeat("0", 64)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, f, err := cluster.AdminToken(ctx, openPG(t, url), stale)
	if err != nil || f || tok != toks[0] || readToken(t, stale) != toks[0] {
		t.Fatalf("stale home: %v %v", f, err)
	}
}

func TestRegistry(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, err := cluster.New(ctx, cluster.Config{Store: openPG(t, url), URL: "http://a:1", Heartbeat: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	bst := openPG(t, url)
	b, err := cluster.New(ctx, cluster.Config{Store: bst, Heartbeat: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SetURL(ctx, "http://b:2"); err != nil {
		t.Fatal(err)
	}
	if u, err := a.URL(ctx, b.Self()); err != nil || u != "http://b:2" {
		t.Fatalf("a sees b at %q %v", u, err)
	}
	if ok, _ := b.OthersAlive(ctx); !ok {
		t.Fatal("b does not see a")
	}
	ms, err := a.Members(ctx)
	if err != nil || len(ms) != 2 {
		t.Fatalf("members %+v %v", ms, err)
	}
	time.Sleep(800 * time.Millisecond) // past the TTL: heartbeats keep them
	if ok, _ := a.Alive(ctx, b.Self()); !ok {
		t.Fatal("the heartbeat did not keep b alive")
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ok, _ := a.Alive(ctx, b.Self()); ok {
		t.Fatal("b left but is alive")
	}
	if _, err := a.URL(ctx, b.Self()); err != cluster.ErrNoReplica {
		t.Fatalf("url of a gone replica: %v", err)
	}
	a.Close(context.Background())
}

// TestNewNeedsAStore: a Config without a Store is refused.
func TestNewNeedsAStore(t *testing.T) {
	if n, err := cluster.New(context.Background(), cluster.Config{}); err == nil || n != nil {
		t.Fatalf("New without a store: %v, %v", n, err)
	}
}

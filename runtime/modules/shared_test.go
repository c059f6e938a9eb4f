package modules_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/pgstore"
	"github.com/pixie-dev/pixie/internal/store/pgstore/pgtest"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime/modules"
	"github.com/pixie-dev/pixie/runtime/wasm"
)

// Two replicas over one PostgreSQL database: a module pushed on one runs on the other (its body
// is in the database), and a name replaced on one resolves to the new body on the other.
func TestRegistrySharedStore(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	v, err := wasm.NewValidator(ctx, wasm.Config{CacheDir: testutil.WasmCacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close(ctx)
	open := func() (*store.Store, *modules.Registry, string) {
		st, err := pgstore.Open(ctx, pgstore.Options{URL: url, MaxConns: 3, SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		dir := filepath.Join(t.TempDir(), "blobs")
		r, err := modules.New(context.Background(), modules.Config{Store: st, Dir: dir, Validator: v})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close(context.Background()) })
		return st, r, dir
	}
	_, a, dirA := open()
	_, b, _ := open()
	echo := testutil.Guest(t, "testdata/echo")
	skip := testutil.Guest(t, "only-search-tools")

	m, err := a.Put(ctx, "echo", echo, "")
	if err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dirA); len(ents) != 0 {
		t.Fatalf("a shared store wrote %d body files", len(ents))
	}
	sha, err := b.Resolve(ctx, "echo")
	if err != nil || sha != m.SHA256 {
		t.Fatalf("b resolves %q %v", sha, err)
	}
	body, err := b.Load(ctx, sha)
	if err != nil || string(body) != string(echo) {
		t.Fatalf("b loads %d bytes, %v", len(body), err)
	}
	// Replace the name on a: b's remembered resolution is dropped by the notification.
	m2, err := a.Put(ctx, "echo", skip, "")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := b.Resolve(ctx, "echo")
		if err != nil {
			t.Fatal(err)
		}
		if got == m2.SHA256 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("b still resolves echo to the replaced module")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The old body went with its last name.
	if _, err := b.Load(ctx, m.SHA256); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("old body: %v", err)
	}
	if err := b.Delete(ctx, "echo", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Load(ctx, m2.SHA256); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("deleted body: %v", err)
	}
}

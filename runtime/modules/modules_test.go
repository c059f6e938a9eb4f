package modules_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime/modules"
	"github.com/pixie-dev/pixie/runtime/wasm"
)

func TestRegistry(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := badgerstore.Open(ctx, badgerstore.Options{Dir: filepath.Join(dir, "db"), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v, err := wasm.NewValidator(ctx, wasm.Config{CacheDir: testutil.WasmCacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close(ctx)
	echo := testutil.Guest(t, "testdata/echo")
	skip := testutil.Guest(t, "only-search-tools")
	reg, err := modules.New(context.Background(), modules.Config{Store: st, Dir: filepath.Join(dir, "blobs"), Validator: v, MaxSize: int64(len(echo))})
	if err != nil {
		t.Fatal(err)
	}
	blobs := func() int {
		ents, _ := os.ReadDir(filepath.Join(dir, "blobs"))
		return len(ents)
	}

	m, err := reg.Put(ctx, "echo", echo, "")
	if err != nil || m.Name != "echo" || len(m.SHA256) != 64 || m.Size != int64(len(echo)) || len(m.Exports) == 0 {
		t.Fatalf("%+v %v", m, err)
	}
	for _, tc := range []struct {
		name string
		mod  string
		wasm []byte
		code errs.Code
	}{
		{"bad name", "Echo_1", echo, errs.Invalid},
		{"name with a trailing hyphen", "echo-", echo, errs.Invalid},
		{"one byte over the cap", "big", append(append([]byte{}, echo...), 0), errs.TooLarge},
	} {
		if _, err := reg.Put(ctx, tc.mod, tc.wasm, ""); errs.CodeOf(err) != tc.code {
			t.Fatalf("%s: %v", tc.name, err)
		}
	}
	if blobs() != 1 {
		t.Fatalf("%d blobs", blobs())
	}
	// A second name shares the body; replacing one name keeps the shared body.
	if _, err := reg.Put(ctx, "echo-2", echo, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Put(ctx, "echo", skip, ""); err != nil {
		t.Fatal(err)
	}
	if blobs() != 2 {
		t.Fatalf("%d blobs", blobs())
	}
	got, err := reg.Get(ctx, m.SHA256)
	if err != nil || got.Name != "echo-2" {
		t.Fatalf("%+v %v", got, err)
	}
	list, err := reg.List(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "echo" || list[1].Name != "echo-2" {
		t.Fatalf("%+v %v", list, err)
	}
	b, err := reg.Load(ctx, m.SHA256)
	if err != nil || len(b) != len(echo) {
		t.Fatal(err)
	}

	inUse := func(ctx context.Context, _ *store.Tx, name string) (bool, error) { return name == "echo-2", nil }
	if err := reg.Delete(ctx, "echo-2", inUse); !errs.Is(err, errs.Conflict) {
		t.Fatalf("deleting a used module: %v", err)
	}
	if err := reg.Delete(ctx, "echo-2", nil); err != nil {
		t.Fatal(err)
	}
	if blobs() != 1 {
		t.Fatalf("%d blobs after deleting the last name of a body", blobs())
	}
	if _, err := reg.Get(ctx, m.SHA256); !errs.Is(err, errs.NotFound) {
		t.Fatal(err)
	}
	if err := reg.Delete(ctx, "echo-2", nil); !errs.Is(err, errs.NotFound) {
		t.Fatal(err)
	}
	// A body damaged on disk is refused.
	cur, _ := reg.Get(ctx, "echo")
	if err := os.WriteFile(filepath.Join(dir, "blobs", cur.SHA256+".wasm"), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Load(ctx, cur.SHA256); err == nil {
		t.Fatal("a corrupt module loaded")
	}
}

// newRegistry is a registry over a real Badger store with the real validator.
func newRegistry(t *testing.T) (*modules.Registry, *store.Store) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := badgerstore.Open(ctx, badgerstore.Options{Dir: filepath.Join(dir, "db"), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	v, err := wasm.NewValidator(ctx, wasm.Config{CacheDir: testutil.WasmCacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close(ctx) })
	reg, err := modules.New(context.Background(), modules.Config{Store: st, Dir: filepath.Join(dir, "blobs"), Validator: v})
	if err != nil {
		t.Fatal(err)
	}
	return reg, st
}

// TestResolveFollowsChanges: Resolve answers from memory, and every change clears it.
func TestResolveFollowsChanges(t *testing.T) {
	ctx := context.Background()
	reg, _ := newRegistry(t)
	a, err := reg.Put(ctx, "rule", testutil.Guest(t, "testdata/echo"), "")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if sha, err := reg.Resolve(ctx, "rule"); err != nil || sha != a.SHA256 {
			t.Fatalf("%s %v", sha, err)
		}
	}
	b, err := reg.Put(ctx, "rule", testutil.Guest(t, "only-search-tools"), "")
	if err != nil {
		t.Fatal(err)
	}
	if sha, err := reg.Resolve(ctx, "rule"); err != nil || sha != b.SHA256 || sha == a.SHA256 {
		t.Fatalf("after replacing: %s %v", sha, err)
	}
	if _, err := reg.Resolve(ctx, a.SHA256); !errs.Is(err, errs.NotFound) {
		t.Fatalf("the replaced body still resolves: %v", err)
	}
	if ok, err := reg.ModuleExists(ctx, "rule"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if err := reg.Delete(ctx, "rule", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Resolve(ctx, "rule"); !errs.Is(err, errs.NotFound) {
		t.Fatalf("a deleted module resolves: %v", err)
	}
	if ok, err := reg.ModuleExists(ctx, "rule"); ok || err != nil {
		t.Fatal(ok, err)
	}
}

// TestDeleteConflictsWithConcurrentUse: the in-use check runs inside the delete's transaction,
// so a definition saved between the check and the commit makes the delete conflict, retry, and
// see the new use.
func TestDeleteConflictsWithConcurrentUse(t *testing.T) {
	ctx := context.Background()
	reg, st := newRegistry(t)
	if _, err := reg.Put(ctx, "rule", testutil.Guest(t, "testdata/echo"), ""); err != nil {
		t.Fatal(err)
	}
	// A stand-in for the gate definitions: the key "test-use/rule" holds the name of the gate
	// that uses the module.
	uses := store.NewCollection[string]("test-use")
	calls := 0
	inUse := func(ctx context.Context, tx *store.Tx, name string) (bool, error) {
		calls++
		used, err := uses.Has(tx, name)
		if err != nil || used {
			return used, err
		}
		if calls == 1 {
			// A save commits while the delete is between its check and its commit.
			if err := st.Update(ctx, func(tx *store.Tx) error { return uses.Put(tx, name, "g") }); err != nil {
				return false, err
			}
		}
		return false, nil
	}
	if err := reg.Delete(ctx, "rule", inUse); !errs.Is(err, errs.Conflict) {
		t.Fatalf("the delete ignored a concurrent use: %v", err)
	}
	if calls != 2 {
		t.Fatalf("the check ran %d times; want 2 (the conflict retried it)", calls)
	}
	if _, err := reg.Resolve(ctx, "rule"); err != nil {
		t.Fatalf("the module is gone: %v", err)
	}
}

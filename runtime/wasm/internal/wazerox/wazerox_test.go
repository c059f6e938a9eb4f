package wazerox

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// TestSetMemoryLen pins the memory instance's Buffer field: a memory grown to three pages is set
// back to one, and wazero (Size, and the compiled code's bounds) sees one page.
func TestSetMemoryLen(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	wasm, err := os.ReadFile(filepath.Join("testdata", "open.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	m, err := rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithFSConfig(wazero.NewFSConfig().WithDirMount(t.TempDir(), "/")))
	if err != nil {
		t.Fatal(err)
	}
	mem := m.Memory()
	if _, ok := mem.Grow(2); !ok || mem.Size() != 3*pageSize {
		t.Fatal("grow")
	}
	if err := SetMemoryLen(mem, pageSize); err != nil {
		t.Fatal(err)
	}
	if mem.Size() != pageSize {
		t.Fatalf("size %d", mem.Size())
	}
	if _, ok := mem.Read(pageSize, 1); ok {
		t.Fatal("the memory still reads past its new end")
	}
	if err := SetMemoryLen(mem, 5*pageSize); err == nil {
		t.Fatal("set past the capacity")
	}
}

// TestFDTable pins the descriptor table: files opened after a snapshot are closed by Restore
// (and the preopen's lazily opened root), and the next open gets the descriptor it got first.
func TestFDTable(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(filepath.Join("testdata", "open.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithFSConfig(wazero.NewFSConfig().WithReadOnlyDirMount(dir, "/")))
	if err != nil {
		t.Fatal(err)
	}
	fds, err := FDTable(m)
	if err != nil {
		t.Fatal(err)
	}
	snap := fds.Snapshot()
	open := func() int32 {
		res, err := m.ExportedFunction("open").Call(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return int32(res[0])
	}
	first := open()
	if first < 4 || open() != first+1 {
		t.Fatalf("opened %d", first)
	}
	if fds.Same(snap) {
		t.Fatal("the table looks unchanged after two opens")
	}
	// The two files, and the preopen's root, which the opens opened lazily.
	if n := fds.Restore(snap); n != 3 {
		t.Fatalf("Restore closed %d files, want 3", n)
	}
	if !fds.Same(snap) {
		t.Fatal("the table is not the snapshot's after Restore")
	}
	if got := open(); got != first {
		t.Fatalf("after Restore the next open got %d, want %d", got, first)
	}
}

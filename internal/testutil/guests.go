package testutil

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/guestbuild"
)

var guestMu sync.Mutex

// GuestPath returns the path of the WASM guest called name, building it first when the module
// is missing or older than its sources (the guest's folder, sdk/, sdk/abi/, go.mod, sdk/go.mod). name
// is a folder under guests/: "block-risky-commands", or "testdata/fault-loop" for a test
// fixture. Modules go to bin/guests/<name>.wasm, as `make guests` puts them; a build writes a
// temporary file and renames it, so packages testing in parallel never read half a module.
func GuestPath(t testing.TB, name string) string {
	t.Helper()
	if name == "" || strings.Contains(name, "..") || filepath.IsAbs(name) {
		t.Fatalf("testutil: bad guest name %q", name)
	}
	root := Root()
	src := filepath.Join(root, "guests", filepath.FromSlash(name))
	out := filepath.Join(root, "bin", "guests", filepath.FromSlash(name)+".wasm")
	guestMu.Lock()
	defer guestMu.Unlock()
	if st, err := os.Stat(out); err == nil && !newerThan(t, st.ModTime(), src,
		filepath.Join(root, "sdk"), filepath.Join(root, "sdk", "abi"), filepath.Join(root, "go.mod"), filepath.Join(root, "sdk", "go.mod")) {
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := guestbuild.Build(ctx, src, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Guest returns the bytes of the WASM guest called name (see GuestPath).
func Guest(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(GuestPath(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newerThan reports whether any .go file directly in the given folders (or the given files)
// changed after built.
func newerThan(t testing.TB, built time.Time, paths ...string) bool {
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatalf("testutil: %v", err)
		}
		if !st.IsDir() {
			if st.ModTime().After(built) {
				return true
			}
			continue
		}
		ents, err := os.ReadDir(p)
		if err != nil {
			t.Fatalf("testutil: %v", err)
		}
		for _, e := range ents {
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") {
				continue
			}
			if info, err := e.Info(); err == nil && info.ModTime().After(built) {
				return true
			}
		}
	}
	return false
}

// WasmCacheDir is the wazero compilation cache shared by every test process and run:
// bin/wasm-cache. Compiling a standard Go guest under the race detector takes tens of seconds
// (the compiler itself is instrumented), so `make test` first fills this cache without -race
// (internal/wasmwarm) and the race run then loads compiled code from it. Tests that measure or
// depend on an empty cache use a directory of their own instead.
func WasmCacheDir(t testing.TB) string {
	t.Helper()
	dir, err := WasmCachePath()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// WasmCachePath is WasmCacheDir for code without a testing.TB at hand.
func WasmCachePath() (string, error) {
	dir := filepath.Join(Root(), "bin", "wasm-cache")
	return dir, os.MkdirAll(dir, 0o755)
}

// GuestNames lists every guest folder with a main package: the examples under guests/ and the
// test fixtures under guests/testdata/ (as "testdata/<name>").
func GuestNames(t testing.TB) []string {
	t.Helper()
	var names []string
	for _, base := range []string{"", "testdata"} {
		ents, err := os.ReadDir(filepath.Join(Root(), "guests", base))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if !e.IsDir() || e.Name() == "testdata" {
				continue
			}
			if _, err := os.Stat(filepath.Join(Root(), "guests", base, e.Name(), "main.go")); err != nil {
				continue
			}
			names = append(names, filepath.ToSlash(filepath.Join(base, e.Name())))
		}
	}
	return names
}

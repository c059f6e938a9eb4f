package testutil

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/guestbuild"
)

var guestMu sync.Mutex

// GuestPath returns the path of the WASM guest called name, building it first when the module
// is missing or older than its sources. name is a folder under guests/: "block-risky-commands",
// "block-risky-commands-as" (AssemblyScript) or "testdata/fault-loop" for a test fixture.
// Modules go to bin/guests/<name>.wasm, as `make guests` puts them; a build writes a temporary
// file and renames it, so packages testing in parallel never read half a module.
//
// A Go guest's sources are its folder, sdk/, sdk/abi/, go.mod and sdk/go.mod. An AssemblyScript
// guest's are its assembly/ folder, asconfig.json, package.json, package-lock.json and the
// SDK's sdk/assemblyscript/assembly/; its npm packages are installed first (`npm ci`) when its
// node_modules is missing or older than its lock file. Builds and installs across test
// processes are serialised by a lock file in bin/.
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
	lang, err := guestbuild.Detect(src)
	if err != nil {
		t.Fatal(err)
	}
	sources := []string{src, filepath.Join(root, "sdk"), filepath.Join(root, "sdk", "abi"), filepath.Join(root, "go.mod"), filepath.Join(root, "sdk", "go.mod")}
	if lang == guestbuild.AssemblyScript {
		sources = []string{filepath.Join(src, "assembly"), filepath.Join(src, guestbuild.ASConfig), filepath.Join(src, "package.json"),
			filepath.Join(src, "package-lock.json"), filepath.Join(root, "sdk", "assemblyscript", "assembly")}
	}
	if st, err := os.Stat(out); err == nil && !newerThan(t, st.ModTime(), sources...) {
		return out
	}
	unlock := lockFile(t, filepath.Join(root, "bin", ".guests.lock"))
	defer unlock()
	// Another process may have built it while this one waited.
	if st, err := os.Stat(out); err == nil && !newerThan(t, st.ModTime(), sources...) {
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if lang == guestbuild.AssemblyScript {
		NPMInstall(t, src)
	}
	if err := guestbuild.Build(ctx, src, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// NPMInstall runs `npm ci` in dir when its node_modules is missing or older than its
// package-lock.json (npm keeps its downloads in its cache, ~/.npm). A missing npm fails the
// test: the AssemblyScript SDK and guests need it (.ci/run installs it).
func NPMInstall(t testing.TB, dir string) {
	t.Helper()
	lock, err := os.Stat(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatalf("testutil: %v", err)
	}
	if st, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err == nil && !lock.ModTime().After(st.ModTime()) {
		return
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("testutil: npm is needed to build the AssemblyScript guest in %s (apt-get install nodejs npm)", dir)
	}
	cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error")
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testutil: npm ci in %s: %v\n%s", dir, err, b)
	}
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

// newerThan reports whether any .go or .ts file directly in the given folders (or the given
// files) changed after built.
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
			if e.IsDir() || !(strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), ".ts")) {
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

// GuestNames lists every guest folder: the examples under guests/ (Go main packages and
// AssemblyScript packages) and the test fixtures under guests/testdata/ (as "testdata/<name>").
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
			dir := filepath.Join(Root(), "guests", base, e.Name())
			if _, err := os.Stat(filepath.Join(dir, "main.go")); err != nil {
				if _, err := os.Stat(filepath.Join(dir, guestbuild.ASConfig)); err != nil {
					continue
				}
			}
			names = append(names, filepath.ToSlash(filepath.Join(base, e.Name())))
		}
	}
	return names
}

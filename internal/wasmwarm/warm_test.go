// Package wasmwarm fills the shared wazero compilation cache (bin/wasm-cache) with every guest
// the tests run. `make test` runs it once without the race detector before the race run, so
// race-instrumented test binaries load compiled code instead of compiling each guest with an
// instrumented compiler (minutes instead of seconds). Run on its own, it is also a smoke test:
// every guest builds and compiles.
package wasmwarm

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime/wasm"
	"github.com/pixie-dev/pixie/sdk/abi"
)

func TestWarmCompileCache(t *testing.T) {
	ctx := context.Background()
	v, err := wasm.NewValidator(ctx, wasm.Config{CacheDir: testutil.WasmCacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close(ctx)
	names := testutil.GuestNames(t)
	if len(names) < 6 {
		t.Fatalf("found only %d guests: %v", len(names), names)
	}
	for _, name := range names {
		t.Run(strings.ReplaceAll(name, "/", "-"), func(t *testing.T) {
			raw, err := os.ReadFile(testutil.GuestPath(t, name))
			if err != nil {
				t.Fatal(err)
			}
			entry := abi.EntryGate
			if strings.HasPrefix(name, "pet-") {
				entry = abi.EntryRun
			}
			// Fault fixtures may be refused (that is their point); compiling them is what
			// fills the cache.
			if _, err := v.Validate(ctx, raw, entry); err != nil && !strings.HasPrefix(name, "testdata/") {
				t.Fatalf("%s: %v", name, err)
			}
		})
	}
}

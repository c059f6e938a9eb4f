package wasm

import (
	"testing"

	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime/wasm/internal/instrument"
)

// An AssemblyScript guest, built as `pixie guest build` builds it (its start code exported as
// _initialize, not a start section), is instrumented like a Go guest, and its instances can
// be reset to a snapshot.
func TestAssemblyScriptGuestIsInstrumented(t *testing.T) {
	res, err := instrument.Rewrite(testutil.Guest(t, "block-risky-commands-as"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Loops == 0 || res.Functions == 0 {
		t.Fatalf("%d loops, %d functions instrumented", res.Loops, res.Functions)
	}
	if !res.Resettable {
		t.Fatalf("not resettable: %s", res.NotResettable)
	}
}

package wasm

import (
	"testing"

	"github.com/pixie-dev/pixie/internal/testutil"
)

// An AssemblyScript guest, built as `pixie guest build` builds it (its start code exported as
// _initialize, not a start section), is instrumented for interruption like a Go guest: it runs
// with Pixie's cheap loop check, not wazero's.
func TestAssemblyScriptGuestIsInstrumented(t *testing.T) {
	_, loops, err := instrument(testutil.Guest(t, "block-risky-commands-as"))
	if err != nil {
		t.Fatal(err)
	}
	if loops == 0 {
		t.Fatal("no loop instrumented")
	}
}

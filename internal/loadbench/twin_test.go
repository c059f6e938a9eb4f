package loadbench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/testutil"
)

// TestRegoTwin checks the Rego twin (block_risky.rego) on TwinCases through OPA's REST API, as
// make bench does before it measures OPA; internal/wasmit's TestLoadbenchTwinCases checks the
// same table against the guest and its bash twin. OPA is built by make bench (or
// `go run ./internal/tools/bench -go=false -load-rows opa`) into the tools cache; without it
// the test skips.
func TestRegoTwin(t *testing.T) {
	if _, err := os.Stat(OPAPath("")); err != nil {
		t.Skipf("OPA %s is not built (%s): make bench builds it", OPAVersion, OPAPath(""))
	}
	e, err := NewEnv(testutil.Root(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o, err := e.StartOPA(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range TwinCases {
		t.Run(c.Name, func(t *testing.T) {
			got, err := o.Decide(ctx, c.Tool, []byte(c.Args))
			if err != nil || got != c.Want {
				t.Fatalf("OPA decides %+v (%v), want %+v", got, err, c.Want)
			}
		})
	}
	if err := CheckRego(ctx, o); err != nil {
		t.Fatal(err)
	}
}

// OPA is built by the bench from the module proxy, never required by Pixie's own module.
func TestOPAIsNotADependency(t *testing.T) {
	for _, f := range []string{"go.mod", "go.sum", filepath.Join("sdk", "go.mod")} {
		b, err := os.ReadFile(filepath.Join(testutil.Root(), f))
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(OPAModule)) {
			t.Errorf("%s names %s: OPA is the bench's peer, built into the tools cache, not a dependency", f, OPAModule)
		}
	}
}

// The twin table covers every stop reason of the guest.
func TestTwinCasesCoverEveryReason(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range TwinCases {
		seen[c.Want.Verdict+":"+c.Want.Reason] = true
	}
	for _, r := range []string{reasonRmRoot, reasonForcePush, reasonPipeShell, reasonForkBomb, reasonDisk, reasonMkfs, reasonChmodRoot} {
		if !seen["stop:"+r] {
			t.Errorf("no case stops with %q", r)
		}
	}
	if !seen["unclear:"] || !seen["skip:"] {
		t.Error("the table needs unclear and skipped cases")
	}
	if !bytes.Contains(RegoTwin, []byte(reasonRmRoot)) {
		t.Error("the embedded Rego twin lacks the guest's reasons")
	}
}

package wasmit

import (
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/wasm"
)

// TestAdmissionThroughEvaluate runs a gate whose module the WASM memory budget cannot hold (1
// MiB: less than one instance of any guest) through POST /v1/gates/evaluate under both error
// policies: the run fails at once with the budget's error, which the error policy applies to,
// and the evaluation answers (runtime/wasm's TestRunAdmission and TestMemoryBudget cover the
// run slots and the budget at their edges).
func TestAdmissionThroughEvaluate(t *testing.T) {
	s := newStack(t, stackOptions{wasm: wasm.Config{MemoryBudget: 1 << 20}})
	s.push(t, "testdata/echo", "echo")
	var set gate.Set
	for _, policy := range []string{gate.OnErrorContinue, gate.OnErrorStop} {
		g := gateWith("echo-"+policy, "user-message", "unused", moduleRule("echo"), policy, 5)
		set.Gates = append(set.Gates, g)
		set.Presets = append(set.Presets, gate.Preset{Name: g.Name, Gates: []gate.Attachment{{Gate: g.Name, Enabled: true}}})
	}
	s.save(t, set)
	for _, g := range set.Gates {
		t.Run(g.Name, func(t *testing.T) {
			res := s.evaluate(t, gate.EvalRequest{Point: "user-message", Turn: 1, Target: "hello",
				Session: gate.Session{ID: "s-" + g.Name, Preset: g.Name, Cwd: t.TempDir(), Policy: runtime.PolicyReadOnly}})
			if !strings.Contains(res.Error, "the WASM runtime is busy: the WASM memory budget is exhausted") {
				t.Fatalf("%+v; want the budget's error", res)
			}
			if g.Advanced.OnError == gate.OnErrorStop && res.Action != gate.ActionRejected {
				t.Fatalf("stop policy: %+v", res)
			}
			if g.Advanced.OnError == gate.OnErrorContinue && (res.Action != gate.ActionNone || res.Text != "hello") {
				t.Fatalf("continue policy: %+v", res)
			}
		})
	}
}

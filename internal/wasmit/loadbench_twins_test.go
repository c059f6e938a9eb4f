package wasmit

import (
	"encoding/json"
	"testing"

	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/loadbench"
	"github.com/pixie-dev/pixie/runtime"
)

// TestLoadbenchTwinCases checks make bench's twin table (loadbench.TwinCases, on which the
// Rego twin of block-risky-commands is checked against OPA: loadbench's TestRegoTwin) against
// the guest itself and its bash twin, here where no OPA is needed: each case's decision is the
// one both make. The model judges every unclear command risky, so "unclear" shows as the
// judged stop.
func TestLoadbenchTwinCases(t *testing.T) {
	s := newStack(t, stackOptions{})
	s.push(t, "block-risky-commands", "block-risky-commands")
	s.save(t, gate.Set{
		Gates: []gate.Gate{
			gateWith("wasm", "tool-before", "unused", moduleRule("block-risky-commands"), "", 0),
			gateWith("bash", "tool-before", "unused", scriptRule("block-risky-commands.sh"), "", 0),
		},
		Presets: []gate.Preset{
			{Name: "wasm", Gates: []gate.Attachment{{Gate: "wasm", Enabled: true}}},
			{Name: "bash", Gates: []gate.Attachment{{Gate: "bash", Enabled: true}}},
		},
	})
	s.llm.set(func(string, string) map[string]float64 { return yesNo(0.9) }, nil)
	const judged = "Blocked: Pixie judged this command risky. Ask the user before running it."
	cwd := t.TempDir()
	for _, c := range loadbench.TwinCases {
		for _, preset := range []string{"wasm", "bash"} {
			t.Run(c.Name+"/"+preset, func(t *testing.T) {
				args := json.RawMessage(c.Args)
				res := s.evaluate(t, gate.EvalRequest{Point: "tool-before", Turn: 1, Tool: &gate.Tool{Name: c.Tool, Args: args}, Target: c.Args,
					Session: gate.Session{ID: "twins-" + preset, Preset: preset, Cwd: cwd, Policy: runtime.PolicyWorkspaceWrite}})
				var got loadbench.Decision
				switch {
				case res.Error != "":
					t.Fatalf("the run failed: %+v", res)
				case res.ConcludedBy == gate.ByHookScript && res.Action == gate.ActionBlocked && res.Reason == judged:
					got = loadbench.Decision{Verdict: "unclear"}
				case res.ConcludedBy == gate.ByHookScript && res.Action == gate.ActionBlocked:
					got = loadbench.Decision{Verdict: "stop", Reason: res.Reason}
				case res.ConcludedBy == "skipped-by-hook":
					got = loadbench.Decision{Verdict: "skip"}
				default:
					t.Fatalf("unexpected result %+v", res)
				}
				if got != c.Want {
					t.Fatalf("decides %+v, the table says %+v", got, c.Want)
				}
			})
		}
	}
}

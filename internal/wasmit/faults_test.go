package wasmit

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/runtime"
)

// TestFaultsThroughEvaluate runs each fault guest as a gate's rule through POST
// /v1/gates/evaluate: each ends in a clear error under the gate's error policy, is recorded,
// and the server goes on answering (an evaluation of a healthy guest after each, and healthy
// evaluations in other sessions while a guest spins).
func TestFaultsThroughEvaluate(t *testing.T) {
	s := newStack(t, stackOptions{})
	s.push(t, "block-risky-commands", "block-risky-commands")
	faults := []struct {
		guest   string
		timeout int
		// want is in the result's error; detail in the record's error or error detail.
		want, detail string
	}{
		{guest: "fault-loop", timeout: 2, want: "The gate timed out after 2s", detail: "rule timed out"},
		{guest: "fault-membomb", want: "rule trapped", detail: "out of memory"},
		{guest: "fault-trap", want: "rule trapped", detail: "assignment to entry in nil map"},
		{guest: "fault-output", want: "rule output over the cap", detail: "300000 bytes; the cap is 262144"},
		{guest: "fault-calls", want: "exited with status 1", detail: "stderr: call 21: pixie_ask: rate_limited: the run has used its 20 helper calls"},
		{guest: "fault-badjson", want: "needs a gate output JSON", detail: "not a JSON object"},
	}
	var gates []gate.Gate
	var presets []gate.Preset
	for _, f := range faults {
		s.push(t, "testdata/"+f.guest, f.guest)
		for _, policy := range []string{gate.OnErrorContinue, gate.OnErrorStop} {
			name := f.guest + "-" + policy
			gates = append(gates, gateWith(name, "user-message", "unused", moduleRule(f.guest), policy, f.timeout))
			presets = append(presets, gate.Preset{Name: name, Gates: []gate.Attachment{{Gate: name, Enabled: true}}})
		}
	}
	healthy := gateWith("risky", "tool-before", "unused", moduleRule("block-risky-commands"), "", 0)
	gates = append(gates, healthy)
	presets = append(presets, gate.Preset{Name: "healthy", Gates: []gate.Attachment{{Gate: "risky", Enabled: true}}})
	s.save(t, gate.Set{Gates: gates, Presets: presets})
	// fault-calls asks 21 times: the model answers the first 20.
	s.llm.set(nil, func(string, string) string { return "ok" })

	args, _ := json.Marshal(map[string]string{"command": "rm -rf /"})
	alive := func(t *testing.T, session string) {
		t.Helper()
		res := s.evaluate(t, gate.EvalRequest{Point: "tool-before", Turn: 1, Tool: &gate.Tool{Name: "Bash", Args: args}, Target: string(args),
			Session: gate.Session{ID: session, Preset: "healthy", Cwd: t.TempDir(), Policy: runtime.PolicyWorkspaceWrite}})
		if res.Action != gate.ActionBlocked || res.Error != "" {
			t.Fatalf("the server stopped serving: %+v", res)
		}
	}
	for _, f := range faults {
		for _, policy := range []string{gate.OnErrorContinue, gate.OnErrorStop} {
			name := f.guest + "-" + policy
			t.Run(name, func(t *testing.T) {
				target := "please do it"
				var (
					res gate.Result
					wg  sync.WaitGroup
				)
				wg.Add(1)
				go func() {
					defer wg.Done()
					res = s.evaluate(t, gate.EvalRequest{Point: "user-message", Turn: 1, Target: target,
						Session: gate.Session{ID: "s-" + name, Preset: name, Cwd: t.TempDir(), Policy: runtime.PolicyReadOnly}})
				}()
				// Other sessions are served while the fault runs.
				for i := range 3 {
					alive(t, fmt.Sprintf("other-%s-%d", name, i))
				}
				wg.Wait()
				if res.Error == "" || !strings.Contains(res.Error, f.want) || res.ConcludedBy != gate.ByHookScript || res.RunID == "" {
					t.Fatalf("%+v; want an error with %q", res, f.want)
				}
				switch policy {
				case gate.OnErrorContinue:
					if res.Action != gate.ActionNone || res.Text != target || res.Reason != "" {
						t.Fatalf("continue: %+v", res)
					}
				case gate.OnErrorStop:
					if res.Action != gate.ActionRejected || !strings.Contains(res.Reason, fmt.Sprintf("The gate %q failed", name)) {
						t.Fatalf("stop: %+v", res)
					}
				}
				var rec gate.Record
				if st, eb := s.call(t, http.MethodGet, "/v1/gates/records/"+res.RunID, nil, &rec); st != http.StatusOK {
					t.Fatalf("record: %d %+v", st, eb)
				}
				if rec.Error != res.Error || !strings.Contains(rec.Error+" "+rec.ErrorDetail, f.detail) {
					t.Fatalf("the record says %q / %q; want %q", rec.Error, rec.ErrorDetail, f.detail)
				}
				if f.guest == "fault-calls" {
					// 20 calls answered; the 21st was refused before it reached the model.
					if n := len(rec.HelperCalls); n != 20 || rec.HelperCalls[19].Error != "" {
						t.Fatalf("helper calls: %d: %+v", n, rec.HelperCalls)
					}
				}
				alive(t, "after-"+name)
			})
		}
	}
	if st, _ := s.request(t, http.MethodGet, "/healthz", "", nil, nil); st != http.StatusOK {
		t.Fatalf("healthz: %d", st)
	}
}

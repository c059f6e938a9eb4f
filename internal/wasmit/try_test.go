package wasmit

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/gate"
)

// TestTryRunsModuleRules: "Try it" runs a gate's WASM rule (with no mount: a trial has no
// working directory) and says it ran; a script rule is still not run, and the result says so.
func TestTryRunsModuleRules(t *testing.T) {
	s := newStack(t, stackOptions{})
	s.push(t, "block-risky-commands", "block-risky-commands")
	s.push(t, "list-changed-files", "list-changed-files")
	raw, _ := json.Marshal(map[string]string{"command": "rm -rf /", "description": "run it"})
	rm, rmArgs := &gate.Tool{Name: "Bash", Args: raw}, string(raw)
	try := func(g gate.Gate, sample gate.Sample) (int, gate.TryResult, string) {
		t.Helper()
		var res gate.TryResult
		st, eb := s.call(t, http.MethodPost, "/v1/gates/try", gate.TryRequest{Gate: g, Sample: sample}, &res)
		return st, res, eb.Error.Message
	}
	before := s.llm.calls

	// A module-only gate (no task): the rule concludes, no model call.
	g := gateWith("risky", "tool-before", "", moduleRule("block-risky-commands"), "continue", 10)
	st, res, msg := try(g, gate.Sample{Target: rmArgs, Tool: rm})
	if st != 200 || res.Action != gate.ActionBlocked || !res.RuleRan || res.ScriptNotRun || res.Rule == nil ||
		res.Rule.ExitCode != 11 || res.ConcludedBy != gate.ByHookScript || !strings.Contains(res.Reason, "recursive forced rm") {
		t.Fatalf("module-only trial: %d %s %+v", st, msg, res)
	}
	if s.llm.calls != before {
		t.Errorf("the model was called %d times for a rule-concluded trial", s.llm.calls-before)
	}
	// A module with a task: the rule's stdout reaches the task. list-changed-files reads the
	// mount, which a trial does not have: it says so and continues, and the task runs.
	g = gateWith("changed", "turn-end", "Changed:\n{{hooks.list-changed-files.text}}", moduleRule("list-changed-files"), "continue", 10)
	st, res, msg = try(g, gate.Sample{Target: "done"})
	if st != 200 || !res.RuleRan || res.Rule == nil || res.Rule.ExitCode != 0 || res.ConcludedBy != gate.ByPixie || res.Error != "" {
		t.Fatalf("module+task trial: %d %s %+v", st, msg, res)
	}
	// Nothing recorded.
	var page gate.SessionPage
	s.call(t, http.MethodGet, "/v1/gates/sessions", nil, &page)
	if len(page.Sessions) != 0 {
		t.Errorf("a trial left records: %+v", page)
	}
	// A script rule is not run, and the result says so.
	g = gateWith("risky-sh", "tool-before", "Is this risky? {{tool.args}}", scriptRule("block-risky-commands.sh"), "continue", 10)
	st, res, msg = try(g, gate.Sample{Target: rmArgs, Tool: rm})
	if st != 200 || !res.ScriptNotRun || res.RuleRan || res.Rule != nil || res.ConcludedBy != gate.ByPixie {
		t.Fatalf("script trial: %d %s %+v", st, msg, res)
	}
	// A script-only gate cannot be tried at all: nothing would run.
	g = gateWith("risky-sh", "tool-before", "", scriptRule("block-risky-commands.sh"), "continue", 10)
	if st, _, msg = try(g, gate.Sample{Target: rmArgs, Tool: rm}); st != 400 || !strings.Contains(msg, "gate.task") {
		t.Fatalf("script-only trial: %d %s", st, msg)
	}
}

// Command claim-check is the WASM twin of claim-check.sh (spec/pixie-gate.md): at the turn-end
// point it judges (select) whether the answer's test-pass claim matches the last recorded test
// run in the session's cwd (.last-test-run). Supported skips the gate, a contradiction stops
// with a reason (a redo), missing evidence leaves a note, and a low-confidence "missing" hands
// the judgment to the Pixie task ({{hooks.claim-check.data}}).
//
// Reading .last-test-run needs the read-only cwd mount (the gate's module rule must ask for
// it); without the mount the evidence is "no recorded test run", as when the file is absent.
package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"

	"github.com/pixie-dev/pixie/sdk"
)

func main() {}

// init warms the JSON encoder of the judged pair: encoding/json builds a type's codec on first
// use, and every run is the first use of its instance, so building it here, while the host
// prepares the instance (before the run it will serve is known), takes it off the run's path.
// It is an optimisation, not a requirement; it must not read the context (empty here), and it is
// the same for every run (docs/guests.md, "Warming up").
func init() { pair("", "") }

// evidenceFile is read relative to the guest's cwd: the mounted session cwd.
var evidenceFile = ".last-test-run"

const question = "Is the claim in `answer` that tests passed supported by `evidence`?"

var options = []sdk.Option{
	{Name: "supported", Description: "evidence shows the claimed tests ran and passed, or answer makes no test claim"},
	{Name: "contradicted", Description: "evidence shows a failure or a different run"},
	{Name: "missing", Description: "answer claims tests passed but evidence has no run"},
}

func rule() int32 {
	answer := strings.TrimRight(sdk.Target(), "\n")
	evidence := "no recorded test run"
	if b, err := os.ReadFile(evidenceFile); err == nil {
		evidence = strings.TrimRight(string(b), "\n")
	}
	res, err := sdk.JudgeSelect(question, pair(answer, evidence), options...)
	if err != nil {
		return sdk.Fail(err)
	}
	switch res.Label {
	case "supported":
		return sdk.Skip()
	case "contradicted":
		return sdk.Conclude(sdk.Output{Verdict: sdk.Stop, Reason: "The test results contradict the claim. Check the actual results and report again."})
	case "missing":
		if res.Answer.Confidence < 0.6 {
			return sdk.Continue(res.JSON())
		}
		return sdk.Conclude(sdk.Output{Note: "No recorded test run."})
	}
	// As the script's case with no matching branch: exit 0, no output.
	return sdk.Continue("")
}

// pair renders {answer, evidence} as jq -n does.
func pair(answer, evidence string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(struct {
		Answer   string `json:"answer"`
		Evidence string `json:"evidence"`
	}{answer, evidence})
	return b.String()
}

// Command pet-judge-skill is an example Pet Skill as a WASM guest (skill.wasm) that uses the
// helper Skills share with gate rules. It summarises each part of the snapshot's selection
// (parts are separated by a line holding only "---") with pixie_ask, then asks the decision
// engine through pixie_judge whether the selection says the work is finished. The team name
// comes from an environment value (DSH_PET_TEAM); Pet redacts it from everything the helper
// sends out. Every ask and the judgment count against the run's budget of 20 helper calls: a
// selection of 20 parts leaves no call for the judgment, and the Skill fails with the helper's
// rate_limited error.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/pixie-dev/pixie/sdk"
)

func main() {}

// petContext is the part of pet_context this Skill reads.
type petContext struct {
	Snapshot struct {
		Selection string `json:"selection"`
	} `json:"snapshot"`
}

func skill() int32 {
	var pc petContext
	if err := json.Unmarshal(sdk.PetContext(), &pc); err != nil {
		return sdk.Fail(errors.New("no pet_context: this Skill runs only as a Pet invocation"))
	}
	sel := strings.TrimSpace(pc.Snapshot.Selection)
	if sel == "" {
		return sdk.Fail(errors.New("nothing is selected: select the text to review, then invoke the Skill"))
	}
	instruction := "Summarise this part of a work log in one line."
	if team, ok := sdk.Config("DSH_PET_TEAM"); ok && team != "" {
		instruction += " The reader is the team " + team + "."
	}
	var b strings.Builder
	for i, part := range strings.Split(sel, "\n---\n") {
		summary, err := sdk.Ask(instruction, part)
		if err != nil {
			return sdk.Fail(fmt.Errorf("summary of part %d: %w", i+1, err))
		}
		fmt.Fprintf(&b, "%d. %s\n", i+1, strings.TrimSpace(summary))
	}
	verdict, err := sdk.JudgeBool("Does the text say the work is finished?", sel,
		sdk.TrueMeans("the work is finished"), sdk.FalseMeans("work remains"))
	if err != nil {
		return sdk.Fail(fmt.Errorf("judge: %w", err))
	}
	sdk.Logf("info", "judged by %s: %s (confidence %.2f)", verdict.Engine, verdict.Label, verdict.Answer.Confidence)
	fmt.Fprintf(&b, "finished=%s yes=%.4f engine=%s", verdict.Label, verdict.Yes, verdict.Engine)
	return sdk.Continue(b.String())
}

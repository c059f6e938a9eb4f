// Command pet-echo-skill is an example Pet Skill as a WASM guest (skill.wasm): it reads its
// invocation through pet_context, an environment value through its config (DSH_PET_GREETING),
// and answers with a summary of both. When the snapshot's selection starts with "ask:", it also
// asks the Pixie model the rest of the selection, with the greeting in the instruction (Pet
// redacts environment values from what reaches the model).
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
	InvocationID string `json:"invocationId"`
	Seq          int    `json:"seq"`
	Run          int    `json:"run"`
	Skill        string `json:"skill"`
	Scope        string `json:"scope"`
	Snapshot     struct {
		Title     string `json:"title"`
		Selection string `json:"selection"`
	} `json:"snapshot"`
	History []struct {
		Seq    int    `json:"seq"`
		Output string `json:"output"`
	} `json:"history"`
}

func skill() int32 {
	raw := sdk.PetContext()
	if len(raw) == 0 {
		return sdk.Fail(errors.New("no pet_context: this Skill runs only as a Pet invocation"))
	}
	var pc petContext
	if err := json.Unmarshal(raw, &pc); err != nil {
		return sdk.Fail(fmt.Errorf("pet_context is not JSON: %w", err))
	}
	greeting, ok := sdk.Config("DSH_PET_GREETING")
	if !ok {
		greeting = "(unset)"
	}
	sdk.Logf("info", "greeting=%s", greeting)
	out := fmt.Sprintf("wasm %s #%d run %d in %s: title=%q greeting=%s history=%d",
		pc.Skill, pc.Seq, pc.Run, pc.Scope, pc.Snapshot.Title, greeting, len(pc.History))
	if q, ok := strings.CutPrefix(pc.Snapshot.Selection, "ask:"); ok {
		answer, err := sdk.Ask("Answer briefly. The team greeting is "+greeting+".", q)
		if err != nil {
			return sdk.Fail(fmt.Errorf("ask: %w", err))
		}
		out += " answer=" + answer
	}
	return sdk.Continue(out)
}

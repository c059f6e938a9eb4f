package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/sdk"
)

func petCtx(selection string) []byte {
	sel, _ := json.Marshal(selection)
	return []byte(`{"skill":"review","snapshot":{"selection":` + string(sel) + `}}`)
}

func TestSkill(t *testing.T) {
	summarise := func(r sdk.AskRequest) (string, error) { return "sum(" + r.Input + ")", nil }
	judge := func(r sdk.JudgeRequest) (sdk.JudgeResponse, error) { return sdk.BoolAnswer(r, 0.75), nil }
	tests := []struct {
		name    string
		fake    sdk.Fake
		code    int32
		output  string
		errText string
		asks    int
	}{
		{"two parts", sdk.Fake{PetContext: petCtx("a\n---\nb"), Ask: summarise, Judge: judge},
			0, "1. sum(a)\n2. sum(b)\nfinished=yes yes=0.7500 engine=llm", "", 2},
		{"team in the instruction", sdk.Fake{PetContext: petCtx("a"), Vars: map[string]string{"DSH_PET_TEAM": "blue"},
			Ask: func(r sdk.AskRequest) (string, error) { return r.Instruction, nil }, Judge: judge},
			0, "1. Summarise this part of a work log in one line. The reader is the team blue.\nfinished=yes yes=0.7500 engine=llm", "", 1},
		{"nothing selected", sdk.Fake{PetContext: petCtx("  ")}, sdk.ExitError, "", "nothing is selected", 0},
		{"not a Pet run", sdk.Fake{}, sdk.ExitError, "", "no pet_context", 0},
		{"ask unavailable", sdk.Fake{PetContext: petCtx("a"), Judge: judge}, sdk.ExitError, "", "summary of part 1: pixie_ask: unavailable", 1},
		{"judge unavailable", sdk.Fake{PetContext: petCtx("a"), Ask: summarise}, sdk.ExitError, "", "judge: pixie_judge: unavailable", 1},
		{"20 parts leave no call for the judgment", sdk.Fake{PetContext: petCtx(strings.Repeat("x\n---\n", 19) + "x"), Ask: summarise, Judge: judge},
			sdk.ExitError, "", "judge: pixie_judge: rate_limited", 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := tc.fake.Run(skill)
			if res.Code != tc.code || res.Output != tc.output || !strings.Contains(res.Error, tc.errText) || len(res.Asks) != tc.asks {
				t.Fatalf("got %d %q %q, %d asks", res.Code, res.Output, res.Error, len(res.Asks))
			}
		})
	}
}

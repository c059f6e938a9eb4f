package main

import (
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/sdk"
)

func TestSkill(t *testing.T) {
	ctx := []byte(`{"invocationId":"i1","seq":2,"run":1,"skill":"echo","scope":"session:s1",
		"snapshot":{"title":"T","selection":"ask:why?"},"history":[{"seq":1,"output":"x"}]}`)
	tests := []struct {
		name    string
		fake    sdk.Fake
		code    int32
		output  string
		errText string
	}{
		{"with greeting and ask", sdk.Fake{PetContext: ctx, Vars: map[string]string{"DSH_PET_GREETING": "hi"},
			Ask: func(r sdk.AskRequest) (string, error) { return "because " + r.Input, nil }},
			0, `wasm echo #2 run 1 in session:s1: title="T" greeting=hi history=1 answer=because why?`, ""},
		{"greeting unset", sdk.Fake{PetContext: []byte(`{"seq":1,"skill":"echo","scope":"independent"}`)},
			0, `wasm echo #1 run 0 in independent: title="" greeting=(unset) history=0`, ""},
		{"not a Pet run", sdk.Fake{}, sdk.ExitError, "", "no pet_context"},
		{"ask fails", sdk.Fake{PetContext: ctx}, sdk.ExitError, "", "ask: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := tc.fake.Run(skill)
			if res.Code != tc.code || res.Output != tc.output || !strings.Contains(res.Error, tc.errText) {
				t.Fatalf("got %d %q %q", res.Code, res.Output, res.Error)
			}
		})
	}
}

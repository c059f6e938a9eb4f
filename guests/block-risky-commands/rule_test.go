package main

import (
	"testing"

	"github.com/pixie-dev/pixie/sdk"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// The rule, run on the host through the SDK's fake.
func TestRule(t *testing.T) {
	tests := []struct {
		name   string
		tool   string
		cmd    string
		yes    float64
		code   int32
		output string
		judged bool
	}{
		{"rm -rf /", "Bash", `{"command":"rm -rf /"}`, 0, 11, `{"verdict":"stop","reason":"` + reasonRmRoot + `"}`, false},
		{"force push", "Bash", `{"command":"git push -f origin main"}`, 0, 11, `{"verdict":"stop","reason":"` + reasonForcePush + `"}`, false},
		{"safe", "Bash", `{"command":"go test ./..."}`, 0, 10, "", false},
		{"other tool", "Read", `{"command":"rm -rf /"}`, 0, 10, "", false},
		{"unclear, judged risky", "Bash", `{"command":"git reset --hard"}`, 0.8, 11, `{"verdict":"stop","reason":"` + reasonJudged + `"}`, true},
		{"unclear, judged safe", "Bash", `{"command":"rm -r dist"}`, 0.2, 11, `{"verdict":"pass","note":"` + noteJudgedSafe + `"}`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &sdk.Fake{Target: tc.cmd, Vars: map[string]string{abi.VarToolName: tc.tool},
				Judge: func(req sdk.JudgeRequest) (sdk.JudgeResponse, error) { return sdk.BoolAnswer(req, tc.yes), nil }}
			res := f.Run(rule)
			if res.Code != tc.code || res.Output != tc.output || (len(res.Judges) > 0) != tc.judged {
				t.Fatalf("%+v", res)
			}
		})
	}
}

package sdk_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/sdk"
	"github.com/pixie-dev/pixie/sdk/abi"
)

func TestFinishing(t *testing.T) {
	tests := []struct {
		name   string
		rule   func() int32
		code   int32
		output string
		err    string
	}{
		{"continue", func() int32 { return sdk.Continue("text") }, 0, "text", ""},
		{"continue data", func() int32 { return sdk.ContinueData(map[string]int{"n": 1}) }, 0, `{"n":1}`, ""},
		{"continue data that cannot encode", func() int32 { return sdk.ContinueData(func() {}) }, 1, "", "sdk: encode continue data"},
		{"skip", sdk.Skip, 10, "", ""},
		{"conclude", func() int32 { return sdk.Conclude(sdk.Output{Note: "n"}) }, 11, `{"note":"n"}`, ""},
		{"conclude with a bad verdict", func() int32 { return sdk.Conclude(sdk.Output{Verdict: "maybe"}) }, 1, "", `verdict "maybe"`},
		{"fail", func() int32 { return sdk.Fail(errors.New("boom")) }, 1, "", "boom"},
		{"panic", func() int32 { panic("oops") }, 1, "", "rule panicked: oops"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := (&sdk.Fake{}).Run(tc.rule)
			if res.Code != tc.code || res.Output != tc.output || !strings.Contains(res.Error, tc.err) || (tc.err == "") != (res.Error == "") {
				t.Fatalf("%+v", res)
			}
		})
	}
}

func TestContext(t *testing.T) {
	f := &sdk.Fake{Target: "t", PetContext: []byte(`{}`), Vars: map[string]string{
		abi.VarPoint: "tool-before", abi.VarToolName: "Bash", abi.VarToolArgs: "{}", abi.VarAgent: "root",
		abi.VarSessionID: "s", abi.VarTurn: "7", abi.VarGateName: "g", "OTHER": "o",
	}}
	f.Run(func() int32 {
		got := []string{sdk.Target(), sdk.Point(), sdk.ToolName(), sdk.ToolArgs(), sdk.Agent(), sdk.SessionID(), sdk.GateName(), string(sdk.PetContext())}
		want := []string{"t", "tool-before", "Bash", "{}", "root", "s", "g", "{}"}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("value %d = %q, want %q", i, got[i], want[i])
			}
		}
		if sdk.Turn() != 7 {
			t.Errorf("turn %d", sdk.Turn())
		}
		if v, ok := sdk.Config("OTHER"); !ok || v != "o" {
			t.Errorf("config %q %v", v, ok)
		}
		if _, ok := sdk.Config("MISSING"); ok {
			t.Error("missing config found")
		}
		return 0
	})
}

func TestHelperBudget(t *testing.T) {
	f := &sdk.Fake{Ask: func(sdk.AskRequest) (string, error) { return "ok", nil }}
	res := f.Run(func() int32 {
		for i := range abi.MaxHelperCalls + 1 {
			if _, err := sdk.Ask("x", "y"); err != nil {
				var he *sdk.HostError
				if !errors.As(err, &he) || he.Code != "rate_limited" || i != abi.MaxHelperCalls {
					t.Errorf("call %d: %v", i+1, err)
				}
				return sdk.Fail(err)
			}
		}
		return 0
	})
	if res.Code != 1 || len(res.Asks) != abi.MaxHelperCalls+1 {
		t.Fatalf("%+v", res)
	}
	t.Run("request size", func(t *testing.T) {
		f := &sdk.Fake{Ask: func(sdk.AskRequest) (string, error) { return "ok", nil }}
		f.Run(func() int32 {
			// The request JSON adds the instruction and field names to the input.
			overhead := len(`{"instruction":"x","input":""}`)
			if _, err := sdk.Ask("x", strings.Repeat("a", abi.MaxHelperRequestSize-overhead)); err != nil {
				t.Errorf("at the limit: %v", err)
			}
			_, err := sdk.Ask("x", strings.Repeat("a", abi.MaxHelperRequestSize-overhead+1))
			var he *sdk.HostError
			if !errors.As(err, &he) || he.Code != "too_large" {
				t.Errorf("over the limit: %v", err)
			}
			return 0
		})
	})
	t.Run("no model", func(t *testing.T) {
		(&sdk.Fake{}).Run(func() int32 {
			_, err := sdk.JudgeBool("q", "s")
			var he *sdk.HostError
			if !errors.As(err, &he) || he.Code != "unavailable" {
				t.Errorf("%v", err)
			}
			return 0
		})
	})
}

func TestJudgeValidation(t *testing.T) {
	(&sdk.Fake{Judge: func(req sdk.JudgeRequest) (sdk.JudgeResponse, error) { return sdk.SelectAnswer(req, "a", 0.7), nil }}).Run(func() int32 {
		if _, err := sdk.JudgeSelect("q", "s", sdk.Option{Name: "a"}); err == nil {
			t.Error("one option accepted")
		}
		if _, err := sdk.JudgeScore("q", "s", "low"); err == nil {
			t.Error("one level accepted")
		}
		if _, err := sdk.JudgeBool("q", "s", sdk.Threshold(1.5)); err == nil {
			t.Error("threshold 1.5 accepted")
		}
		r, err := sdk.JudgeSelect("q", "s", sdk.Option{Name: "a"}, sdk.Option{Name: "b"})
		if err != nil || r.Label != "a" || r.Type != "select" || !strings.Contains(r.JSON(), `"label":"a"`) {
			t.Errorf("%+v %v", r, err)
		}
		return 0
	})
}

func TestOutsideAHost(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic outside a host")
		}
	}()
	sdk.Target()
}

// TestJudgmentJSON: JSON is the line `pixie judge --json` prints (internal/helpercli), so a
// guest hands on the same text as its bash twin.
func TestJudgmentJSON(t *testing.T) {
	(&sdk.Fake{Judge: func(req sdk.JudgeRequest) (sdk.JudgeResponse, error) {
		if req.Questions["q"].Type == abi.JudgeSelect {
			return sdk.SelectAnswer(req, "b", 0.75), nil
		}
		return sdk.BoolAnswer(req, 0.8), nil
	}}).Run(func() int32 {
		for _, tc := range []struct {
			name string
			j    func() (sdk.Judgment, error)
			want string
		}{
			{"bool", func() (sdk.Judgment, error) { r, err := sdk.JudgeBool("q", "s"); return r.Judgment, err },
				`{"type":"bool","label":"yes","answer":{"probabilities":{"no":0.19999999999999996,"yes":0.8},"confidence":0.8,"yes":0.8},"engine":"llm"}`},
			{"select", func() (sdk.Judgment, error) {
				r, err := sdk.JudgeSelect("q", "s", sdk.Option{Name: "a"}, sdk.Option{Name: "b"})
				return r.Judgment, err
			}, `{"type":"select","label":"b","answer":{"probabilities":{"b":0.75},"confidence":0.75},"engine":"llm"}`},
		} {
			j, err := tc.j()
			if err != nil || j.JSON() != tc.want {
				t.Errorf("%s: %s %v\nwant %s", tc.name, j.JSON(), err, tc.want)
			}
		}
		return 0
	})
}

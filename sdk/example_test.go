package sdk_test

import (
	"fmt"
	"strings"

	"github.com/pixie-dev/pixie/sdk"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// A rule that runs only for long grep results, tested on the host through a Fake.
func ExampleFake() {
	rule := func() int32 {
		if sdk.ToolName() != "grep" || len(sdk.Target()) <= 10 {
			return sdk.Skip()
		}
		return sdk.Continue(fmt.Sprint(len(sdk.Target())))
	}
	f := &sdk.Fake{Target: "a long grep result", Vars: map[string]string{abi.VarToolName: "grep"}}
	res := f.Run(rule)
	fmt.Println(res.Code, res.Output)
	f.Vars[abi.VarToolName] = "Read"
	fmt.Println(f.Run(rule).Code)
	// Output:
	// 0 18
	// 10
}

func ExampleConclude() {
	f := &sdk.Fake{Target: "rm -rf /"}
	res := f.Run(func() int32 {
		if strings.Contains(sdk.Target(), "rm -rf /") {
			return sdk.Conclude(sdk.Output{Verdict: sdk.Stop, Reason: "Deleting / is not allowed."})
		}
		return sdk.Skip()
	})
	fmt.Println(res.Code, res.Output)
	// Output: 11 {"verdict":"stop","reason":"Deleting / is not allowed."}
}

func ExampleJudgeBool() {
	f := &sdk.Fake{
		Target: "Bonjour",
		Judge: func(req sdk.JudgeRequest) (sdk.JudgeResponse, error) {
			return sdk.BoolAnswer(req, 0.9), nil
		},
	}
	res := f.Run(func() int32 {
		r, err := sdk.JudgeBool("Is this text in French?", sdk.Target(), sdk.Threshold(0.8))
		if err != nil {
			return sdk.Fail(err)
		}
		if r.Pass {
			return sdk.Skip()
		}
		return sdk.Continue("not French")
	})
	fmt.Println(res.Code, res.Judges[0].Questions["q"].Type)
	// Output: 10 noul
}

func ExampleAsk() {
	f := &sdk.Fake{Target: "hello", Ask: func(req sdk.AskRequest) (string, error) {
		return strings.ToUpper(req.Input), nil
	}}
	res := f.Run(func() int32 {
		text, err := sdk.Ask("Shout it.", sdk.Target())
		if err != nil {
			return sdk.Fail(err)
		}
		return sdk.Continue(text)
	})
	fmt.Println(res.Output)
	// Output: HELLO
}

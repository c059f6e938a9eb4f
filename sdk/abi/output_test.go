package abi

import (
	"encoding/json"
	"fmt"
	"testing"
)

var outputCases = []GateOutput{
	{},
	{Verdict: "stop", Reason: "Blocked: force push."},
	{Verdict: "pass", Note: "fine"},
	{Replace: "new text", Append: "more"},
	{Verdict: "stop", Reason: "r", Replace: "x", Append: "y", Note: "z"},
	{Reason: "quotes \" and \\ and / <b>&amp;</b>"},
	{Note: "controls \x00\x01\b\f\n\r\t\x1f\x7f end"},
	{Note: "unicode é 漢字 😀 \u2028 \u2029 \u2027 \u202a"},
	{Note: "invalid \xff \xc3 \xe2\x80 \xed\xa0\x80 end"},
}

func TestGateOutputAppendJSONIsMarshal(t *testing.T) {
	for _, o := range outputCases {
		want, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.AppendJSON(nil); string(got) != string(want) {
			t.Errorf("%+v:\n got %s\nwant %s", o, got, want)
		}
	}
}

// FuzzGateOutputAppendJSON checks AppendJSON against json.Marshal on any strings.
func FuzzGateOutputAppendJSON(f *testing.F) {
	for _, o := range outputCases {
		f.Add(o.Verdict, o.Reason, o.Replace, o.Append, o.Note)
	}
	f.Fuzz(func(t *testing.T, verdict, reason, replace, app, note string) {
		o := GateOutput{verdict, reason, replace, app, note}
		want, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.AppendJSON([]byte("prefix")); string(got) != "prefix"+string(want) {
			t.Fatalf("%+v:\n got %s\nwant %s", o, got, want)
		}
	})
}

func ExampleGateOutput_AppendJSON() {
	out := GateOutput{Verdict: "stop", Reason: "Blocked: rm -rf / <root>."}
	fmt.Println(string(out.AppendJSON(nil)))
	// Output: {"verdict":"stop","reason":"Blocked: rm -rf / \u003croot\u003e."}
}

package gate

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/pixie-dev/pixie/sdk/abi"
)

// strictEval is what the server decodes without the fast path.
func strictEval(body []byte) (EvalRequest, error) {
	var r EvalRequest
	err := abi.DecodeStrict(body, &r)
	return r, err
}

// sameAsStrict fails t when the fast path decoded body into something other than what
// abi.DecodeStrict decodes, or decoded a body that abi.DecodeStrict refuses.
func sameAsStrict(t *testing.T, body []byte) bool {
	t.Helper()
	var fast EvalRequest
	if !DecodeEvalFast(body, &fast) {
		return false
	}
	strict, err := strictEval(body)
	if err != nil {
		t.Fatalf("fast decoded %q, which abi.DecodeStrict refuses: %v", body, err)
	}
	if !reflect.DeepEqual(fast, strict) {
		t.Fatalf("%q:\nfast   %#v\nstrict %#v", body, fast, strict)
	}
	return true
}

const hostRequest = `{"point":"tool-before","session":{"id":"s-1","preset":"p","cwd":"/home/u/proj","policy":"full"},` +
	`"agent":"root","turn":3,"tool":{"name":"Bash","args":{"command":"rm -rf /","description":"clean up"},"callId":"c1"},` +
	`"target":"{\"command\":\"rm -rf /\",\"description\":\"clean up\"}","host":"claude-code"}`

func TestDecodeEvalFast(t *testing.T) {
	tests := []struct {
		name string
		body string
		fast bool // decoded by the fast path (else it falls back to abi.DecodeStrict)
	}{
		{"a host's request", hostRequest, true},
		{"empty object", `{}`, true},
		{"whitespace around and inside", " \n{ \"point\" : \"final\" ,\t\"turn\":0 }\r\n", true},
		{"every escape", `{"target":"a\"b\\c\/d\be\ff\ng\rh\ti\u00e9\u4e2d\u0000"}`, true},
		{"UTF-8 as written", `{"target":"héllo 中文 🙂"}`, true},
		{"negative and zero turns", `{"turn":-0}`, true},
		{"booleans", `{"structured":true,"rejected":false,"replaceStructured":true}`, true},
		{"args of every kind", `{"tool":{"args":[1,-2.5e3,"x\"y",{"a":[true,false,null]},{}, []]}}`, true},
		{"args a string", `{"tool":{"name":"Read","args":"just text"}}`, true},
		{"args a number", `{"tool":{"args":12.5}}`, true},
		{"empty tool", `{"tool":{}}`, true},
		{"messageId", `{"messageId":"m-1","point":"message-after"}`, true},

		{"an unknown field", `{"point":"final","extra":1}`, false},
		{"a field in another case", `{"Point":"final"}`, false},
		{"a repeated field", `{"point":"a","point":"b"}`, false},
		{"a repeated object", `{"session":{"id":"a"},"session":{"preset":"p"}}`, false},
		{"null", `{"point":null}`, false},
		{"a null tool", `{"tool":null}`, false},
		{"null args", `{"tool":{"args":null}}`, false},
		{"a fractional turn", `{"turn":1.5}`, false},
		{"an exponent turn", `{"turn":1e2}`, false},
		{"a leading zero", `{"turn":01}`, false},
		{"a turn past int", `{"turn":99999999999999999999}`, false},
		{"a string turn", `{"turn":"3"}`, false},
		{"a surrogate pair", `{"target":"\ud83d\ude42"}`, false},
		{"a lone surrogate", `{"target":"\ud83d"}`, false},
		{"invalid UTF-8", "{\"target\":\"\xff\"}", false},
		{"a control character", "{\"target\":\"a\tb\"}", false},
		{"a bad escape", `{"target":"\x"}`, false},
		{"trailing data", `{"point":"final"} {}`, false},
		{"a trailing brace", `{"point":"final"}}`, false},
		{"not an object", `["point"]`, false},
		{"unterminated", `{"point":"final"`, false},
		{"a missing colon", `{"point" "final"}`, false},
		{"a trailing comma", `{"point":"final",}`, false},
		{"a bare word", `{"structured":truex}`, false},
		{"invalid args", `{"tool":{"args":{"a":}}}`, false},
		{"args too deep", `{"tool":{"args":` + deep(100) + `}}`, false},
		{"an escaped key", `{"p\u006fint":"final"}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := sameAsStrict(t, []byte(tc.body)); got != tc.fast {
				t.Fatalf("fast path %v, want %v", got, tc.fast)
			}
		})
	}
}

func deep(n int) string {
	s := "1"
	for range n {
		s = "[" + s + "]"
	}
	return s
}

// FuzzDecodeEvalFast holds the fast path to abi.DecodeStrict: whatever it decodes, strict
// decoding accepts, into the same request.
func FuzzDecodeEvalFast(f *testing.F) {
	for _, s := range []string{hostRequest, `{}`, `{"turn":-12,"structured":true}`, `{"target":"\u00e9\n"}`,
		`{"tool":{"args":[{"a":"b"},1e5,null]}}`, `{"point":"a","point":"b"}`, `{"turn":1.0}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sameAsStrict(t, body)
	})
}

func resultJSONMatches(t *testing.T, r Result) {
	t.Helper()
	want, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.AppendJSON(nil); string(got) != string(want) {
		t.Fatalf("AppendJSON\n%s\nencoding/json\n%s", got, want)
	}
}

func TestResultAppendJSON(t *testing.T) {
	tests := []struct {
		name string
		r    Result
	}{
		{"nothing ran", Result{Action: ActionNone, Text: "t", Notes: []string{}, Skipped: SkipNoGate}},
		{"nil notes", Result{}},
		{"blocked", Result{Action: ActionBlocked, Text: `{"command":"rm -rf /"}`, Reason: "Blocked: <rm> & co", Notes: []string{"a", "b\n"},
			ConcludedBy: ByHookScript, RunID: "r-1", Gate: "risky", Usage: abi.Usage{InputTokens: 12, OutputTokens: -3}}},
		{"every field", Result{Action: "appended", Text: "x", Addition: "add", Reason: "why", Suggestion: "s", Notes: []string{""},
			ConcludedBy: "pixie", RunID: "r", Gate: "g", Skipped: "k", Error: "e\u2028\xff\x01\t", ShowInChat: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { resultJSONMatches(t, tc.r) })
	}
}

func FuzzResultAppendJSON(f *testing.F) {
	f.Add("blocked", "text <&>", "", "reason\n", []byte("note"), 3, 4)
	f.Add("", "\xff\u2028", "e", "", []byte(nil), 0, -1)
	f.Fuzz(func(t *testing.T, action, text, errText, reason string, notes []byte, in, out int) {
		r := Result{Action: action, Text: text, Error: errText, Reason: reason, Addition: reason, Suggestion: text, Gate: action,
			RunID: errText, ConcludedBy: text, Skipped: reason, Usage: abi.Usage{InputTokens: in, OutputTokens: out}, ShowInChat: in%2 == 0}
		if notes != nil {
			r.Notes = []string{string(notes), text}
		}
		resultJSONMatches(t, r)
	})
}

// sameOutputAsStrict is sameAsStrict for a rule's gate output.
func sameOutputAsStrict(t *testing.T, body []byte) bool {
	t.Helper()
	var fast rawOutput
	if !decodeOutputFast(body, &fast) {
		return false
	}
	var strict rawOutput
	if err := abi.DecodeStrict(body, &strict); err != nil {
		t.Fatalf("fast decoded %q, which abi.DecodeStrict refuses: %v", body, err)
	}
	if !reflect.DeepEqual(fast, strict) {
		t.Fatalf("%q:\nfast   %#v\nstrict %#v", body, fast, strict)
	}
	return true
}

func TestDecodeOutputFast(t *testing.T) {
	tests := []struct {
		name string
		body string
		fast bool
	}{
		{"a stop", `{"verdict":"stop","reason":"Blocked: recursive forced rm of / or the home directory."}`, true},
		{"every field", ` {"verdict":"pass","reason":"r","replace":"x\ny","append":"\u00e9","note":"n"} `, true},
		{"empty", `{}`, true},
		{"a null", `{"verdict":null}`, false},
		{"a number", `{"reason":1}`, false},
		{"another field", `{"verdict":"stop","why":"x"}`, false},
		{"repeated", `{"note":"a","note":"b"}`, false},
		{"trailing text", `{"verdict":"stop"} and more`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := sameOutputAsStrict(t, []byte(tc.body)); got != tc.fast {
				t.Fatalf("fast path %v, want %v", got, tc.fast)
			}
		})
	}
}

func FuzzDecodeOutputFast(f *testing.F) {
	for _, s := range []string{`{"verdict":"stop","reason":"r"}`, `{}`, `{"note":"\u00e9\n","append":""}`, `{"verdict":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sameOutputAsStrict(t, body)
	})
}

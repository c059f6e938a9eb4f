package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/rewrite"
)

// msgRule is a message rule for original; index < 0 means pending.
func msgRule(id, original, text string, index int) rewrite.Rule {
	h := sha256.Sum256([]byte(original))
	r := rewrite.Rule{ID: id, Kind: rewrite.KindMessage, OriginalSum: hex.EncodeToString(h[:]), OriginalLen: len(original), Text: text}
	if index >= 0 {
		r.Bound, r.Index, r.AppliedAt = true, index, time.Now()
	}
	return r
}

func toolRule(callID, text string, applied bool) rewrite.Rule {
	r := rewrite.Rule{ID: "t-" + callID, Kind: rewrite.KindToolResult, CallID: callID, Text: text}
	if applied {
		r.AppliedAt = time.Now()
	}
	return r
}

func TestApplyRewrites(t *testing.T) {
	// Claude Code's shape: the prompt is the last text block of the first user message, after
	// system reminders; a tool loop appends an assistant turn and a user message of results.
	claudeFirst := `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"ORIG prompt","cache_control":{"type":"ephemeral"}}]}],"tools":[{"name":"Bash"}]}`
	claudeLater := `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"ORIG prompt"}]},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"SECRET-1\n\n<system-reminder>t</system-reminder>","is_error":false}]}],"tools":[{"name":"Bash"}]}`
	// Codex's shape: developer messages, an environment message, the prompt; tool outputs after.
	codexFirst := `{"input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"dev"}]},` +
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context/>"}]},` +
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"ORIG prompt"}]}],"tools":[]}`
	codexLater := `{"input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"dev"}]},` +
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context/>"}]},` +
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"ORIG prompt"}]},` +
		`{"type":"function_call","call_id":"call_1","name":"exec_command","arguments":"{}"},` +
		`{"type":"function_call_output","call_id":"call_1","output":"SECRET-1"}]}`
	chat := `{"messages":[{"role":"user","content":"ORIG prompt"},{"role":"assistant","tool_calls":[{"id":"c1"}]},{"role":"tool","tool_call_id":"c1","content":"SECRET-1"}]}`
	tests := []struct {
		name    string
		ep      endpoint
		body    string
		rules   []rewrite.Rule
		mode    rewriteMode
		want    string // "" means unchanged
		first   []firstUse
		changed bool
	}{
		{name: "claude pending prompt", ep: epMessages, body: claudeFirst, rules: []rewrite.Rule{msgRule("m-1", "ORIG prompt", "NEW prompt", -1)}, mode: rewriteStep,
			want:  strings.Replace(claudeFirst, `"ORIG prompt"`, `"NEW prompt"`, 1),
			first: []firstUse{{id: "m-1", index: 0}}, changed: true},
		{name: "claude pending prompt, not a step", ep: epMessages, body: claudeFirst, rules: []rewrite.Rule{msgRule("m-1", "ORIG prompt", "NEW prompt", -1)}, mode: rewriteApplied},
		{name: "claude bound prompt and tool result", ep: epMessages, body: claudeLater,
			rules: []rewrite.Rule{msgRule("m-1", "ORIG prompt", "NEW prompt", 0), toolRule("toolu_1", "DIGEST", false)}, mode: rewriteStep,
			want:  strings.Replace(strings.Replace(claudeLater, `"ORIG prompt"`, `"NEW prompt"`, 1), `"SECRET-1\n\n<system-reminder>t</system-reminder>"`, `"DIGEST"`, 1),
			first: []firstUse{{id: "t-toolu_1"}}, changed: true},
		{name: "a bound rule applies at its place only", ep: epMessages, body: claudeLater, rules: []rewrite.Rule{msgRule("m-1", "ORIG prompt", "NEW prompt", 2)}, mode: rewriteStep},
		{name: "a pending rule applies to the latest user message only", ep: epMessages, body: claudeLater, rules: []rewrite.Rule{msgRule("m-1", "ORIG prompt", "NEW prompt", -1)}, mode: rewriteStep},
		{name: "a subagent takes only tool results", ep: epMessages, body: claudeLater,
			rules: []rewrite.Rule{msgRule("m-1", "ORIG prompt", "NEW prompt", 0), toolRule("toolu_1", "DIGEST", true)}, mode: rewriteToolResults,
			want: strings.Replace(claudeLater, `"SECRET-1\n\n<system-reminder>t</system-reminder>"`, `"DIGEST"`, 1), changed: true},
		{name: "another call's rule", ep: epMessages, body: claudeLater, rules: []rewrite.Rule{toolRule("toolu_2", "DIGEST", false)}, mode: rewriteStep},
		{name: "a prompt of another text", ep: epMessages, body: claudeFirst, rules: []rewrite.Rule{msgRule("m-1", "ORIG promp", "NEW", -1)}, mode: rewriteStep},
		{name: "codex pending prompt", ep: epResponses, body: codexFirst, rules: []rewrite.Rule{msgRule("m-1", "ORIG prompt", "NEW prompt", -1)}, mode: rewriteStep,
			want: strings.Replace(codexFirst, `"ORIG prompt"`, `"NEW prompt"`, 1), first: []firstUse{{id: "m-1", index: 2}}, changed: true},
		{name: "codex bound prompt and function output", ep: epResponses, body: codexLater,
			rules: []rewrite.Rule{msgRule("m-1", "ORIG prompt", "NEW prompt", 2), toolRule("call_1", "DIGEST", true)}, mode: rewriteStep,
			want: strings.Replace(strings.Replace(codexLater, `"ORIG prompt"`, `"NEW prompt"`, 1), `"output":"SECRET-1"`, `"output":"DIGEST"`, 1), changed: true},
		{name: "a developer message is not the user's", ep: epResponses, body: codexFirst, rules: []rewrite.Rule{msgRule("m-1", "dev", "NEW", 0)}, mode: rewriteStep},
		{name: "a string input", ep: epResponses, body: `{"input":"ORIG prompt","model":"m"}`, rules: []rewrite.Rule{msgRule("m-1", "ORIG prompt", "NEW <&>", -1)}, mode: rewriteStep,
			want: `{"input":"NEW <&>","model":"m"}`, first: []firstUse{{id: "m-1", index: 0}}, changed: true},
		{name: "chat completions", ep: epChat, body: chat, rules: []rewrite.Rule{msgRule("m-1", "ORIG prompt", "NEW", 0), toolRule("c1", "DIGEST", true)}, mode: rewriteStep,
			want: `{"messages":[{"role":"user","content":"NEW"},{"role":"assistant","tool_calls":[{"id":"c1"}]},{"role":"tool","tool_call_id":"c1","content":"DIGEST"}]}`, changed: true},
		{name: "two pending rules for one repeated prompt take one part each", ep: epMessages,
			body:  `{"messages":[{"role":"user","content":[{"type":"text","text":"again"},{"type":"text","text":"again"}]}]}`,
			rules: []rewrite.Rule{msgRule("m-1", "again", "ONE", -1), msgRule("m-2", "again", "TWO", -1)}, mode: rewriteStep,
			want:  `{"messages":[{"role":"user","content":[{"type":"text","text":"ONE"},{"type":"text","text":"TWO"}]}]}`,
			first: []firstUse{{id: "m-1"}, {id: "m-2"}}, changed: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, first, changed, err := applyRewrites(tc.ep, []byte(tc.body), tc.rules, tc.mode)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if want == "" {
				want = tc.body
			}
			if string(out) != want || changed != tc.changed {
				t.Fatalf("got (changed %v)\n%s\nwant (changed %v)\n%s", changed, out, tc.changed, want)
			}
			if !reflect.DeepEqual(first, tc.first) {
				t.Fatalf("first uses %+v, want %+v", first, tc.first)
			}
		})
	}
}

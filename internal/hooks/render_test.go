package hooks

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/pixie-dev/pixie/internal/hookwire"
	"github.com/pixie-dev/pixie/sdk/abi"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

const testHints = "📌 Side hint (inserted by the user while the task is running)\nTake the request below into account in this step, then continue the original task.\n1. use the staging database"

// renderCases are the golden cases: each hook event with each action the point can apply.
var renderCases = []struct {
	name    string
	fixture string
	outcome Outcome
	hints   string
}{
	// UserPromptSubmit → user-message.
	{"user_prompt_submit-none", "user_prompt_submit", Outcome{}, ""},
	{"user_prompt_submit-none-hints", "user_prompt_submit", Outcome{}, testHints},
	{"user_prompt_submit-rejected", "user_prompt_submit", Outcome{Action: ActionRejected, Gate: "instruction-format",
		Reason: "Say which directory and why.", Suggestion: "delete ./victim (build output, safe to remove)",
		Notes: []string{"Matched the destructive-request rule."}}, testHints},
	{"user_prompt_submit-rejected-no-reason", "user_prompt_submit", Outcome{Action: ActionRejected, Gate: "instruction-format"}, ""},
	{"user_prompt_submit-replaced", "user_prompt_submit", Outcome{Action: ActionReplaced, Gate: "instruction-format",
		Text: "Delete the ./victim directory (it only holds build output)."}, testHints},
	{"user_prompt_submit-appended", "user_prompt_submit", Outcome{Action: ActionAppended, Gate: "instruction-format",
		Addition: "Measured: {\"cues\":0,\"bytes\":21}"}, testHints},
	{"user_prompt_submit-note", "user_prompt_submit", Outcome{Notes: []string{"[Translation]\n희생자 디렉터리를 삭제해"}}, ""},

	// PreToolUse → tool-before.
	{"pre_tool_use-none", "pre_tool_use", Outcome{}, testHints},
	{"pre_tool_use-blocked", "pre_tool_use", Outcome{Action: ActionBlocked, Gate: "block-risky-commands",
		Reason: "rm -rf is not allowed; move the directory to ./trash instead.", Notes: []string{"Denied rm -rf ./victim"}}, ""},
	{"pre_tool_use-note", "pre_tool_use", Outcome{Action: ActionNone, Gate: "block-risky-commands",
		Notes: []string{"Looks safe.", "Replacement: rm -r ./victim"}}, ""},
	{"pre_tool_use-error", "pre_tool_use", Outcome{Action: ActionNone, Gate: "block-risky-commands",
		Error: "The gate timed out after 1s"}, ""},
	{"pre_tool_use-replaced-mismatch", "pre_tool_use", Outcome{Action: ActionReplaced, Text: "rm -r ./victim"}, ""},
	{"codex_pre_tool_use-blocked-no-reason", "codex_pre_tool_use", Outcome{Action: ActionBlocked, Gate: "block-risky-commands"}, ""},
	{"pre_tool_use_subagent-blocked", "pre_tool_use_subagent", Outcome{Action: ActionBlocked, Gate: "only-search-tools", Reason: "Use Glob."}, ""},

	// PreToolUse of Agent/Task → agent-message.
	{"pre_tool_use_agent-none", "pre_tool_use_agent", Outcome{}, ""},
	{"pre_tool_use_agent-rejected", "pre_tool_use_agent", Outcome{Action: ActionRejected, Gate: "agent-protocol",
		Reason: "Messages to subagents must name the files to search.", Suggestion: "find every caller of hooks.Map in server/ and cmd/"}, ""},
	{"pre_tool_use_agent-replaced", "pre_tool_use_agent", Outcome{Action: ActionReplaced, Gate: "agent-protocol",
		Text: "TASK: find every caller of Map\nSCOPE: the whole repository\nOUTPUT: file:line list"}, ""},
	{"pre_tool_use_agent-appended", "pre_tool_use_agent", Outcome{Action: ActionAppended, Gate: "agent-protocol",
		Text: "find every caller of Map\n\nAnswer with file:line only.", Addition: "Answer with file:line only.",
		Notes: []string{"Protocol footer added."}}, ""},
	{"codex_spawn_agent-replaced", "codex_spawn_agent", Outcome{Action: ActionReplaced, Text: "TASK: run go test ./...\nOUTPUT: failures only"}, ""},
	{"codex_spawn_agent-rejected", "codex_spawn_agent", Outcome{Action: ActionRejected, Reason: "Name the package.", Suggestion: "run go test ./internal/hooks"}, ""},
	{"codex_subagent_prompt-none", "codex_subagent_prompt", Outcome{}, testHints},
	{"pre_tool_use_task_child-replaced", "pre_tool_use_task_child", Outcome{Action: ActionReplaced, Text: "run go test ./internal/hooks"}, ""},

	// PostToolUse → tool-after.
	{"post_tool_use-none", "post_tool_use", Outcome{}, ""},
	{"post_tool_use-none-hints", "post_tool_use", Outcome{}, testHints},
	{"post_tool_use-blocked", "post_tool_use", Outcome{Action: ActionBlocked, Gate: "secret-scan",
		Reason: "The output contained a credential; it was withheld."}, testHints},
	{"post_tool_use-replaced-structured", "post_tool_use", Outcome{Action: ActionReplaced, Text: "2 files"}, ""},
	{"post_tool_use-appended-structured", "post_tool_use", Outcome{Action: ActionAppended, Addition: "Both files are new.",
		Notes: []string{"Replacement (not applied to a structured result): 2 files"}}, ""},
	{"post_tool_use-appended", "post_tool_use", Outcome{Action: ActionAppended, Gate: "digest",
		Addition: "Both files are empty.", Notes: []string{"digest ran"}}, testHints},
	{"post_tool_use_text-replaced", "post_tool_use_text", Outcome{Action: ActionReplaced, Gate: "digest",
		Text: "Two results, both about Pixie."}, testHints},

	// Stop / SubagentStop → turn-end.
	{"stop-none", "stop", Outcome{}, testHints},
	{"stop-steered", "stop", Outcome{Action: ActionSteered, Gate: "verify-answer",
		Reason: "You claimed the tests pass; run them and report the result.", Notes: []string{"Redo 1 of 1."}}, ""},
	{"stop-steered-no-reason", "stop", Outcome{Action: ActionSteered, Gate: "verify-answer"}, ""},
	{"stop-note", "stop", Outcome{Notes: []string{"[한국어 번역]\n모두 완료했습니다."}}, ""},
	{"stop_hook_active-steered", "stop_hook_active", Outcome{Action: ActionSteered, Gate: "claim-check",
		Reason: "The test results contradict the claim. Check the actual results and report again."}, ""},
	{"subagent_stop-steered", "subagent_stop", Outcome{Action: ActionSteered, Reason: "List the line numbers too."}, ""},

	// Events Pixie does not handle.
	{"notification", "notification", Outcome{}, testHints},
	{"session_start", "session_start", Outcome{}, ""},
}

// TestRenderGolden renders every case for each host: testdata/golden/<case>.json is Claude
// Code's answer, testdata/golden/codex/<case>.json Codex's. Every answer must be one its host
// applies (Accepts).
func TestRenderGolden(t *testing.T) {
	for _, host := range []string{HostClaudeCode, HostCodex} {
		for _, tc := range renderCases {
			t.Run(host+"/"+tc.name, func(t *testing.T) { renderGolden(t, host, tc.name, tc.fixture, tc.outcome, tc.hints) })
		}
	}
}

func renderGolden(t *testing.T, host, name, fix string, outcome Outcome, hints string) {
	ev, err := Map(fixture(t, fix))
	if err != nil {
		t.Fatal(err)
	}
	ev.Host = host
	out := Render(ev, outcome, hints)
	if err := Accepts(ev, out); err != nil {
		t.Errorf("%s would not apply the answer: %v\n%s", host, err, out.Marshal())
	}
	var got bytes.Buffer
	if err := json.Indent(&got, out.Marshal(), "", "  "); err != nil {
		t.Fatal(err)
	}
	got.WriteByte('\n')
	path := filepath.Join("testdata", "golden", name+".json")
	if host == HostCodex {
		path = filepath.Join("testdata", "golden", "codex", name+".json")
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("output differs from %s\ngot:\n%s\nwant:\n%s", path, got.Bytes(), want)
	}
	checkOutputShape(t, ev, out)
}

// checkOutputShape checks the invariants every output must keep: strings within the cap, a
// non-empty reason with every deny and block, the hookEventName of the event.
func checkOutputShape(t *testing.T, ev Event, out Output) {
	t.Helper()
	var v any
	if err := json.Unmarshal(out.Marshal(), &v); err != nil {
		t.Fatalf("output is not JSON: %v", err)
	}
	walkStrings(v, func(s string) {
		if n := len(utf16.Encode([]rune(s))); n > MaxStringLen {
			t.Errorf("a string of the output has %d UTF-16 units, over %d", n, MaxStringLen)
		}
	})
	if out.Decision != "" && (out.Decision != "block" || strings.TrimSpace(out.Reason) == "") {
		t.Errorf("decision %q with reason %q", out.Decision, out.Reason)
	}
	if h := out.HookSpecificOutput; h != nil {
		if h.HookEventName != ev.Name {
			t.Errorf("hookEventName = %q, want %q", h.HookEventName, ev.Name)
		}
		if h.PermissionDecision == "deny" && strings.TrimSpace(h.PermissionDecisionReason) == "" {
			t.Error("deny without a reason")
		}
		if h.PermissionDecision != "" && ev.Name != EventPreToolUse {
			t.Errorf("permissionDecision at %s", ev.Name)
		}
		if h.AdditionalContext != "" && ev.Name == EventStop {
			t.Error("additionalContext at Stop")
		}
	}
}

func walkStrings(v any, f func(string)) {
	switch x := v.(type) {
	case string:
		f(x)
	case map[string]any:
		for k, e := range x {
			f(k)
			walkStrings(e, f)
		}
	case []any:
		for _, e := range x {
			walkStrings(e, f)
		}
	}
}

func TestRenderCaps(t *testing.T) {
	big := strings.Repeat("界", MaxStringLen+5)     // one UTF-16 unit each
	emoji := strings.Repeat("😀", MaxStringLen/2+1) // two UTF-16 units each
	tests := []struct {
		name    string
		fixture string
		outcome Outcome
		hints   string
		field   func(Output) string
	}{
		{"reason", "stop", Outcome{Action: ActionSteered, Reason: big}, "", func(o Output) string { return o.Reason }},
		{"deny reason", "pre_tool_use", Outcome{Action: ActionBlocked, Reason: emoji}, "",
			func(o Output) string { return o.HookSpecificOutput.PermissionDecisionReason }},
		{"hints and addition", "post_tool_use", Outcome{Action: ActionAppended, Addition: big}, testHints,
			func(o Output) string { return o.HookSpecificOutput.AdditionalContext }},
		{"replacement", "post_tool_use_text", Outcome{Action: ActionReplaced, Text: emoji}, "",
			func(o Output) string {
				var r string
				_ = json.Unmarshal(o.HookSpecificOutput.UpdatedToolOutput, &r)
				return r
			}},
		{"notes", "stop", Outcome{Notes: []string{big}}, "", func(o Output) string { return o.SystemMessage }},
		{"agent prompt", "pre_tool_use_agent", Outcome{Action: ActionReplaced, Text: big}, "", func(o Output) string {
			var in struct{ Prompt string }
			_ = json.Unmarshal(o.HookSpecificOutput.UpdatedInput, &in)
			return in.Prompt
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := Map(fixture(t, tt.fixture))
			if err != nil {
				t.Fatal(err)
			}
			out := Render(ev, tt.outcome, tt.hints)
			checkOutputShape(t, ev, out)
			s := tt.field(out)
			if n := len(utf16.Encode([]rune(s))); n > MaxStringLen || n < MaxStringLen-2 {
				t.Errorf("capped string has %d UTF-16 units, want just under %d", n, MaxStringLen)
			}
			if !strings.HasSuffix(s, truncMarker) {
				t.Errorf("capped string does not end with the marker: …%q", s[len(s)-40:])
			}
		})
	}
	t.Run("hints keep priority", func(t *testing.T) {
		ev, _ := Map(fixture(t, "post_tool_use"))
		out := Render(ev, Outcome{Action: ActionAppended, Addition: big}, testHints)
		if !strings.HasPrefix(out.HookSpecificOutput.AdditionalContext, testHints+"\n\n界") {
			t.Error("the hint message is not whole at the start of additionalContext")
		}
	})
}

func TestCapStringEdge(t *testing.T) {
	exact := strings.Repeat("a", MaxStringLen)
	if got := capString(exact); got != exact {
		t.Error("a string of exactly MaxStringLen units was cut")
	}
	over := exact + "a"
	got := capString(over)
	if n := len(utf16.Encode([]rune(got))); n != MaxStringLen || !strings.HasSuffix(got, truncMarker) {
		t.Errorf("a string of MaxStringLen+1 units: got %d units, marker %v", n, strings.HasSuffix(got, truncMarker))
	}
	// A surrogate pair is never split.
	pairs := strings.Repeat("😀", MaxStringLen) // 2·MaxStringLen units
	got = capString(pairs)
	if !strings.HasSuffix(got, truncMarker) || strings.ContainsRune(got, '\uFFFD') {
		t.Error("emoji string cut badly")
	}
}

func TestDeliversHints(t *testing.T) {
	tests := []struct {
		fixture string
		action  string
		want    bool
	}{
		{"user_prompt_submit", ActionNone, true},
		{"user_prompt_submit", ActionAppended, true},
		{"user_prompt_submit", ActionRejected, false},
		{"post_tool_use", ActionNone, true},
		{"post_tool_use", ActionBlocked, true},
		{"pre_tool_use", ActionNone, false},
		{"stop", ActionNone, false},
		{"subagent_stop", ActionNone, false},
		{"notification", ActionNone, false},
	}
	for _, tt := range tests {
		ev, err := Map(fixture(t, tt.fixture))
		if err != nil {
			t.Fatal(err)
		}
		if got := DeliversHints(ev, Outcome{Action: tt.action}); got != tt.want {
			t.Errorf("DeliversHints(%s, %s) = %v, want %v", tt.fixture, tt.action, got, tt.want)
		}
	}
}

// A gate whose "Show the result in the chat" is off (Outcome.Quiet) shows the user nothing: no
// systemMessage with its notes, its error, its suggestion or output its point cannot apply,
// while what the host must apply still goes out.
func TestRenderQuiet(t *testing.T) {
	tests := []struct {
		name    string
		fixture string
		o       Outcome
		check   func(Output) bool
	}{
		{"a note", "stop", Outcome{Notes: []string{"[한국어 번역]\n안녕"}}, func(o Output) bool { return o.Empty() }},
		{"an error passed over", "pre_tool_use", Outcome{Error: "The gate timed out after 1s"}, func(o Output) bool { return o.Empty() }},
		{"a rejection's suggestion", "user_prompt_submit", Outcome{Action: ActionRejected, Reason: "Name the directory.", Suggestion: "delete ./victim/build"},
			func(o Output) bool {
				return o.Decision == "block" && o.Reason == "Name the directory." && o.SystemMessage == ""
			}},
		{"a replacement that cannot apply", "pre_tool_use", Outcome{Action: ActionReplaced, Text: "rm -r ./victim"}, func(o Output) bool { return o.Empty() }},
		{"a block", "pre_tool_use", Outcome{Action: ActionBlocked, Reason: "No.", Notes: []string{"denied"}},
			func(o Output) bool { return specOf(o).PermissionDecision == "deny" && o.SystemMessage == "" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := Map(fixture(t, tc.fixture))
			if err != nil {
				t.Fatal(err)
			}
			loud := Render(ev, tc.o, "")
			if loud.SystemMessage == "" {
				t.Fatalf("the control (Quiet off) shows nothing: %s", loud.Marshal())
			}
			tc.o.Quiet = true
			if got := Render(ev, tc.o, ""); !tc.check(got) {
				t.Fatalf("quiet: %s", got.Marshal())
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	before := Event{Point: abi.PointToolBefore}
	after := Event{Point: abi.PointToolAfter}
	for _, tc := range []struct {
		name    string
		ev      Event
		o       Outcome
		want    string
		stopped bool
	}{
		{"nothing", before, Outcome{Action: ActionNone}, "", false},
		{"blocked", before, Outcome{Action: ActionBlocked, Gate: "risky", Reason: "no"}, "tool-before risky: blocked: no", true},
		{"withheld", after, Outcome{Action: ActionBlocked, Gate: "secrets"}, "tool-after secrets: blocked", true},
		{"input replaced", before, Outcome{Action: ActionReplaced, Gate: "g"}, "tool-before g: input replaced", false},
		{"result replaced", after, Outcome{Action: ActionReplaced, Gate: "g"}, "tool-after g: result replaced", false},
		{"appended", after, Outcome{Action: ActionAppended, Gate: "g"}, "tool-after g: text added for the model", false},
		{"gate error", before, Outcome{Action: ActionNone, Gate: "g", Error: "timed out"}, "tool-before g: gate failed, the step went on: timed out", false},
		{"notes", after, Outcome{Action: ActionNone, Notes: []string{"a", "b"}}, "tool-after: note: a / b", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, stopped := Describe(tc.ev, tc.o)
			if got != tc.want || stopped != tc.stopped {
				t.Fatalf("Describe = %q, %v; want %q, %v", got, stopped, tc.want, tc.stopped)
			}
		})
	}
}

// The command adapter (internal/hookcmd) answers with hookwire.SystemMessage, which must be the
// Output this package renders.
func TestSystemMessageIsAnOutput(t *testing.T) {
	for _, m := range []string{"Pixie could not check this step: <x> & \"y\"", "é\n\t\u2028"} {
		if got, want := string(hookwire.SystemMessage(m)), string(Output{SystemMessage: m}.Marshal()); got != want {
			t.Errorf("%q: %s, Output renders %s", m, got, want)
		}
	}
}

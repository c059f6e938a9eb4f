package pet

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
)

// TestHookCredential: a credential serves the first session it sees and refuses any other; a
// guess, a prefix of it and a revoked credential are refused; its gates' words are kept per
// tool call.
func TestHookCredential(t *testing.T) {
	s := &Service{}
	c, revoke := s.hooks.issue("pet")
	if !strings.HasPrefix(c.token, HookTokenPrefix) || len(c.token) < 40 {
		t.Fatalf("token %q", c.token)
	}
	g, err := s.HookGrant(c.token)
	if err != nil || g.Preset != "pet" {
		t.Fatalf("grant %+v %v", g, err)
	}
	if err := g.Session(""); !errs.Is(err, errs.Invalid) {
		t.Fatalf("no session: %v", err)
	}
	if err := g.Session("s1"); err != nil {
		t.Fatal(err)
	}
	if err := g.Session("s1"); err != nil {
		t.Fatalf("the same session again: %v", err)
	}
	if err := g.Session("s2"); !errs.Is(err, errs.Forbidden) {
		t.Fatalf("another session: %v", err)
	}
	g.Observe("toolu_1", "tool-before risky: blocked: no", true)
	g.Observe("toolu_1", "tool-after x: note: y", false)
	g.Observe("", "ignored", true)
	if n := c.gateOf("toolu_1"); n.text != "tool-before risky: blocked: no; tool-after x: note: y" || !n.stopped {
		t.Fatalf("gate note %+v", n)
	}
	for _, bad := range []string{"", c.token[:len(c.token)-1], c.token + "x", HookTokenPrefix, "pxr_" + c.token[4:], strings.ToUpper(c.token)} {
		if _, err := s.HookGrant(bad); !errs.Is(err, errs.Unauthorized) {
			t.Fatalf("%q accepted: %v", bad, err)
		}
	}
	revoke()
	if _, err := s.HookGrant(c.token); !errs.Is(err, errs.Unauthorized) {
		t.Fatalf("after the run: %v", err)
	}
}

// TestToolCallCaps: inputs and outputs are redacted, then capped at MaxToolCallText (at the cap
// kept whole, one byte over clipped), an input stays valid JSON, and past MaxToolCalls calls
// are counted, not kept.
func TestToolCallCaps(t *testing.T) {
	red := newRedactor(map[string]string{"DSH_PET_TOKEN": "secret-value-9"})
	in := recordInput([]byte(`{"command":"echo secret-value-9 \"quoted\""}`), red)
	if string(in) != `{"command":"echo [$DSH_PET_TOKEN] \"quoted\""}` {
		t.Fatalf("input %s", in)
	}
	if got := recordInput([]byte("*** Begin Patch secret-value-9"), red); string(got) != `"*** Begin Patch [$DSH_PET_TOKEN]"` {
		t.Fatalf("free-form input %s", got)
	}
	if got := recordInput(nil, red); string(got) != "{}" {
		t.Fatalf("no input %s", got)
	}
	// {"a":"…"} is 8 bytes around the value.
	at := recordInput([]byte(`{"a":"`+strings.Repeat("x", MaxToolCallText-8)+`"}`), red)
	over := recordInput([]byte(`{"a":"`+strings.Repeat("x", MaxToolCallText-7)+`"}`), red)
	if len(at) != MaxToolCallText || !json.Valid(at) || at[0] != '{' {
		t.Fatalf("at the cap: %d bytes", len(at))
	}
	var s string
	if !json.Valid(over) || json.Unmarshal(over, &s) != nil || len(s) != MaxToolCallText {
		t.Fatalf("over the cap: %d bytes, %.40s", len(over), over)
	}
	if out := recordOutput(strings.Repeat("y", MaxToolCallText), red); len(out) != MaxToolCallText {
		t.Fatalf("output at the cap: %d", len(out))
	}
	if out := recordOutput(strings.Repeat("y", MaxToolCallText+1)+"secret-value-9", red); len(out) != MaxToolCallText || strings.Contains(out, "secret") {
		t.Fatalf("output over the cap: %d", len(out))
	}
	r := &externalRun{red: red, byID: map[string]int{}, started: map[string]time.Time{}, steps: map[string]int{}}
	for i := 0; i < MaxToolCalls+3; i++ {
		r.addCall("id", "Bash", []byte(`{}`), 1, time.Now())
	}
	if len(r.calls) != MaxToolCalls || r.dropped != 3 || r.calls[MaxToolCalls-1].N != MaxToolCalls {
		t.Fatalf("kept %d, dropped %d", len(r.calls), r.dropped)
	}
}

// TestClaudeStream reads Claude Code's stream-json events as the pinned CLI writes them: one
// step per assistant message, results by tool_use_id (text blocks joined), the result's
// answer and usage, and an error result as the Run's failure.
func TestClaudeStream(t *testing.T) {
	r := &externalRun{byID: map[string]int{}, started: map[string]time.Time{}, steps: map[string]int{}}
	for _, l := range []string{
		`{"type":"system","subtype":"init","session_id":"s"}`,
		`{"type":"assistant","message":{"id":"msg_1","content":[{"type":"text","text":"x"},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}},{"type":"tool_use","id":"toolu_2","name":"Read","input":{"file_path":"/a"}}]}}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"line 1"},{"type":"image"}]},{"type":"tool_result","tool_use_id":"toolu_1","content":"a\nb","is_error":false}]}}`,
		`{"type":"assistant","message":{"id":"msg_2","content":[{"type":"tool_use","id":"toolu_3","name":"Bash","input":{"command":"false"}}]}}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_3","content":"Exit code 1","is_error":true}]}}`,
		`not json`,
		`{"type":"result","subtype":"success","is_error":false,"result":"ANSWER","usage":{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":3}}`,
	} {
		r.claudeLine([]byte(l), false)
	}
	want := []struct {
		step      int
		name, out string
		isErr     bool
	}{{1, "Bash", "a\nb", false}, {1, "Read", "line 1\n[image]", false}, {2, "Bash", "Exit code 1", true}}
	if len(r.calls) != len(want) {
		t.Fatalf("calls %+v", r.calls)
	}
	for i, w := range want {
		c := r.calls[i]
		if c.N != i+1 || c.Step != w.step || c.Name != w.name || c.Output != w.out || c.IsError != w.isErr {
			t.Fatalf("call %d: %+v", i, c)
		}
	}
	if r.output != "ANSWER" || r.usage == nil || r.usage.InputTokens != 15 || r.usage.OutputTokens != 3 || r.failure != "" {
		t.Fatalf("result: %q %+v %q", r.output, r.usage, r.failure)
	}
	r.claudeLine([]byte(`{"type":"result","subtype":"error_max_turns","is_error":true,"result":"","errors":["too many turns"]}`), false)
	if !strings.Contains(r.failure, "error_max_turns") {
		t.Fatalf("failure %q", r.failure)
	}
}

// TestExecutorValidation: the three executors are accepted, anything else is refused; an
// external executor runs instruction Skills only.
func TestExecutorValidation(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		kind     SkillKind
		want     string
		code     errs.Code
	}{
		{"default", "", KindInstructions, ExecutorBuiltin, ""},
		{"builtin", "builtin", KindScript, ExecutorBuiltin, ""},
		{"claude", "claude", KindInstructions, ExecutorClaude, ""},
		{"codex", "codex", KindInstructions, ExecutorCodex, ""},
		{"unknown", "gemini", KindInstructions, "", errs.Invalid},
		{"case matters", "Claude", KindInstructions, "", errs.Invalid},
		{"script on claude", "claude", KindScript, "", errs.Invalid},
		{"wasm on codex", "codex", KindWASM, "", errs.Invalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checkSkillExecutor(tc.in, tc.kind)
			if tc.code != "" {
				if !errs.Is(err, tc.code) {
					t.Fatalf("err %v", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("%q %v", got, err)
			}
		})
	}
}

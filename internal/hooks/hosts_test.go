package hooks

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAcceptsRefuses checks answers each host drops or refuses: the Codex rules are those its
// 0.171.0 binary enforces (its embedded output schemas and parser messages), including the
// answer of the issue that lost a replacement and a hint ("hook: PostToolUse Failed").
func TestAcceptsRefuses(t *testing.T) {
	codex := func(name string) Event { return Event{Name: name, Host: HostCodex, Handled: true} }
	claude := func(name string) Event { return Event{Name: name, Host: HostClaudeCode, Handled: true} }
	str := json.RawMessage(`"x"`)
	tests := []struct {
		name string
		ev   Event
		out  Output
		want string
	}{
		{"codex updatedToolOutput", codex(EventPostToolUse), Output{HookSpecificOutput: &SpecificOutput{HookEventName: EventPostToolUse, UpdatedToolOutput: str, AdditionalContext: "hint"}}, "updatedToolOutput"},
		{"codex ask", codex(EventPreToolUse), Output{HookSpecificOutput: &SpecificOutput{HookEventName: EventPreToolUse, PermissionDecision: "ask"}}, "ask"},
		{"codex allow without input", codex(EventPreToolUse), Output{HookSpecificOutput: &SpecificOutput{HookEventName: EventPreToolUse, PermissionDecision: "allow"}}, "allow"},
		{"deny without reason", claude(EventPreToolUse), Output{HookSpecificOutput: &SpecificOutput{HookEventName: EventPreToolUse, PermissionDecision: "deny", PermissionDecisionReason: " "}}, "non-empty"},
		{"block without reason", codex(EventStop), Output{Decision: "block"}, "non-empty"},
		{"reason without decision", codex(EventPostToolUse), Output{Reason: "why"}, "reason without decision"},
		{"stop with specific output", claude(EventStop), Output{HookSpecificOutput: &SpecificOutput{HookEventName: EventStop}}, "hookSpecificOutput"},
		{"wrong event name", claude(EventPostToolUse), Output{HookSpecificOutput: &SpecificOutput{HookEventName: EventPreToolUse, AdditionalContext: "x"}}, "hookEventName"},
		{"updatedToolOutput at PreToolUse", claude(EventPreToolUse), Output{HookSpecificOutput: &SpecificOutput{HookEventName: EventPreToolUse, UpdatedToolOutput: str}}, "updatedToolOutput"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Accepts(tt.ev, tt.out)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Accepts = %v, want an error about %q", err, tt.want)
			}
		})
	}
	ok := Output{HookSpecificOutput: &SpecificOutput{HookEventName: EventPostToolUse, UpdatedToolOutput: str}}
	if err := Accepts(claude(EventPostToolUse), ok); err != nil {
		t.Fatal(err)
	}
}

func TestWithheldOutputKeepsTheShape(t *testing.T) {
	const notice = "[withheld]"
	tests := []struct{ name, in, want string }{
		{"string", `"secret"`, `"[withheld]"`},
		{"bash", `{"stdout":"secret","stderr":"more","interrupted":false,"isImage":false}`,
			`{"interrupted":false,"isImage":false,"stderr":"","stdout":"[withheld]"}`},
		{"read", `{"type":"text","file":{"filePath":"/a/.env","content":"KEY=1","numLines":1}}`,
			`{"file":{"content":"[withheld]","filePath":"","numLines":1},"type":"text"}`},
		{"mcp blocks", `[{"type":"text","text":"secret"},{"type":"text","text":"more"}]`,
			`[{"text":"[withheld]","type":"text"},{"text":"","type":"text"}]`},
		{"no main field", `{"a":"secret","b":{"c":"x"}}`, `{"a":"[withheld]","b":{"c":""}}`},
		{"no string", `{"n":1}`, `"[withheld]"`},
		{"null", `null`, `"[withheld]"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(withheldOutput(json.RawMessage(tt.in), notice)); got != tt.want {
				t.Errorf("got %s\nwant %s", got, tt.want)
			}
		})
	}
}

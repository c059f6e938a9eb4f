package hooks

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/sdk/abi"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "input", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestMap(t *testing.T) {
	tests := []struct {
		fixture string
		want    Event
	}{
		{"user_prompt_submit", Event{Name: EventUserPromptSubmit, Host: HostClaudeCode, Handled: true, Point: abi.PointUserMessage,
			Agent: AgentRoot, SessionID: "a21be2b5-…", Cwd: "/home/user/repo", Policy: runtime.PolicyWorkspaceWrite,
			TurnKey: "a51fb657-…", PromptID: "a51fb657-…", Target: "delete the victim dir"}},
		{"pre_tool_use", Event{Name: EventPreToolUse, Host: HostClaudeCode, Handled: true, Point: abi.PointToolBefore, Agent: AgentRoot,
			SessionID: "a21be2b5-…", Cwd: "/home/user/repo", Policy: runtime.PolicyWorkspaceWrite, TurnKey: "a51fb657-…", PromptID: "a51fb657-…",
			ToolUseID: "toolu_01", ToolName: "Bash", ToolArgs: `{"command":"rm -rf ./victim","description":"delete"}`,
			Target: `{"command":"rm -rf ./victim","description":"delete"}`}},
		{"pre_tool_use_agent", Event{Name: EventPreToolUse, Host: HostClaudeCode, Handled: true, Point: abi.PointAgentMessage, Agent: AgentChild, PromptField: "prompt",
			SessionID: "a21be2b5-…", Cwd: "/home/user/repo", Policy: runtime.PolicyWorkspaceWrite, TurnKey: "a51fb657-…", PromptID: "a51fb657-…",
			ToolUseID: "toolu_04", ToolName: "Agent", ToolArgs: `{"description":"Find callers","prompt":"find every caller of Map","subagent_type":"Explore"}`,
			Target: "find every caller of Map"}},
		{"pre_tool_use_task_child", Event{Name: EventPreToolUse, Host: HostClaudeCode, Handled: true, Point: abi.PointAgentMessage, Agent: AgentChild, PromptField: "prompt",
			SessionID: "a21be2b5-…", Cwd: "/home/user/repo", Policy: runtime.PolicyFull, TurnKey: "a51fb657-…", PromptID: "a51fb657-…",
			ToolUseID: "toolu_06", ToolName: "Task", ToolArgs: `{"description":"Check","prompt":"check the tests"}`, Target: "check the tests"}},
		{"pre_tool_use_subagent", Event{Name: EventPreToolUse, Host: HostClaudeCode, Handled: true, Point: abi.PointToolBefore, Agent: AgentChild,
			SessionID: "a21be2b5-…", Cwd: "/home/user/repo", Policy: runtime.PolicyReadOnly, TurnKey: "a51fb657-…", PromptID: "a51fb657-…",
			ToolUseID: "toolu_05", ToolName: "Grep", ToolArgs: `{"pattern":"func Map","path":"."}`, Target: `{"pattern":"func Map","path":"."}`}},
		{"post_tool_use", Event{Name: EventPostToolUse, Host: HostClaudeCode, Handled: true, Point: abi.PointToolAfter, Agent: AgentRoot,
			SessionID: "a21be2b5-…", Cwd: "/home/user/repo", Policy: runtime.PolicyWorkspaceWrite, TurnKey: "a51fb657-…", PromptID: "a51fb657-…",
			ToolUseID: "toolu_02", ToolName: "Bash", ToolArgs: `{"command":"ls ./victim","description":"list"}`,
			Target: `{"stdout":"a.txt\nb.txt","stderr":"","interrupted":false,"isImage":false}`, Structured: true}},
		{"post_tool_use_text", Event{Name: EventPostToolUse, Host: HostClaudeCode, Handled: true, Point: abi.PointToolAfter, Agent: AgentRoot,
			SessionID: "a21be2b5-…", Cwd: "/home/user/repo", Policy: runtime.PolicyWorkspaceWrite, TurnKey: "a51fb657-…", PromptID: "a51fb657-…",
			ToolUseID: "toolu_03", ToolName: "mcp__search__web", ToolArgs: `{"query":"pixie gate"}`, Target: "1. Pixie Gate guide\n2. Pixie hints"}},
		{"stop", Event{Name: EventStop, Host: HostClaudeCode, Handled: true, Point: abi.PointTurnEnd, Agent: AgentRoot,
			SessionID: "a21be2b5-…", Cwd: "/home/user/repo", Policy: runtime.PolicyWorkspaceWrite, TurnKey: "a51fb657-…", PromptID: "a51fb657-…",
			Target: "All done."}},
		{"stop_hook_active", Event{Name: EventStop, Host: HostClaudeCode, Handled: true, Point: abi.PointTurnEnd, Agent: AgentRoot,
			SessionID: "a21be2b5-…", Cwd: "/home/user/repo", Policy: runtime.PolicyWorkspaceWrite, TurnKey: "a51fb657-…", PromptID: "a51fb657-…",
			Target: "All done, really.", StopHookActive: true}},
		{"subagent_stop", Event{Name: EventSubagentStop, Host: HostClaudeCode, Handled: true, Point: abi.PointTurnEnd, Agent: AgentChild,
			SessionID: "a21be2b5-…", Cwd: "/home/user/repo", Policy: runtime.PolicyWorkspaceWrite, TurnKey: "a51fb657-…", PromptID: "a51fb657-…",
			Target: "Map is called from server/hooks.go."}},
		{"codex_pre_tool_use", Event{Name: EventPreToolUse, Host: HostCodex, Handled: true, Point: abi.PointToolBefore, Agent: AgentRoot,
			SessionID: "0199a1c2-…", Cwd: "/home/user/repo", Policy: runtime.PolicyWorkspaceWrite, TurnKey: "turn_3",
			ToolUseID: "call_9", ToolName: "Bash", ToolArgs: `{"command":"git push --force"}`, Target: `{"command":"git push --force"}`}},
		{"codex_spawn_agent", Event{Name: EventPreToolUse, Host: HostCodex, Handled: true, Point: abi.PointAgentMessage, Agent: AgentChild, PromptField: "message",
			SessionID: "01a230fd-a766", Cwd: "/home/user/repo", Policy: runtime.PolicyFull, TurnKey: "01a230fd-a77b",
			ToolUseID: "call_0002", ToolName: "spawn_agent", ToolArgs: `{"message":"check the tests"}`, Target: "check the tests"}},
		{"codex_subagent_prompt", Event{Name: EventUserPromptSubmit, Host: HostCodex, Handled: true, Point: abi.PointUserMessage, Agent: AgentChild,
			SessionID: "01a230fd-a766", Cwd: "/home/user/repo", Policy: runtime.PolicyFull, TurnKey: "01a230fd-a7f5", Target: "check the tests"}},
		{"notification", Event{Name: "Notification", Host: HostClaudeCode}},
		{"session_start", Event{Name: "SessionStart", Host: HostClaudeCode}},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			got, err := Map(fixture(t, tt.fixture))
			if err != nil {
				t.Fatal(err)
			}
			if string(got.ToolInput) != tt.want.ToolArgs {
				t.Errorf("ToolInput = %s, want %s", got.ToolInput, tt.want.ToolArgs)
			}
			got.ToolInput, got.ToolResponse = nil, nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Map =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestMapInvalid(t *testing.T) {
	long := strings.Repeat("s", MaxSessionIDLen+1)
	tests := []struct {
		name, input string
		code        errs.Code
		msg         string
	}{
		{"empty", ``, errs.Invalid, "JSON object"},
		{"array", `[]`, errs.Invalid, "JSON object"},
		{"broken", `{"hook_event_name":`, errs.Invalid, "invalid hook input JSON"},
		{"trailing", `{"hook_event_name":"Stop","session_id":"s"} {}`, errs.Invalid, "trailing data"},
		{"no event", `{"session_id":"s"}`, errs.Invalid, "hook_event_name is required"},
		{"no session", `{"hook_event_name":"Stop"}`, errs.Invalid, "session_id is required"},
		{"session star", `{"hook_event_name":"Stop","session_id":"*"}`, errs.Invalid, "reserved"},
		{"session too long", `{"hook_event_name":"Stop","session_id":"` + long + `"}`, errs.Invalid, "over 128 bytes"},
		{"session slash", `{"hook_event_name":"Stop","session_id":"a/b"}`, errs.Invalid, "'/'"},
		{"session control", `{"hook_event_name":"Stop","session_id":"a\u0007b"}`, errs.Invalid, "control characters"},
		{"no prompt", `{"hook_event_name":"UserPromptSubmit","session_id":"s"}`, errs.Invalid, "no prompt"},
		{"no tool", `{"hook_event_name":"PreToolUse","session_id":"s","tool_input":{}}`, errs.Invalid, "no tool_name"},
		{"tool input not object", `{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"Bash","tool_input":"ls"}`, errs.Invalid, "tool_input must be a JSON object"},
		{"no tool response", `{"hook_event_name":"PostToolUse","session_id":"s","tool_name":"Bash","tool_input":{}}`, errs.Invalid, "no tool_response"},
		{"wrong type", `{"hook_event_name":"Stop","session_id":"s","stop_hook_active":"yes"}`, errs.Invalid, "invalid hook input JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Map([]byte(tt.input))
			if err == nil {
				t.Fatal("Map succeeded")
			}
			if errs.CodeOf(err) != tt.code || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("Map error = %v (%s), want %s containing %q", err, errs.CodeOf(err), tt.code, tt.msg)
			}
		})
	}
}

func TestMapSizeLimit(t *testing.T) {
	pad := func(n int) []byte {
		head := `{"hook_event_name":"UserPromptSubmit","session_id":"s","prompt":"`
		tail := `"}`
		return []byte(head + strings.Repeat("x", n-len(head)-len(tail)) + tail)
	}
	if _, err := Map(pad(MaxInputSize)); err != nil {
		t.Fatalf("input of exactly MaxInputSize: %v", err)
	}
	if _, err := Map(pad(MaxInputSize + 1)); errs.CodeOf(err) != errs.TooLarge {
		t.Fatalf("input over MaxInputSize: err = %v, want too_large", err)
	}
}

func TestMapSessionLimit(t *testing.T) {
	in := func(n int) []byte {
		return []byte(`{"hook_event_name":"Stop","session_id":"` + strings.Repeat("s", n) + `"}`)
	}
	if _, err := Map(in(MaxSessionIDLen)); err != nil {
		t.Fatalf("session id of %d bytes: %v", MaxSessionIDLen, err)
	}
	if _, err := Map(in(MaxSessionIDLen + 1)); err == nil {
		t.Fatalf("session id of %d bytes accepted", MaxSessionIDLen+1)
	}
}

func TestMapAgentWithoutPrompt(t *testing.T) {
	ev, err := Map([]byte(`{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"Agent","tool_input":{"description":"x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Point != abi.PointToolBefore || ev.Target != `{"description":"x"}` {
		t.Fatalf("Agent call without prompt mapped to %s %q, want tool-before with the tool_input JSON", ev.Point, ev.Target)
	}
}

func TestPolicyOf(t *testing.T) {
	for mode, want := range map[string]runtime.Policy{
		"plan": runtime.PolicyReadOnly, "bypassPermissions": runtime.PolicyFull,
		"default": runtime.PolicyWorkspaceWrite, "acceptEdits": runtime.PolicyWorkspaceWrite,
		"dontAsk": runtime.PolicyWorkspaceWrite, "": runtime.PolicyWorkspaceWrite, "unknown": runtime.PolicyWorkspaceWrite,
	} {
		if got := PolicyOf(mode); got != want {
			t.Errorf("PolicyOf(%q) = %s, want %s", mode, got, want)
		}
	}
}

// Package hooks owns Pixie's adapter for the hook protocol of Claude Code (and Codex, whose hook
// engine speaks the same wire format): it maps a hook input to a Pixie gate evaluation (Map), turns
// the gate's outcome and the session's pending hints into the hook output (Render), and runs the
// whole exchange against the gate and the hint queue (Service), keeping each session's turn number
// in the store. HTTP lives in the server package (POST /v1/hooks/claude-code); the command adapter
// (`pixie hook claude`) posts the same JSON there. The user guide is docs/agents/claude-code.md.
//
// # Mapping
//
//	hook event                                   point          target                  agent
//	UserPromptSubmit                             user-message   prompt                  child if agent_id, else root
//	PreToolUse, Agent or Task (Claude Code)      agent-message  tool_input.prompt       child (the recipient)
//	PreToolUse, spawn_agent or send_input (Codex) agent-message tool_input.message      child (the recipient)
//	PreToolUse, other tools                      tool-before    tool_input (JSON)       child if agent_id, else root
//	PostToolUse                                  tool-after     tool_response           child if agent_id, else root
//	Stop                                         turn-end       last_assistant_message  root
//	SubagentStop                                 turn-end       last_assistant_message  child
//
// Every other event is unhandled: it is answered {} without touching the store.
//
// An agent-message is always a message to a subagent (the main agent starting or instructing
// one), so its agent is child, whoever sends it: the gate's default target for agent messages
// (Subagents) then runs on it. Codex starts a subagent with a UserPromptSubmit of its own that
// carries agent_id; that prompt is the subagent's, so it is a user-message of agent child.
//
// # Hosts
//
// The input tells the host: Codex sends turn_id (and model) on every event, Claude Code never
// does. A caller that knows better (the route's ?host=, `pixie hook codex`) says so, and that
// wins. The host decides which fields an answer may carry (see Render and Accepts).
//
// A tool result is structured when tool_response is a JSON object or array (Claude Code's
// built-in tools answer objects such as {"stdout":…,"stderr":…}); its target is then the JSON
// text and a hook cannot replace it (the gate turns a replacement into a note), unless the
// host goes through Pixie's model-API proxy (Call.ViaProxy): the proxy then replaces the result
// in the requests the model gets (internal/rewrite). A JSON string is plain text and can be
// replaced through updatedToolOutput. Likewise a replaced prompt, which no host lets a hook
// replace, goes to the model as context beside the original, or through the proxy in its place.
//
// # Through the proxy
//
// Hooks `pixie init` writes with the proxy say so (?proxy=1 on the http hook's URL, --proxy on
// `pixie hook`). Their answers then carry no hints (the proxy adds them to the model request,
// outside the chat history, from a new session's first prompt on), and the replacements above
// are kept as rewrite rules before the answer goes out, for the proxy to make. An Agent/Task call whose tool_input has no
// string prompt is gated as an ordinary tool-before call.
//
// The session's sandbox policy, which legacy scripts run under, comes from permission_mode:
// "plan" is read-only, "bypassPermissions" is full, and every other mode (default, acceptEdits,
// dontAsk, absent or unknown) is workspace-write. The session's cwd is the input's cwd when it is
// an absolute path (otherwise none: scripts then fail under the gate's error policy, WASM guests
// still run).
//
// # Turns
//
// UserPromptSubmit starts a turn and Stop ends it (SubagentStop does not). The turn number is
// kept per session in the store (hook-turn/<session>): it advances at UserPromptSubmit, and also
// when any other event carries a turn key (Codex's turn_id, else Claude Code's prompt_id) that
// differs from the one last seen, so a session whose start Pixie missed still gets a fresh turn
// and a fresh redo budget. A redo asked at Stop keeps the turn open: the agent continues the same
// turn, so the gate's per-turn redo limit counts across the redos.
package hooks

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/hookwire"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// Hosts Pixie answers.
const (
	HostClaudeCode = hookwire.HostClaudeCode
	HostCodex      = hookwire.HostCodex
)

// CheckHost validates a host name from a hook call: empty (inferred from the input),
// "claude-code" (also "claude") or "codex". It returns the canonical name.
func CheckHost(h string) (string, error) {
	switch h {
	case "":
		return "", nil
	case HostClaudeCode, "claude":
		return HostClaudeCode, nil
	case HostCodex:
		return HostCodex, nil
	}
	return "", errs.New(errs.Invalid, "host %q is not claude-code or codex", h)
}

// Hook event names handled by Pixie.
const (
	EventUserPromptSubmit = hookwire.EventUserPromptSubmit
	EventPreToolUse       = hookwire.EventPreToolUse
	EventPostToolUse      = hookwire.EventPostToolUse
	EventStop             = hookwire.EventStop
	EventSubagentStop     = hookwire.EventSubagentStop
)

// Agents of an event (the gate's root/child).
const (
	AgentRoot  = "root"
	AgentChild = "child"
)

// Limits of an input.
const (
	// MaxSessionIDLen caps session_id in bytes (the gate's cap).
	MaxSessionIDLen = 128
	// MaxInputSize caps a hook input in bytes; tool results can be large.
	MaxInputSize = hookwire.MaxInputSize
)

// hookInput is the part of a Claude Code / Codex hook input that Pixie reads. Unknown fields are
// ignored: hosts add fields over time.
type hookInput struct {
	SessionID      string `json:"session_id"`
	TranscriptPath string `json:"transcript_path,omitempty"`
	Cwd            string `json:"cwd"`
	PromptID       string `json:"prompt_id,omitempty"`
	PermissionMode string `json:"permission_mode,omitempty"`
	HookEventName  string `json:"hook_event_name"`
	// TurnID and Model are sent by Codex.
	TurnID string `json:"turn_id,omitempty"`
	Model  string `json:"model,omitempty"`
	// AgentID and AgentType are set inside subagents.
	AgentID   string `json:"agent_id,omitempty"`
	AgentType string `json:"agent_type,omitempty"`

	// UserPromptSubmit.
	Prompt *string `json:"prompt,omitempty"`
	// PreToolUse / PostToolUse.
	ToolName     string          `json:"tool_name,omitempty"`
	ToolInput    json.RawMessage `json:"tool_input,omitempty"`
	ToolUseID    string          `json:"tool_use_id,omitempty"`
	ToolResponse json.RawMessage `json:"tool_response,omitempty"`
	// Stop / SubagentStop.
	StopHookActive       bool    `json:"stop_hook_active,omitempty"`
	LastAssistantMessage *string `json:"last_assistant_message,omitempty"`
}

// Event is a hook input mapped to Pixie's terms.
type Event struct {
	// Name is the hook event name (hook_event_name).
	Name string
	// Host is HostClaudeCode or HostCodex (inferred by Map; see the package comment).
	Host string
	// Handled is false for events Pixie does not gate; only Name is set then.
	Handled bool
	// Point is the gate point (abi.Point…).
	Point string
	// Agent is AgentRoot or AgentChild.
	Agent string
	// SessionID is the host's session id.
	SessionID string
	// Cwd is the session's working directory; Policy its sandbox policy.
	Cwd    string
	Policy runtime.Policy
	// TurnKey identifies the host's turn when it tells one (turn_id, else prompt_id).
	TurnKey string
	// PromptID is the host's id of the user prompt (Claude Code's prompt_id).
	PromptID string
	// ToolName and ToolArgs (the tool_input JSON) are set at tool and agent-message points.
	ToolName string
	ToolArgs string
	// ToolInput is the tool_input object, kept to build updatedInput.
	ToolInput json.RawMessage
	// PromptField is the tool_input field holding an agent-message's text ("prompt" for
	// Claude Code's Agent/Task, "message" for Codex's spawn_agent/send_input).
	PromptField string
	// ToolUseID identifies the tool call (tool_use_id).
	ToolUseID string
	// Target is the text the gate checks.
	Target string
	// ToolResponse is the tool_response JSON, kept to withhold it in its own shape.
	ToolResponse json.RawMessage
	// Structured marks a tool result that is a JSON object or array (see the package comment).
	Structured bool
	// StopHookActive is set at turn-end when the agent is already continuing because of a Stop
	// hook.
	StopHookActive bool
}

// Map decodes a hook input and maps it to an Event. An event Pixie does not handle maps to an
// Event with Handled false and no error. Malformed input fails with an errs.Invalid error.
func Map(input []byte) (Event, error) {
	if len(input) > MaxInputSize {
		return Event{}, errs.New(errs.TooLarge, "hook input is over the %d-byte limit", MaxInputSize)
	}
	trimmed := bytes.TrimSpace(input)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return Event{}, errs.New(errs.Invalid, "hook input must be a JSON object")
	}
	var in hookInput
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(&in); err != nil {
		return Event{}, errs.Wrap(errs.Invalid, err, "invalid hook input JSON: %s", err.Error())
	}
	if dec.More() {
		return Event{}, errs.New(errs.Invalid, "invalid hook input JSON: trailing data after the object")
	}
	return mapInput(in)
}

// mapInput maps a decoded hook input (see Map).
func mapInput(in hookInput) (Event, error) {
	if in.HookEventName == "" {
		return Event{}, errs.New(errs.Invalid, "hook_event_name is required")
	}
	ev := Event{Name: in.HookEventName, Host: HostClaudeCode}
	if in.TurnID != "" {
		ev.Host = HostCodex
	}
	switch in.HookEventName {
	case EventUserPromptSubmit, EventPreToolUse, EventPostToolUse, EventStop, EventSubagentStop:
	default:
		return ev, nil
	}
	if err := checkSession(in.SessionID); err != nil {
		return Event{}, err
	}
	ev.Handled = true
	ev.SessionID = in.SessionID
	if filepath.IsAbs(in.Cwd) {
		ev.Cwd = filepath.Clean(in.Cwd)
	}
	ev.PromptID = in.PromptID
	ev.Policy = PolicyOf(in.PermissionMode)
	ev.TurnKey = in.TurnID
	if ev.TurnKey == "" {
		ev.TurnKey = in.PromptID
	}
	ev.Agent = AgentRoot
	if in.AgentID != "" {
		ev.Agent = AgentChild
	}
	switch in.HookEventName {
	case EventUserPromptSubmit:
		if in.Prompt == nil {
			return Event{}, errs.New(errs.Invalid, "UserPromptSubmit input has no prompt")
		}
		ev.Point, ev.Target = abi.PointUserMessage, *in.Prompt
	case EventPreToolUse, EventPostToolUse:
		if strings.TrimSpace(in.ToolName) == "" {
			return Event{}, errs.New(errs.Invalid, "%s input has no tool_name", in.HookEventName)
		}
		args, err := toolInput(in.ToolInput)
		if err != nil {
			return Event{}, err
		}
		ev.ToolName, ev.ToolArgs, ev.ToolInput, ev.ToolUseID = in.ToolName, string(args), args, in.ToolUseID
		if in.HookEventName == EventPreToolUse {
			ev.Point, ev.Target = abi.PointToolBefore, string(args)
			if field, prompt, ok := agentPrompt(in.ToolName, args); ok {
				ev.Point, ev.Target, ev.Agent, ev.PromptField = abi.PointAgentMessage, prompt, AgentChild, field
			}
			break
		}
		if len(in.ToolResponse) == 0 {
			return Event{}, errs.New(errs.Invalid, "PostToolUse input has no tool_response")
		}
		ev.Point = abi.PointToolAfter
		ev.ToolResponse = in.ToolResponse
		ev.Target, ev.Structured, err = toolResponse(in.ToolResponse)
		if err != nil {
			return Event{}, err
		}
	case EventStop, EventSubagentStop:
		ev.Point, ev.Agent, ev.StopHookActive = abi.PointTurnEnd, AgentRoot, in.StopHookActive
		if in.HookEventName == EventSubagentStop {
			ev.Agent = AgentChild
		}
		if in.LastAssistantMessage != nil {
			ev.Target = *in.LastAssistantMessage
		}
	}
	return ev, nil
}

// PolicyOf maps a permission_mode to the session's sandbox policy (see the package comment).
func PolicyOf(permissionMode string) runtime.Policy {
	switch permissionMode {
	case "plan":
		return runtime.PolicyReadOnly
	case "bypassPermissions":
		return runtime.PolicyFull
	}
	return runtime.PolicyWorkspaceWrite
}

// IsHandled reports whether Pixie gates the hook event name.
func IsHandled(name string) bool { return hookwire.IsHandled(name) }

func checkSession(s string) error {
	switch {
	case s == "":
		return errs.New(errs.Invalid, "session_id is required")
	case s == "*":
		return errs.New(errs.Invalid, "session_id %q is reserved", s)
	case strings.Contains(s, "/"):
		return errs.New(errs.Invalid, "session_id must not contain '/'")
	case len(s) > MaxSessionIDLen:
		return errs.New(errs.Invalid, "session_id is over %d bytes", MaxSessionIDLen)
	case !utf8.ValidString(s):
		return errs.New(errs.Invalid, "session_id is not valid UTF-8")
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return errs.New(errs.Invalid, "session_id must not contain control characters")
	}
	return nil
}

// toolInput returns tool_input as compact JSON; it must be a JSON object (absent means {}).
func toolInput(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return json.RawMessage("{}"), nil
	}
	if raw[0] != '{' {
		return nil, errs.New(errs.Invalid, "tool_input must be a JSON object")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, errs.Wrap(errs.Invalid, err, "invalid tool_input: %s", err.Error())
	}
	return b.Bytes(), nil
}

// agentPrompt returns the message of a subagent call and the field holding it: Claude Code's
// Agent (or Task) with a string tool_input.prompt, or Codex's spawn_agent or send_input with a
// string tool_input.message.
func agentPrompt(tool string, args json.RawMessage) (string, string, bool) {
	field := ""
	switch tool {
	case "Agent", "Task":
		field = "prompt"
	case "spawn_agent", "send_input":
		field = "message"
	default:
		return "", "", false
	}
	var v map[string]json.RawMessage
	if json.Unmarshal(args, &v) != nil {
		return "", "", false
	}
	var text string
	if raw, ok := v[field]; !ok || json.Unmarshal(raw, &text) != nil {
		return "", "", false
	}
	return field, text, true
}

// toolResponse returns the tool-after target: a JSON string's text, or the compact JSON of any
// other value (structured when it is an object or array).
func toolResponse(raw json.RawMessage) (string, bool, error) {
	raw = bytes.TrimSpace(raw)
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", false, errs.Wrap(errs.Invalid, err, "invalid tool_response: %s", err.Error())
		}
		return s, false, nil
	case 'n':
		return "", false, nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "", false, errs.Wrap(errs.Invalid, err, "invalid tool_response: %s", err.Error())
	}
	return b.String(), raw[0] == '{' || raw[0] == '[', nil
}

package hooks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf16"

	"github.com/pixie-dev/pixie/sdk/abi"
)

// Actions a gate applied (as in the run records).
const (
	ActionNone     = "none"
	ActionReplaced = "replaced"
	ActionAppended = "appended"
	ActionRejected = "rejected" // message points: the input is rejected
	ActionBlocked  = "blocked"  // tool points: the call or its result is blocked
	ActionSteered  = "steered"  // turn end: the agent is asked to redo its answer
)

// MaxStringLen is Claude Code's cap on every string of a hook output, in UTF-16 code units (the
// unit JavaScript's String.length counts, so the cap holds whatever the text's script).
const MaxStringLen = 10_000

// truncMarker ends a string cut to MaxStringLen.
const truncMarker = "\n[… truncated by Pixie]"

// Outcome is what the gate decided at one event, in the terms the hook output needs (the
// fields of the gate's result that reach the host).
type Outcome struct {
	// Action is one of the Action constants; empty means ActionNone.
	Action string
	// Gate names the gate that decided (used in default messages).
	Gate string
	// Text is the final text: the replacement (replaced), or the target with the addition
	// (appended at message points).
	Text string
	// Addition is the text sent along with the target (appended).
	Addition string
	// Reason is why it stopped (rejected, blocked, steered).
	Reason string
	// Suggestion is the replacement offered with a rejection at a message point.
	Suggestion string
	// Notes are shown only to the user.
	Notes []string
	// Error is a gate failure the "continue" error policy let pass; the user is told.
	Error string
}

// Output is a Claude Code hook output: the JSON object a command hook prints on stdout and an
// http hook answers with.
type Output struct {
	// SystemMessage is shown to the user.
	SystemMessage string `json:"systemMessage,omitempty"`
	// Decision "block" with Reason: the prompt is rejected (UserPromptSubmit), the tool result
	// is blocked (PostToolUse), or the agent is asked to continue (Stop, SubagentStop).
	Decision string `json:"decision,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// HookSpecificOutput carries the event's own fields.
	HookSpecificOutput *SpecificOutput `json:"hookSpecificOutput,omitempty"`
}

// SpecificOutput is hookSpecificOutput.
type SpecificOutput struct {
	HookEventName string `json:"hookEventName"`
	// PermissionDecision is "allow" or "deny" (PreToolUse); a deny always has a non-empty
	// PermissionDecisionReason, which the model reads.
	PermissionDecision       string `json:"permissionDecision,omitempty"`
	PermissionDecisionReason string `json:"permissionDecisionReason,omitempty"`
	// UpdatedInput replaces the tool input (PreToolUse).
	UpdatedInput json.RawMessage `json:"updatedInput,omitempty"`
	// AdditionalContext reaches the model with the step (UserPromptSubmit, PreToolUse,
	// PostToolUse).
	AdditionalContext string `json:"additionalContext,omitempty"`
	// UpdatedToolOutput replaces the tool result (PostToolUse).
	UpdatedToolOutput *string `json:"updatedToolOutput,omitempty"`
}

// Empty reports whether the output decides nothing and says nothing ({}).
func (o Output) Empty() bool {
	return o.SystemMessage == "" && o.Decision == "" && o.Reason == "" && o.HookSpecificOutput == nil
}

// DeliversHints reports whether the answer to ev with outcome o carries the session's pending
// hints: at UserPromptSubmit (unless the prompt is rejected, which discards the step) and at
// PostToolUse, the agent's next step.
func DeliversHints(ev Event, o Outcome) bool {
	switch ev.Name {
	case EventUserPromptSubmit:
		return o.Action != ActionRejected
	case EventPostToolUse:
		return true
	}
	return false
}

// Render builds the hook output for ev from the gates' outcome and the rendered hint message
// (empty when no hints were taken; ignored where DeliversHints is false). Every string of the
// result is within MaxStringLen, and every deny or block carries a non-empty reason (Codex
// refuses a deny without one).
func Render(ev Event, o Outcome, hints string) Output {
	if !ev.Handled {
		return Output{}
	}
	if !DeliversHints(ev, o) {
		hints = ""
	}
	var (
		out     Output
		spec    = SpecificOutput{HookEventName: ev.Name}
		context []string
		notice  []string
	)
	if hints != "" {
		context = append(context, hints)
	}
	action := o.Action
	if action == "" {
		action = ActionNone
	}
	// asNote turns output the point cannot apply into a note, as the gate's point table does
	// (the gate never sends such output; this keeps a mismatch visible rather than lost).
	asNote := func() {
		switch action {
		case ActionReplaced:
			notice = append(notice, "Replacement (it cannot apply here):\n"+o.Text)
		case ActionAppended:
			notice = append(notice, "Addition (it cannot apply here):\n"+o.Addition)
		}
	}
	switch ev.Point {
	case abi.PointUserMessage:
		switch action {
		case ActionRejected:
			out.Decision, out.Reason = "block", stopReason(o, "Your message was rejected")
			if o.Suggestion != "" {
				notice = append(notice, "Suggested message:\n"+o.Suggestion)
			}
		case ActionReplaced:
			// Claude Code cannot replace a prompt: the replacement reaches the model as context
			// that supersedes the original, and the user is told.
			context = append(context, "Pixie rewrote the user's message. Treat the text below as the user's message in place of the original one:\n\n"+o.Text)
			notice = append(notice, "Your message was rewritten for the agent:\n"+o.Text)
		case ActionAppended:
			context = append(context, o.Addition)
		}
	case abi.PointAgentMessage:
		switch action {
		case ActionRejected:
			reason := stopReason(o, "The message to the subagent was rejected")
			if o.Suggestion != "" {
				reason += "\n\nSuggested message:\n" + o.Suggestion
			}
			spec.PermissionDecision, spec.PermissionDecisionReason = "deny", reason
		case ActionReplaced, ActionAppended:
			prompt := o.Text
			if action == ActionAppended && prompt == "" {
				prompt = ev.Target + "\n\n" + o.Addition
			}
			if in, err := withPrompt(ev.ToolInput, capString(prompt)); err == nil {
				spec.PermissionDecision, spec.UpdatedInput = "allow", in
			} else {
				asNote()
			}
		}
	case abi.PointToolBefore:
		switch action {
		case ActionBlocked, ActionRejected:
			spec.PermissionDecision, spec.PermissionDecisionReason = "deny", stopReason(o, "The tool call was denied")
		default:
			asNote()
		}
	case abi.PointToolAfter:
		switch action {
		case ActionBlocked, ActionRejected:
			out.Decision, out.Reason = "block", stopReason(o, "The tool result was blocked")
		case ActionReplaced:
			if ev.Structured {
				asNote()
				break
			}
			r := capString(o.Text)
			spec.UpdatedToolOutput = &r
		case ActionAppended:
			context = append(context, o.Addition)
		}
	case abi.PointTurnEnd:
		switch action {
		case ActionSteered, ActionBlocked, ActionRejected:
			out.Decision, out.Reason = "block", stopReason(o, "Your answer needs another pass")
		default:
			asNote()
		}
	}
	if o.Error != "" && action == ActionNone {
		g := "A Pixie gate"
		if o.Gate != "" {
			g = fmt.Sprintf("The gate %q", o.Gate)
		}
		notice = append(notice, g+" failed and was passed over: "+o.Error)
	}
	for _, n := range o.Notes {
		if n = strings.TrimSpace(n); n != "" {
			notice = append(notice, n)
		}
	}
	if len(notice) > 0 {
		out.SystemMessage = capString("Pixie: " + strings.Join(notice, "\n\n"))
	}
	if len(context) > 0 {
		spec.AdditionalContext = capString(strings.Join(context, "\n\n"))
	}
	out.Reason = capString(out.Reason)
	spec.PermissionDecisionReason = capString(spec.PermissionDecisionReason)
	if spec.PermissionDecision != "" || len(spec.UpdatedInput) > 0 || spec.AdditionalContext != "" || spec.UpdatedToolOutput != nil {
		out.HookSpecificOutput = &spec
	}
	return out
}

// stopReason is the outcome's reason, or a default naming the gate: a deny or block never goes
// out without a reason.
func stopReason(o Outcome, what string) string {
	if r := strings.TrimSpace(o.Reason); r != "" {
		return r
	}
	if o.Gate != "" {
		return fmt.Sprintf("%s by the Pixie gate %q.", what, o.Gate)
	}
	return what + " by a Pixie gate."
}

// withPrompt returns tool_input with its "prompt" replaced, other fields unchanged.
func withPrompt(toolInput json.RawMessage, prompt string) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(toolInput, &m); err != nil {
		return nil, err
	}
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	p, err := marshalNoEscape(prompt)
	if err != nil {
		return nil, err
	}
	m["prompt"] = p
	return marshalNoEscape(m)
}

// marshalNoEscape marshals v without HTML escaping (hook outputs are read by programs, and
// escaping would change lengths the cap was computed on).
func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// Marshal encodes an output as the JSON a hook answers with ({} when empty).
func (o Output) Marshal() []byte {
	raw, err := marshalNoEscape(o)
	if err != nil { // cannot happen: only strings and raw JSON built by this package
		return []byte("{}")
	}
	return raw
}

// utf16Len is the length of s in UTF-16 code units.
func utf16Len(s string) int {
	n := 0
	for _, r := range s { // range yields only valid runes (invalid bytes as U+FFFD)
		n += utf16.RuneLen(r)
	}
	return n
}

// capString cuts s to MaxStringLen UTF-16 code units, ending it with a marker when cut.
func capString(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf16Len(s) <= MaxStringLen {
		return s
	}
	budget := MaxStringLen - utf16Len(truncMarker)
	n := 0
	for i, r := range s {
		w := utf16.RuneLen(r)
		if n+w > budget {
			return s[:i] + truncMarker
		}
		n += w
	}
	return s
}

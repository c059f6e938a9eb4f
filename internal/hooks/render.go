package hooks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/pixie-dev/pixie/internal/clip"
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
	// Quiet is set when the gate that ran has "Show the result in the chat" off: nothing of its
	// result is shown to the user (no systemMessage: not its notes, error or suggestion); its
	// record keeps them. What the host must apply (a block, a reason, a replacement) still goes.
	Quiet bool
	// ByProxy is set when the model-API proxy makes the replacement (Text) in the requests the
	// model gets (Config.Rewrites): a user's message, or a structured tool result, which the
	// host itself cannot replace. The answer then carries nothing of it to the model.
	ByProxy bool
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
	// UpdatedToolOutput replaces the tool result (PostToolUse; Claude Code only). Claude Code
	// applies it only when it has the shape of the tool's own result (a string for a string
	// result, the same object for a built-in tool's object).
	UpdatedToolOutput json.RawMessage `json:"updatedToolOutput,omitempty"`
}

// Empty reports whether the output decides nothing and says nothing ({}).
func (o Output) Empty() bool {
	return o.SystemMessage == "" && o.Decision == "" && o.Reason == "" && o.HookSpecificOutput == nil
}

// DeliversHints reports whether the answer to ev with outcome o carries the session's pending
// hints: at UserPromptSubmit (unless the prompt is rejected, which discards the step) and at
// PostToolUse, the agent's next step, and only for the main agent (a subagent's steps do not
// consume the session's hints). Both hosts apply additionalContext there, also beside a block.
func DeliversHints(ev Event, o Outcome) bool {
	if ev.Agent != AgentRoot {
		return false
	}
	switch ev.Name {
	case EventUserPromptSubmit:
		return o.Action != ActionRejected
	case EventPostToolUse:
		return true
	}
	return false
}

// Render builds the hook output for ev from the gates' outcome and the rendered hint message
// (empty when no hints were taken; ignored where DeliversHints is false), in the fields ev.Host
// accepts (Accepts holds for every result). Every string of the result is within
// MaxStringLen, and every deny or block carries a non-empty reason.
//
// Where the hosts differ (docs/agents/):
//   - tool-after, stop: both block with the reason. Codex then sends the model the reason in
//     place of the result; Claude Code would send both, so Pixie also replaces the result
//     (updatedToolOutput, in the result's own shape, which Claude Code requires) with a notice.
//   - tool-after, replacement: Claude Code takes updatedToolOutput; Codex accepts no
//     replacement of a built-in tool's result, but sends a block's reason to the model in place
//     of the result, so the replacement goes out as the reason of a block.
//   - a stop's suggested replacement at a message point never reaches the model: it is shown to
//     the user (systemMessage).
//   - a replacement the model-API proxy makes (Outcome.ByProxy: a prompt, a structured tool
//     result) is not in the answer at all; the user is told.
//   - with Outcome.Quiet (the gate's "Show the result in the chat" off) there is no
//     systemMessage of the gate's result.
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
	suggest := func() {
		if o.Suggestion != "" {
			notice = append(notice, "Suggested message (not sent to the agent):\n"+o.Suggestion)
		}
	}
	switch ev.Point {
	case abi.PointUserMessage:
		switch action {
		case ActionRejected:
			out.Decision, out.Reason = "block", stopReason(o, "Your message was rejected")
			suggest()
		case ActionReplaced:
			// Neither host can replace a prompt: through the proxy the model gets the
			// replacement in place of the prompt; otherwise it reaches the model as context
			// that supersedes the original. The user is told either way.
			if !o.ByProxy {
				context = append(context, "Pixie rewrote the user's message. Treat the text below as the user's message in place of the original one:\n\n"+o.Text)
			}
			notice = append(notice, "Your message was rewritten for the agent:\n"+o.Text)
		case ActionAppended:
			context = append(context, o.Addition)
		}
	case abi.PointAgentMessage:
		switch action {
		case ActionRejected:
			spec.PermissionDecision, spec.PermissionDecisionReason = "deny", stopReason(o, "The message to the subagent was rejected")
			suggest()
		case ActionReplaced, ActionAppended:
			prompt := o.Text
			if action == ActionAppended && prompt == "" {
				prompt = ev.Target + "\n\n" + o.Addition
			}
			if in, err := withPrompt(ev.ToolInput, ev.PromptField, capString(prompt)); err == nil {
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
			if ev.Host != HostCodex {
				spec.UpdatedToolOutput = withheldOutput(ev.ToolResponse, "[Pixie withheld this tool result: "+capString(out.Reason)+"]")
			}
		case ActionReplaced:
			if ev.Structured && o.ByProxy {
				// The proxy puts the replacement in place of the result in the model's requests;
				// the host still shows the original.
				notice = append(notice, "The agent gets this in place of the tool result:\n"+o.Text)
				break
			}
			if ev.Structured {
				asNote()
				break
			}
			r := capString(o.Text)
			if ev.Host == HostCodex {
				if strings.TrimSpace(r) == "" {
					r = "[Pixie replaced this tool result with nothing]"
				}
				out.Decision, out.Reason = "block", r
				break
			}
			spec.UpdatedToolOutput = stringJSON(r)
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
	if len(notice) > 0 && !o.Quiet {
		out.SystemMessage = capString("Pixie: " + strings.Join(notice, "\n\n"))
	}
	if len(context) > 0 {
		spec.AdditionalContext = capString(strings.Join(context, "\n\n"))
	}
	out.Reason = capString(out.Reason)
	spec.PermissionDecisionReason = capString(spec.PermissionDecisionReason)
	if spec.PermissionDecision != "" || len(spec.UpdatedInput) > 0 || spec.AdditionalContext != "" || len(spec.UpdatedToolOutput) > 0 {
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

// withPrompt returns tool_input with its field (prompt or message) replaced, other fields
// unchanged.
func withPrompt(toolInput json.RawMessage, field, prompt string) (json.RawMessage, error) {
	if field == "" {
		field = "prompt"
	}
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
	m[field] = p
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

// capString cuts s to MaxStringLen UTF-16 code units, ending it with a marker when cut.
func capString(s string) string {
	return clip.UTF16Within(strings.ToValidUTF8(s, "\uFFFD"), MaxStringLen, truncMarker)
}

// stringJSON is s as a JSON string.
func stringJSON(s string) json.RawMessage {
	raw, err := marshalNoEscape(s)
	if err != nil {
		return json.RawMessage(`""`)
	}
	return raw
}

// keptKeys are fields whose strings say what a value is rather than carry its content; they
// keep their value when a result is withheld, so the result keeps the shape its tool declares
// (a discriminator such as Read's "type":"text" must survive).
var keptKeys = map[string]bool{"type": true, "kind": true, "subtype": true, "mimeType": true, "media_type": true, "encoding": true}

// mainKeys are the fields that carry a result's text, best first: the notice goes into the
// best-ranked one found at any depth (ties: breadth first).
var mainKeys = []string{"stdout", "content", "output", "result", "text"}

// withheldOutput is a tool result with its content taken out, in the result's own shape: a
// string result becomes the notice; in an object or array every string but the keptKeys ones
// is emptied and the notice goes into the main field (mainKeys), else into the first emptied
// string (breadth first). A result with no string to carry it becomes the notice.
func withheldOutput(raw json.RawMessage, notice string) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return stringJSON(notice)
	}
	if _, ok := v.(string); ok || v == nil {
		return stringJSON(notice)
	}
	var slots []func(string) // setters of the emptied strings, breadth first
	var main func(string)
	mainRank := len(mainKeys)
	queue := []any{v}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		switch x := cur.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				switch val := x[k].(type) {
				case string:
					if keptKeys[k] {
						continue
					}
					m, key := x, k
					set := func(s string) { m[key] = s }
					set("")
					slots = append(slots, set)
					for r, mk := range mainKeys {
						if mk == k && r < mainRank {
							main, mainRank = set, r
						}
					}
				case map[string]any, []any:
					queue = append(queue, val)
				}
			}
		case []any:
			for i, e := range x {
				switch e.(type) {
				case string:
					a, idx := x, i
					set := func(s string) { a[idx] = s }
					set("")
					slots = append(slots, set)
				case map[string]any, []any:
					queue = append(queue, e)
				}
			}
		}
	}
	switch {
	case main != nil:
		main(notice)
	case len(slots) > 0:
		slots[0](notice)
	default:
		return stringJSON(notice)
	}
	out, err := marshalNoEscape(v)
	if err != nil {
		return stringJSON(notice)
	}
	return out
}

// Describe says in a few words what the gates did at ev ("tool-before block-risky-commands:
// blocked: Blocked: force push. …"), and whether the step was stopped (a tool call that did not
// run, a result withheld, an agent message rejected); "" when they did nothing worth a word.
func Describe(ev Event, o Outcome) (string, bool) {
	what := ev.Point
	if o.Gate != "" {
		what += " " + o.Gate
	}
	with := func(s, reason string) string {
		if reason != "" {
			return s + ": " + reason
		}
		return s
	}
	switch o.Action {
	case ActionBlocked, ActionRejected:
		return with(what+": "+o.Action, o.Reason), true
	case ActionReplaced:
		if ev.Point == abi.PointToolAfter {
			return what + ": result replaced", false
		}
		return what + ": input replaced", false
	case ActionAppended:
		return what + ": text added for the model", false
	}
	switch {
	case o.Error != "":
		return with(what+": gate failed, the step went on", o.Error), false
	case len(o.Notes) > 0:
		return with(what+": note", strings.Join(o.Notes, " / ")), false
	}
	return "", false
}

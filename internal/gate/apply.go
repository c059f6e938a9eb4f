package gate

import (
	"fmt"

	"github.com/pixie-dev/pixie/sdk/abi"
)

// Actions applied to the target.
const (
	ActionReplaced = "replaced" // the target was replaced (Text holds the new text)
	ActionAppended = "appended" // an addition is sent along with the target
	ActionRejected = "rejected" // an input (instruction or agent message) was rejected
	ActionBlocked  = "blocked"  // a tool call was denied, or a tool result was blocked
	ActionSteered  = "steered"  // the agent was asked to redo its answer
	ActionNone     = "none"     // the target goes on unchanged
)

// Who concluded a run.
const (
	ByPixie         = "pixie"           // the Pixie model answered the task
	ByHookScript    = "hook-script"     // the rule exited 11 (or failed)
	BySkippedByHook = "skipped-by-hook" // the rule exited 10
)

// decision is what a point does with a gate output.
type decision struct {
	Action     string
	Text       string // the final text
	Addition   string // the addition sent along (appended), also when Text cannot carry it
	Reason     string
	Suggestion string
	Notes      []string
	// redo is set when the decision asks for a redo, which the per-turn limit may refuse.
	redo bool
}

// applyInput is what the table needs besides the output.
type applyInput struct {
	Point      string
	Target     string
	Structured bool // a tool result that carries a structured value
	// ReplaceStructured: the caller can replace a structured result as a whole.
	ReplaceStructured bool
	ConfirmReplace    bool
	GateName          string
}

// joinAddition is the target with an addition sent along.
func joinAddition(text, add string) string {
	if text == "" {
		return add
	}
	return text + "\n\n" + add
}

// apply applies a gate output at a point, by the table in docs/gates.md. It is pure: the
// redo limit is applied by the caller (see redoLimitReached).
func apply(in applyInput, o abi.GateOutput) (d decision) {
	d = decision{Action: ActionNone, Text: in.Target}
	if o.Note != "" {
		d.Notes = append(d.Notes, o.Note)
	}
	asNote := func(label, s string) {
		if s != "" {
			d.Notes = append(d.Notes, label+": "+s)
		}
	}
	if o.Verdict == VerdictStop {
		d.Reason = o.Reason
		if d.Reason == "" {
			d.Reason = fmt.Sprintf("Stopped by the gate %q.", in.GateName)
		}
		switch in.Point {
		case abi.PointUserMessage, abi.PointAgentMessage:
			d.Action = ActionRejected
			d.Suggestion = o.Replace
			asNote("Addition", o.Append)
		case abi.PointToolBefore, abi.PointToolAfter:
			d.Action = ActionBlocked
			asNote("Replacement", o.Replace)
			asNote("Addition", o.Append)
		case abi.PointTurnEnd:
			d.Action = ActionSteered
			d.redo = true
			asNote("Replacement", o.Replace)
			asNote("Addition", o.Append)
		}
		return d
	}
	// pass, or no verdict: a reason has no stop to explain, so it becomes a note (output a
	// point cannot apply is a note), except where a confirmation uses it below.
	reasonUsed := false
	defer func() {
		if o.Reason != "" && !reasonUsed {
			d.Notes = append(d.Notes, "Reason: "+o.Reason)
		}
	}()
	switch in.Point {
	case abi.PointUserMessage, abi.PointAgentMessage:
		switch {
		case o.Replace != "" && in.ConfirmReplace:
			d.Action = ActionRejected
			d.Suggestion = o.Replace
			d.Reason, reasonUsed = o.Reason, true
			if d.Reason == "" {
				d.Reason = "Pixie suggests a replacement; confirm it to send it."
			}
			asNote("Addition", o.Append)
		case o.Replace != "":
			d.Action = ActionReplaced
			d.Text = o.Replace
			if o.Append != "" {
				d.Text = joinAddition(o.Replace, o.Append)
				d.Addition = o.Append
			}
		case o.Append != "":
			d.Action = ActionAppended
			d.Text = joinAddition(in.Target, o.Append)
			d.Addition = o.Append
		}
	case abi.PointToolBefore, abi.PointTurnEnd:
		asNote("Replacement", o.Replace)
		asNote("Addition", o.Append)
	case abi.PointToolAfter:
		switch {
		case o.Replace != "" && in.Structured && !in.ReplaceStructured:
			asNote("Replacement (not applied to a structured result)", o.Replace)
			if o.Append != "" {
				d.Action = ActionAppended
				d.Addition = o.Append
			}
		case o.Replace != "":
			d.Action = ActionReplaced
			d.Text = o.Replace
			if o.Append != "" {
				d.Text = joinAddition(o.Replace, o.Append)
				d.Addition = o.Append
			}
		case o.Append != "":
			d.Action = ActionAppended
			d.Addition = o.Append
			if !in.Structured {
				d.Text = joinAddition(in.Target, o.Append)
			}
		}
	}
	return d
}

// redoLimitReached turns a redo the per-turn limit refuses into a pass with a note.
func redoLimitReached(d decision, limit int) decision {
	d.Action = ActionNone
	d.redo = false
	d.Notes = append(d.Notes, fmt.Sprintf("Redo limit reached (%d per turn); the answer was not sent back: %s", limit, d.Reason))
	d.Reason = ""
	return d
}

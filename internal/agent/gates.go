package agent

import (
	"context"
	"encoding/json"

	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/runtime"
)

// Gate points a Run reaches (the names of internal/gate and the pixie-gate spec).
const (
	PointToolBefore = "tool-before"
	PointToolAfter  = "tool-after"
)

// Actions a gate applied (internal/gate's Result.Action).
const (
	ActionNone     = "none"
	ActionBlocked  = "blocked"  // tool-before: the call is denied; tool-after: the result is withheld
	ActionReplaced = "replaced" // tool-after: Text replaces the result
	ActionAppended = "appended" // tool-after: Addition goes along with the result (Text holds both)
)

// Gates checks a Run's tool calls and their results: the gate pipeline, as any agent host's
// tool calls pass through it. internal/app adapts *gate.Service to it.
type Gates interface {
	Check(ctx context.Context, c GateCheck) (GateVerdict, error)
}

// GateSession is the session the gates see.
type GateSession struct {
	// ID is the executor session; Preset the preset whose gates apply.
	ID     string
	Preset string
	// Cwd is the Run's root; Policy its sandbox policy.
	Cwd    string
	Policy runtime.Policy
}

// GateCheck is one evaluation: a tool point reached by a Run.
type GateCheck struct {
	Point   string
	Session GateSession
	Turn    int
	// Tool, Args and CallID are the call.
	Tool   string
	Args   json.RawMessage
	CallID string
	// Target is what the gate checks: the arguments JSON before the call, the result text after.
	Target string
}

// GateVerdict is what the gates applied, by the point's table (docs/gates.md).
type GateVerdict struct {
	// Action is none, blocked, replaced or appended.
	Action string
	// Text is the result the model gets after a replacement or an addition.
	Text string
	// Addition is the text added to the result.
	Addition string
	// Reason is why the call was denied or the result withheld.
	Reason string
	// Notes are shown only to the person (kept in the record).
	Notes []string
	// Gate names the gate that ran.
	Gate string
}

func (cfg Config) check(point string, c model.ToolCall, args json.RawMessage, target string) GateCheck {
	return GateCheck{Point: point, Session: cfg.Session, Turn: cfg.Turn, Tool: c.Name, Args: args, CallID: c.ID, Target: target}
}

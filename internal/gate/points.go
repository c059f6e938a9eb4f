package gate

import "github.com/pixie-dev/pixie/sdk/abi"

// PointInfo is one row of the point table as people read it: a point's name in the guide's
// words and what each of the five output fields does there. apply implements the table;
// TestPointTableMatchesApply keeps the words in step with it. Studio renders the table from
// GET /v1/gates/points instead of keeping a copy.
type PointInfo struct {
	ID    string     `json:"id"`    // the point, as in abi.Points
	Label string     `json:"label"` // when the gate runs, in plain words
	Apply PointApply `json:"apply"`
}

// PointApply says what each output field does at a point.
type PointApply struct {
	Stop        string `json:"stop"`        // a stop verdict with its reason
	Replacement string `json:"replacement"` // replace
	Addition    string `json:"addition"`    // append
	Note        string `json:"note"`        // note (shown only to the person)
}

// PointTable returns the point table in pipeline order (abi.Points). The slice is the caller's.
func PointTable() []PointInfo {
	return []PointInfo{
		{ID: abi.PointUserMessage, Label: "You send an instruction", Apply: PointApply{
			Stop:        "Input rejected; the run record keeps a restore card",
			Replacement: "Message replaced (optional confirmation)",
			Addition:    "Sent along",
			Note:        "Recorded",
		}},
		{ID: abi.PointAgentMessage, Label: "Agents message each other", Apply: PointApply{
			Stop:        "Input rejected",
			Replacement: "Message replaced",
			Addition:    "Sent along",
			Note:        "Recorded",
		}},
		{ID: abi.PointToolBefore, Label: "Before a tool runs", Apply: PointApply{
			Stop:        "Execution denied (the reason reaches the agent)",
			Replacement: "As a note",
			Addition:    "As a note",
			Note:        "Recorded",
		}},
		{ID: abi.PointToolAfter, Label: "A tool result arrives", Apply: PointApply{
			Stop:        "Result blocked (the reason reaches the agent)",
			Replacement: "Result replaced (a structured result only through the model-API proxy)",
			Addition:    "Sent along",
			Note:        "Recorded",
		}},
		{ID: abi.PointTurnEnd, Label: "The agent finishes its answer", Apply: PointApply{
			Stop:        "Asked to redo it with the reason (per-turn limit)",
			Replacement: "As a note",
			Addition:    "As a note",
			Note:        "Recorded",
		}},
	}
}

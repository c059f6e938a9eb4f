package gate

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/sdk/abi"
)

// TestPointTableMatchesApply keeps the words of the point table (what Studio shows) in step
// with what apply does: each field's wording must name the action apply takes for it.
func TestPointTableMatchesApply(t *testing.T) {
	table := PointTable()
	ids := make([]string, len(table))
	for i, p := range table {
		ids[i] = p.ID
	}
	if !slices.Equal(ids, abi.Points) {
		t.Fatalf("the table's points %v, want abi.Points %v in order", ids, abi.Points)
	}
	// words says which wording an outcome of apply must have.
	words := func(d decision, note string) []string {
		switch d.Action {
		case ActionRejected:
			return []string{"Input rejected"}
		case ActionBlocked:
			return []string{"denied", "blocked"}
		case ActionSteered:
			return []string{"redo"}
		case ActionReplaced:
			return []string{"replaced"}
		case ActionAppended:
			return []string{"Sent along"}
		}
		if slices.ContainsFunc(d.Notes, func(n string) bool { return strings.Contains(n, note) }) {
			return []string{"As a note"}
		}
		return nil
	}
	has := func(s string, any []string) bool {
		return slices.ContainsFunc(any, func(w string) bool { return strings.Contains(s, w) })
	}
	for _, p := range table {
		t.Run(p.ID, func(t *testing.T) {
			if p.Label == "" || p.Apply.Stop == "" || p.Apply.Replacement == "" || p.Apply.Addition == "" || p.Apply.Note == "" {
				t.Fatalf("an empty cell: %+v", p)
			}
			in := applyInput{Point: p.ID, Target: "the target", GateName: "g"}
			cells := []struct {
				name, cell string
				out        abi.GateOutput
				note       string
			}{
				{"stop", p.Apply.Stop, abi.GateOutput{Verdict: VerdictStop, Reason: "why"}, "why"},
				{"replacement", p.Apply.Replacement, abi.GateOutput{Verdict: VerdictPass, Replace: "new text"}, "new text"},
				{"addition", p.Apply.Addition, abi.GateOutput{Verdict: VerdictPass, Append: "more"}, "more"},
			}
			for _, c := range cells {
				want := words(apply(in, c.out), c.note)
				if want == nil || !has(c.cell, want) {
					t.Errorf("%s: the table says %q, but apply does %+v (want one of %q)", c.name, c.cell, apply(in, c.out), want)
				}
			}
			if d := apply(in, abi.GateOutput{Note: "for you"}); !slices.Contains(d.Notes, "for you") || p.Apply.Note != "Recorded" {
				t.Errorf("note: the table says %q, apply keeps notes %q", p.Apply.Note, d.Notes)
			}
			// A replacement of a structured tool result is only a note: the table says so.
			structured := apply(applyInput{Point: p.ID, Target: "t", Structured: true}, abi.GateOutput{Replace: "x"})
			if p.ID == abi.PointToolAfter && (structured.Action == ActionReplaced || !strings.Contains(p.Apply.Replacement, "structured")) {
				t.Errorf("structured results: the table says %q, apply does %+v", p.Apply.Replacement, structured)
			}
			// Through the model-API proxy (the caller can replace a structured result) it applies.
			if p.ID == abi.PointToolAfter {
				if d := apply(applyInput{Point: p.ID, Target: "t", Structured: true, ReplaceStructured: true}, abi.GateOutput{Replace: "x"}); d.Action != ActionReplaced || d.Text != "x" || len(d.Notes) != 0 {
					t.Errorf("a structured result the caller can replace: %+v", d)
				}
			}
			// Only a point where a confirmation can hold a replacement says so.
			confirm := apply(applyInput{Point: p.ID, Target: "t", ConfirmReplace: true}, abi.GateOutput{Replace: "x"})
			if strings.Contains(p.Apply.Replacement, "confirmation") && confirm.Action != ActionRejected {
				t.Errorf("the table mentions a confirmation at %s, apply does %+v", p.ID, confirm)
			}
		})
	}
}

func ExamplePointTable() {
	for _, p := range PointTable()[:2] {
		fmt.Printf("%s (%s): stop → %s\n", p.ID, p.Label, p.Apply.Stop)
	}
	// Output:
	// user-message (You send an instruction): stop → Input rejected; the run record keeps a restore card
	// agent-message (Agents message each other): stop → Input rejected
}

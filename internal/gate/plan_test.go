package gate

import (
	"reflect"
	"testing"
)

// TestPlanKeepsWhatTheFileLeavesOutUnlessPruning checks the merge `pixie gate apply` saves:
// file entries replace or add, saved entries the file leaves out are kept (or removed with
// prune), defaults a file leaves out are not changes, and the saved revision guards the save.
func TestPlanKeepsWhatTheFileLeavesOutUnlessPruning(t *testing.T) {
	saved := Set{Revision: 7,
		Gates: []Gate{normalized(gateAt("a", "user-message", "Check A")), normalized(gateAt("b", "turn-end", "Check B"))},
		Presets: []Preset{{Name: "dev", Gates: []Attachment{{Gate: "a", Enabled: true}, {Gate: "b", Enabled: true}}},
			{Name: "ops", Gates: []Attachment{}}}}
	sameA := gateAt("a", "user-message", "Check A")
	sameA.Advanced.Targets = "" // left out of the file: the default, not a change
	newA := gateAt("a", "user-message", "Check A again")
	newA.Advanced.OnError = OnErrorStop
	cases := []struct {
		name      string
		file      Set
		prune     bool
		want      []Change
		wantGates []string
		wantRev   int64
	}{
		{name: "same gate, nothing else", file: Set{Gates: []Gate{sameA}},
			want:      []Change{{Kind: "gate", Name: "b", Op: PlanKeep}, {Kind: "preset", Name: "dev", Op: PlanKeep}, {Kind: "preset", Name: "ops", Op: PlanKeep}},
			wantGates: []string{"a", "b"}, wantRev: 7},
		{name: "changed gate", file: Set{Gates: []Gate{newA}},
			want: []Change{{Kind: "gate", Name: "a", Op: PlanChange, Fields: []string{"advanced.onError", "task"}},
				{Kind: "gate", Name: "b", Op: PlanKeep}, {Kind: "preset", Name: "dev", Op: PlanKeep}, {Kind: "preset", Name: "ops", Op: PlanKeep}},
			wantGates: []string{"a", "b"}, wantRev: 7},
		{name: "prune", file: Set{Gates: []Gate{sameA, gateAt("c", "tool-before", "C")}, Presets: []Preset{{Name: "dev", Gates: []Attachment{{Gate: "a", Enabled: false}}}}}, prune: true,
			want: []Change{{Kind: "gate", Name: "c", Op: PlanAdd}, {Kind: "gate", Name: "b", Op: PlanRemove},
				{Kind: "preset", Name: "dev", Op: PlanChange, Fields: []string{"gates"}}, {Kind: "preset", Name: "ops", Op: PlanRemove}},
			wantGates: []string{"a", "c"}, wantRev: 7},
		{name: "the file's revision wins", file: Set{Revision: 5}, want: []Change{{Kind: "gate", Name: "a", Op: PlanKeep},
			{Kind: "gate", Name: "b", Op: PlanKeep}, {Kind: "preset", Name: "dev", Op: PlanKeep}, {Kind: "preset", Name: "ops", Op: PlanKeep}},
			wantGates: []string{"a", "b"}, wantRev: 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			merged, got := Plan(saved, tc.file, tc.prune)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("changes:\n got %+v\nwant %+v", got, tc.want)
			}
			var names []string
			for _, g := range merged.Gates {
				names = append(names, g.Name)
			}
			if !reflect.DeepEqual(names, tc.wantGates) || merged.Revision != tc.wantRev {
				t.Errorf("merged gates %v revision %d", names, merged.Revision)
			}
			if Changes(got) != (tc.name == "changed gate" || tc.name == "prune") {
				t.Errorf("Changes = %v", Changes(got))
			}
		})
	}
}

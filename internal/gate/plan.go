package gate

import (
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// What a plan does to one gate or preset.
const (
	PlanAdd    = "add"    // in the file, not saved
	PlanChange = "change" // in both, different
	PlanRemove = "remove" // saved, not in the file, and pruning
	PlanKeep   = "keep"   // saved, not in the file, and not pruning: left as it is
)

// Change is one line of an apply plan.
type Change struct {
	// Kind is "gate" or "preset".
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Op is PlanAdd, PlanChange, PlanRemove or PlanKeep.
	Op string `json:"op"`
	// Fields are the paths that differ, for PlanChange (task, advanced.timeoutSeconds, gates).
	Fields []string `json:"fields,omitempty"`
}

// Plan merges a file's set into the saved one the way `pixie gate apply` saves it: a gate or
// preset of the file replaces the saved one of that name or is added; a saved one the file
// does not name is kept, unless prune is set, in which case it is removed (and the result is
// exactly the file). The merged set carries the saved revision (or the file's, when it names
// one), so the save is refused if the set moved on meanwhile. Unchanged entries are not listed.
func Plan(saved, file Set, prune bool) (Set, []Change) {
	var changes []Change
	savedGates := map[string]Gate{}
	for _, g := range saved.Gates {
		savedGates[g.Name] = g
	}
	fileGates := map[string]bool{}
	merged := Set{Gates: []Gate{}, Presets: []Preset{}, Revision: saved.Revision}
	if file.Revision != 0 {
		merged.Revision = file.Revision
	}
	for _, g := range file.Gates {
		name := strings.TrimSpace(g.Name)
		fileGates[name] = true
		merged.Gates = append(merged.Gates, g)
		old, ok := savedGates[name]
		switch {
		case !ok:
			changes = append(changes, Change{Kind: "gate", Name: name, Op: PlanAdd})
		default:
			if d := diffFields(normalized(old), normalized(g)); len(d) > 0 {
				changes = append(changes, Change{Kind: "gate", Name: name, Op: PlanChange, Fields: d})
			}
		}
	}
	for _, g := range saved.Gates {
		if fileGates[g.Name] {
			continue
		}
		if prune {
			changes = append(changes, Change{Kind: "gate", Name: g.Name, Op: PlanRemove})
			continue
		}
		merged.Gates = append(merged.Gates, g)
		changes = append(changes, Change{Kind: "gate", Name: g.Name, Op: PlanKeep})
	}

	savedPresets := map[string]Preset{}
	for _, p := range saved.Presets {
		savedPresets[p.Name] = p
	}
	filePresets := map[string]bool{}
	for _, p := range file.Presets {
		name := strings.TrimSpace(p.Name)
		filePresets[name] = true
		merged.Presets = append(merged.Presets, p)
		old, ok := savedPresets[name]
		switch {
		case !ok:
			changes = append(changes, Change{Kind: "preset", Name: name, Op: PlanAdd})
		case !slices.Equal(nonNil(old.Gates), nonNil(p.Gates)):
			changes = append(changes, Change{Kind: "preset", Name: name, Op: PlanChange, Fields: []string{"gates"}})
		}
	}
	for _, p := range saved.Presets {
		if filePresets[p.Name] {
			continue
		}
		if prune {
			changes = append(changes, Change{Kind: "preset", Name: p.Name, Op: PlanRemove})
			continue
		}
		merged.Presets = append(merged.Presets, p)
		changes = append(changes, Change{Kind: "preset", Name: p.Name, Op: PlanKeep})
	}
	return merged, changes
}

// Changes reports whether a plan changes anything (keeping is no change).
func Changes(cs []Change) bool {
	return slices.ContainsFunc(cs, func(c Change) bool { return c.Op != PlanKeep })
}

func nonNil(a []Attachment) []Attachment {
	if a == nil {
		return []Attachment{}
	}
	return a
}

// normalized is g with the defaults a save fills in, so that a file that leaves a default out
// does not read as a change.
func normalized(g Gate) Gate {
	if g.Rule != nil {
		r := *g.Rule
		g.Rule = &r
	}
	g.normalize()
	return g
}

// diffFields lists the JSON paths at which a and b differ, sorted.
func diffFields(a, b Gate) []string {
	fa, fb := flatten(a), flatten(b)
	var out []string
	for k, v := range fa {
		if w, ok := fb[k]; !ok || !reflect.DeepEqual(v, w) {
			out = append(out, k)
		}
	}
	for k := range fb {
		if _, ok := fa[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// flatten maps each leaf of v's JSON form to its dotted path; a rule counts as one field.
func flatten(v any) map[string]any {
	raw, _ := json.Marshal(v)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	out := map[string]any{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok && k != "rule" {
				walk(prefix+k+".", sub)
				continue
			}
			out[prefix+k] = v
		}
	}
	walk("", m)
	return out
}

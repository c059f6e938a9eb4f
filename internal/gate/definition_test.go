package gate

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"testing"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/runtime"
)

func problemsOf(t *testing.T, err error) []Problem {
	t.Helper()
	var ce *errs.Error
	if !errors.As(err, &ce) || ce.Code != errs.Invalid {
		t.Fatalf("want an invalid error, got %v", err)
	}
	ps, ok := ce.Details.([]Problem)
	if !ok {
		t.Fatalf("details are %T, want []Problem", ce.Details)
	}
	return ps
}

func fields(ps []Problem) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Field)
	}
	sort.Strings(out)
	return out
}

func TestDecodeDefaults(t *testing.T) {
	var s Set
	raw := `{"gates":[{"name":"a","point":"agent-message","task":"t","advanced":{"confirmReplace":true}},
		{"name":"b","point":"turn-end","task":"t","enabled":false,"advanced":{"showInChat":false,"redoLimit":0}}],
		"presets":[{"name":"dev","gates":[{"gate":"a"},{"gate":"b","enabled":false}]}]}`
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatal(err)
	}
	a, b := s.Gates[0], s.Gates[1]
	if !a.Enabled || !a.Advanced.ShowInChat || !a.Advanced.ConfirmReplace || a.Advanced.OnError != OnErrorContinue ||
		a.Advanced.TimeoutSeconds != 60 || a.Advanced.RedoLimit != 1 {
		t.Errorf("defaults not applied: %+v", a)
	}
	if a.targets() != TargetsChild {
		t.Errorf("agent-message targets default to child, got %q", a.targets())
	}
	if b.Enabled || b.Advanced.ShowInChat || b.Advanced.RedoLimit != 0 || b.targets() != TargetsRoot {
		t.Errorf("explicit values lost: %+v", b)
	}
	if !s.Presets[0].Gates[0].Enabled || s.Presets[0].Gates[1].Enabled {
		t.Errorf("attachment switches: %+v", s.Presets[0].Gates)
	}
}

func TestSaveRefusals(t *testing.T) {
	mods := ModuleCheckerFunc(func(_ context.Context, name string) (bool, error) { return name == "lint", nil })
	e := newEnv(t, envOptions{modules: mods})
	e.writeScript(t, "measure-subtitle.sh", "#!/bin/bash\necho 1\n")
	ctx := context.Background()

	good := []Gate{
		gateAt("fmt", "user-message", "Check {{target}}"),
		func() Gate {
			g := gateAt("measure", "tool-after", "Measured: {{hooks.measure-subtitle.data}} {{hooks.measure-subtitle.text}}")
			g.Rule = &Rule{Kind: runtime.KindScript, Name: "measure-subtitle.sh"}
			return g
		}(),
		func() Gate {
			g := gateAt("wasm", "turn-end", "")
			g.Rule = &Rule{Kind: runtime.KindModule, Name: "lint"}
			return g
		}(),
	}
	saved, err := e.svc.Save(ctx, Set{Gates: good, Presets: []Preset{{Name: "dev", Gates: []Attachment{{Gate: "fmt", Enabled: true}, {Gate: "measure", Enabled: true}, {Gate: "wasm", Enabled: true}}}}})
	if err != nil {
		t.Fatalf("a valid set was refused: %v", err)
	}
	if saved.Revision != 1 {
		t.Errorf("revision = %d, want 1", saved.Revision)
	}

	tests := []struct {
		name string
		set  Set
		want []string
	}{
		{
			name: "two enabled gates share a preset and a point",
			set: Set{Gates: []Gate{gateAt("a", "user-message", "x"), gateAt("b", "user-message", "y")},
				Presets: []Preset{{Name: "dev", Gates: []Attachment{{Gate: "a", Enabled: true}, {Gate: "b", Enabled: true}}}}},
			want: []string{"presets[0].gates[1].enabled"},
		},
		{
			name: "undefined hooks variables",
			set: Set{Gates: []Gate{
				gateAt("a", "user-message", "{{hooks.measure.text}}"),
				func() Gate {
					g := gateAt("b", "tool-after", "{{hooks.other.data}}")
					g.Rule = &Rule{Kind: runtime.KindScript, Name: "measure-subtitle.sh"}
					return g
				}(),
			}},
			want: []string{"gates[0].task", "gates[1].task"},
		},
		{
			name: "empty task and no rule",
			set:  Set{Gates: []Gate{gateAt("a", "turn-end", "  ")}},
			want: []string{"gates[0].task"},
		},
		{
			name: "missing script and module",
			set: Set{Gates: []Gate{
				func() Gate {
					g := gateAt("a", "turn-end", "")
					g.Rule = &Rule{Kind: runtime.KindScript, Name: "nope.sh"}
					return g
				}(),
				func() Gate {
					g := gateAt("b", "turn-end", "")
					g.Rule = &Rule{Kind: runtime.KindModule, Name: "nope"}
					return g
				}(),
			}},
			want: []string{"gates[0].rule.name", "gates[1].rule.name"},
		},
		{
			name: "every problem at once",
			set: Set{Gates: []Gate{
				gateAt("a", "user-message", "{{hooks.x.text}}"),
				gateAt("b", "user-message", "ok"),
				gateAt("c", "turn-end", ""),
				func() Gate {
					g := gateAt("d", "tool-before", "t")
					g.Rule = &Rule{Kind: runtime.KindScript, Name: "../etc/passwd"}
					return g
				}(),
				gateAt("a", "nowhere", "t"),
			}, Presets: []Preset{{Name: "dev", Gates: []Attachment{{Gate: "a", Enabled: true}, {Gate: "b", Enabled: true}, {Gate: "ghost", Enabled: true}}}}},
			want: []string{"gates[0].task", "gates[2].task", "gates[3].rule.name", "gates[4].name", "gates[4].point",
				"presets[0].gates[1].enabled", "presets[0].gates[2].gate"},
		},
		{
			name: "bad options and names",
			set: Set{Gates: []Gate{func() Gate {
				g := gateAt("bad name/", "turn-end", "t")
				g.Advanced = Options{OnError: "explode", Targets: "everyone", TimeoutSeconds: 601, RedoLimit: 11}
				return g
			}()}, Presets: []Preset{{Name: ""}}},
			want: []string{"gates[0].advanced.onError", "gates[0].advanced.redoLimit", "gates[0].advanced.targets",
				"gates[0].advanced.timeoutSeconds", "gates[0].name", "presets[0].name"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.svc.Save(ctx, tt.set)
			if got := fields(problemsOf(t, err)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("problems at %v, want %v (%v)", got, tt.want, err)
			}
			// Nothing was written: the saved set is unchanged.
			cur, err := e.svc.Definitions(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if cur.Revision != 1 || len(cur.Gates) != 3 {
				t.Errorf("a refused save changed the saved set: %+v", cur)
			}
		})
	}
}

func TestDisabledGatesMayShareAPoint(t *testing.T) {
	e := newEnv(t, envOptions{})
	a, b, c := gateAt("a", "user-message", "x"), gateAt("b", "user-message", "y"), gateAt("c", "user-message", "z")
	c.Enabled = false
	set := Set{Gates: []Gate{a, b, c}, Presets: []Preset{
		{Name: "dev", Gates: []Attachment{{Gate: "a", Enabled: true}, {Gate: "b", Enabled: false}, {Gate: "c", Enabled: true}}},
		{Name: "ops", Gates: []Attachment{{Gate: "b", Enabled: true}}},
	}}
	if _, err := e.svc.Save(context.Background(), set); err != nil {
		t.Fatal(err)
	}
}

func TestAttachmentSwitchesAreIndependent(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	g := gateAt("fmt", "user-message", "x")
	if _, err := e.svc.SaveGate(ctx, g); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"dev", "ops", "review"} {
		if _, err := e.svc.Attach(ctx, p, "fmt", true); err != nil {
			t.Fatal(err)
		}
	}
	set, err := e.svc.Attach(ctx, "ops", "fmt", false)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, p := range set.Presets {
		got[p.Name] = p.Gates[0].Enabled
	}
	if want := map[string]bool{"dev": true, "ops": false, "review": true}; !reflect.DeepEqual(got, want) {
		t.Errorf("switches = %v, want %v", got, want)
	}
	// Evaluations follow the preset's own switch.
	for preset, want := range map[string]string{"dev": "", "ops": SkipNoGate} {
		r := evalReq("user-message", "hi")
		r.Session.Preset = preset
		res, err := e.svc.Evaluate(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if res.Skipped != want {
			t.Errorf("preset %s: skipped %q, want %q", preset, res.Skipped, want)
		}
	}
	if _, err := e.svc.Detach(ctx, "review", "fmt"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.DeleteGate(ctx, "fmt"); err != nil {
		t.Fatal(err)
	}
	set, _ = e.svc.Definitions(ctx)
	for _, p := range set.Presets {
		if len(p.Gates) != 0 {
			t.Errorf("deleting a gate left its attachment in %s", p.Name)
		}
	}
}

func TestRevisionConflict(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	s1, err := e.svc.Save(ctx, Set{Gates: []Gate{gateAt("a", "turn-end", "x")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Save(ctx, Set{Gates: []Gate{gateAt("b", "turn-end", "x")}, Revision: s1.Revision}); err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.Save(ctx, Set{Gates: []Gate{gateAt("c", "turn-end", "x")}, Revision: s1.Revision})
	if !errs.Is(err, errs.Conflict) {
		t.Fatalf("a stale revision saved: %v", err)
	}
}

func TestInUse(t *testing.T) {
	mods := ModuleCheckerFunc(func(context.Context, string) (bool, error) { return true, nil })
	e := newEnv(t, envOptions{modules: mods})
	g := gateAt("w", "turn-end", "")
	g.Rule = &Rule{Kind: runtime.KindModule, Name: "lint"}
	e.saveGates(t, g)
	for name, want := range map[string]bool{"lint": true, "other": false} {
		got, err := e.svc.InUse(context.Background(), name)
		if err != nil || got != want {
			t.Errorf("InUse(%s) = %v, %v", name, got, err)
		}
	}
}

func TestTemplates(t *testing.T) {
	ts := Templates()
	if len(ts) != 6 || ts[5].ID != "blank" {
		t.Fatalf("want five templates and the blank last, got %d", len(ts))
	}
	e := newEnv(t, envOptions{})
	var gates []Gate
	for i, tp := range ts[:5] {
		if tp.Gate.Point != Points()[i] {
			t.Errorf("template %d is for %s, want %s", i, tp.Gate.Point, Points()[i])
		}
		gates = append(gates, tp.Gate)
	}
	// The five representative templates save as they are.
	if _, err := e.svc.Save(context.Background(), Set{Gates: gates}); err != nil {
		t.Fatalf("templates do not save: %v", err)
	}
	if ts[5].Gate.Task != "" || ts[5].Gate.Rule != nil {
		t.Errorf("blank is not blank: %+v", ts[5].Gate)
	}
}

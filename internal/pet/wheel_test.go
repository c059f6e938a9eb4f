package pet_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/pet"
)

// qaGroup is a built-in action like the Lark channel's Q&A group: available only while its
// dependency (a bound bot) is there.
type qaGroup struct {
	bound   bool
	invoked []pet.Snapshot
}

func (q *qaGroup) ID() string    { return "qa-group" }
func (q *qaGroup) Label() string { return "Q&A group" }
func (q *qaGroup) Availability(context.Context) (bool, string) {
	if !q.bound {
		return false, "no Lark bot is bound"
	}
	return true, ""
}
func (q *qaGroup) Invoke(_ context.Context, snap pet.Snapshot) (string, error) {
	q.invoked = append(q.invoked, snap)
	return "group opened for " + snap.Key(), nil
}

var _ pet.BuiltinAction = (*qaGroup)(nil)

func TestWheelCapacityAndRings(t *testing.T) {
	_, m := newModelServer(t)
	e := newEnv(t, nil, m, pet.Config{})
	ctx := context.Background()
	qa := &qaGroup{}
	if err := e.svc.RegisterBuiltin(qa); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.RegisterBuiltin(qa); errs.CodeOf(err) != errs.Conflict {
		t.Fatalf("second registration: %v", err)
	}
	// 1 built-in + 23 shortcut Skills fill the wheel exactly.
	for i := range pet.WheelCapacity - 1 {
		register(t, e.svc, skillDir(t, fmt.Sprintf("s%02d", i), "d", "body", nil))
	}
	w, err := e.svc.Wheel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Entries) != pet.WheelCapacity || len(w.Overflow) != 0 {
		t.Fatalf("%d entries, overflow %v", len(w.Entries), w.Overflow)
	}
	first := w.Entries[0]
	if first.Kind != pet.EntryBuiltin || first.Label != "Q&A group" || first.Available || first.Reason != "no Lark bot is bound" {
		t.Fatalf("built-in entry %+v", first)
	}
	rings := map[int]int{}
	for i, en := range w.Entries {
		rings[en.Ring]++
		if i > 0 && (en.Kind != pet.EntrySkill || !en.Available || en.Label != en.Name || en.Description != "d") {
			t.Fatalf("skill entry %+v", en)
		}
	}
	if rings[1] != 6 || rings[2] != 8 || rings[3] != 10 {
		t.Fatalf("rings %v", rings)
	}
	if e6, e14 := w.Entries[6], w.Entries[14]; e6.Ring != 2 || e6.Slot != 0 || e14.Ring != 3 || e14.Slot != 0 || w.Entries[23].Slot != 9 {
		t.Fatalf("placement %+v %+v %+v", e6, e14, w.Entries[23])
	}
	// The 25th entry is refused, registered as a shortcut or made one later.
	extra := skillDir(t, "extra", "d", "body", nil)
	if _, err := e.svc.Register(ctx, pet.RegisterRequest{Path: extra, Confirm: true, Fingerprint: fingerprint(t, e.svc, extra), Shortcut: true}); errs.CodeOf(err) != errs.Conflict {
		t.Fatalf("25th shortcut at registration: %v", err)
	}
	if _, err := e.svc.Register(ctx, pet.RegisterRequest{Path: extra, Confirm: true, Fingerprint: fingerprint(t, e.svc, extra), Enabled: true}); err != nil {
		t.Fatal(err)
	}
	yes := true
	if _, err := e.svc.UpdateSkill(ctx, "extra", pet.SkillPatch{Shortcut: &yes}); errs.CodeOf(err) != errs.Conflict || !strings.Contains(err.Error(), "wheel is full") {
		t.Fatalf("25th shortcut: %v", err)
	}
	// Re-asserting an existing shortcut is not a new entry.
	if _, err := e.svc.UpdateSkill(ctx, "s00", pet.SkillPatch{Shortcut: &yes}); err != nil {
		t.Fatal(err)
	}
	// A built-in added to a full wheel pushes the last Skill into the overflow.
	if err := e.svc.RegisterBuiltin(&namedAction{id: "second"}); err != nil {
		t.Fatal(err)
	}
	w, _ = e.svc.Wheel(ctx)
	if len(w.Entries) != pet.WheelCapacity || strings.Join(w.Overflow, ",") != "skill:s22" {
		t.Fatalf("overflow %v", w.Overflow)
	}
}

type namedAction struct{ id string }

func (a *namedAction) ID() string                                           { return a.id }
func (a *namedAction) Label() string                                        { return a.id }
func (a *namedAction) Availability(context.Context) (bool, string)          { return true, "" }
func (a *namedAction) Invoke(context.Context, pet.Snapshot) (string, error) { return "", nil }

func TestBuiltinActionIsNotASkill(t *testing.T) {
	e := newEnv(t, nil, nil, pet.Config{})
	ctx := context.Background()
	qa := &qaGroup{}
	if err := e.svc.RegisterBuiltin(qa); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.InvokeBuiltin(ctx, "qa-group", snapshot("session:s1")); errs.CodeOf(err) != errs.Unavailable || !strings.Contains(err.Error(), "no Lark bot is bound") {
		t.Fatalf("unavailable action: %v", err)
	}
	qa.bound = true
	res, err := e.svc.InvokeBuiltin(ctx, "qa-group", snapshot("session:s1"))
	if err != nil || res.Output != "group opened for session:s1" || len(qa.invoked) != 1 {
		t.Fatalf("invoke %+v %v", res, err)
	}
	if _, err := e.svc.InvokeBuiltin(ctx, "qa-group", pet.Snapshot{Scope: "session"}); errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("bad snapshot: %v", err)
	}
	if _, err := e.svc.InvokeBuiltin(ctx, "nope", snapshot("independent")); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("unknown action: %v", err)
	}
	// No Task, no allowlist entry, no projection.
	tasks, _ := e.svc.Tasks(ctx, pet.TaskFilter{Archived: true})
	diag, _ := e.svc.Diagnostics(ctx)
	if len(tasks) != 0 || len(diag.Allowlist) != 0 || len(diag.Builtins) != 1 || !diag.Builtins[0].Available {
		t.Fatalf("tasks %v diagnostics %+v", tasks, diag)
	}
	if err := e.svc.RegisterBuiltin(&namedAction{id: "Bad Id"}); errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("bad id: %v", err)
	}
}

package pet

import (
	"context"
	"errors"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/runtime"
)

// rings are the wheel's ring sizes, innermost first: at most 24 entries in all.
var rings = [...]int{6, 8, 10}

// WheelCapacity is the most entries the wheel holds (built-in actions and Skills together).
const WheelCapacity = 24

// BuiltinAction is a Host built-in action on the wheel (for example the Lark channel's Q&A
// group). It is not a Skill: it never enters the Skill allowlist, has no projection and creates
// no Task; its availability comes from its own dependencies.
type BuiltinAction interface {
	// ID is a kebab-case identifier, unique among built-in actions.
	ID() string
	// Label is what the wheel shows.
	Label() string
	// Availability reports whether the action can run now and, when not, why.
	Availability(ctx context.Context) (ok bool, reason string)
	// Invoke runs the action for a validated Snapshot and returns a short result for the person
	// (its errors should carry errs codes).
	Invoke(ctx context.Context, snap Snapshot) (string, error)
}

// RegisterBuiltin adds a built-in action to the wheel. Built-in actions come before Skills;
// when built-ins and shortcut Skills together exceed the capacity, the wheel shows the first 24
// and reports the rest as overflow.
func (s *Service) RegisterBuiltin(a BuiltinAction) error {
	if a == nil || !ValidSkillName(a.ID()) {
		return errs.New(errs.Invalid, "a built-in action needs a kebab-case id")
	}
	s.builtinMu.Lock()
	defer s.builtinMu.Unlock()
	for _, b := range s.builtins {
		if b.ID() == a.ID() {
			return errs.New(errs.Conflict, "built-in action %q is already registered", a.ID())
		}
	}
	s.builtins = append(s.builtins, a)
	return nil
}

func (s *Service) builtinList() []BuiltinAction {
	s.builtinMu.RLock()
	defer s.builtinMu.RUnlock()
	return append([]BuiltinAction(nil), s.builtins...)
}

// Entry kinds on the wheel.
const (
	EntryBuiltin = "builtin"
	EntrySkill   = "skill"
)

// WheelEntry is one capability on the wheel.
type WheelEntry struct {
	// Kind is "builtin" or "skill"; Name the action id or the Skill name.
	Kind        string `json:"kind"`
	Name        string `json:"name"`
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
	// Ring is 1, 2 or 3 (holding 6, 8 and 10 entries); Slot is the position in the ring from 0.
	Ring      int    `json:"ring"`
	Slot      int    `json:"slot"`
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"`
	// Sandbox is a Skill's granted sandbox policy (read-only or workspace-write).
	Sandbox runtime.Policy `json:"sandbox,omitempty"`
}

// Wheel is the capability wheel.
type Wheel struct {
	Entries  []WheelEntry `json:"entries"`
	Capacity int          `json:"capacity"`
	// Rings are the ring sizes, innermost first (6, 8, 10).
	Rings []int `json:"rings"`
	// Overflow names the entries that did not fit.
	Overflow []string `json:"overflow,omitempty"`
}

// Wheel returns the built-in actions, then the shortcut Skills by name, each with its
// availability, placed on the rings.
func (s *Service) Wheel(ctx context.Context) (Wheel, error) {
	w := Wheel{Entries: []WheelEntry{}, Capacity: WheelCapacity, Rings: append([]int(nil), rings[:]...)}
	var all []WheelEntry
	for _, b := range s.builtinList() {
		ok, reason := b.Availability(ctx)
		if ok {
			reason = ""
		} else if reason == "" {
			reason = "unavailable"
		}
		all = append(all, WheelEntry{Kind: EntryBuiltin, Name: b.ID(), Label: b.Label(), Available: ok, Reason: reason})
	}
	list, err := s.listSkills(ctx)
	if err != nil {
		return w, err
	}
	for _, sk := range list {
		if !sk.Shortcut {
			continue
		}
		v := s.viewSkill(ctx, sk)
		all = append(all, WheelEntry{Kind: EntrySkill, Name: sk.Name, Label: sk.Name, Description: v.Description,
			Available: v.Available, Reason: v.Reason, Sandbox: v.Sandbox})
	}
	for i, e := range all {
		if i >= WheelCapacity {
			w.Overflow = append(w.Overflow, e.Kind+":"+e.Name)
			continue
		}
		e.Ring, e.Slot = ringOf(i)
		w.Entries = append(w.Entries, e)
	}
	return w, nil
}

// ringOf places the i-th entry (from 0): ring 1 holds 0–5, ring 2 6–13, ring 3 14–23.
func ringOf(i int) (ring, slot int) {
	for r, n := range rings {
		if i < n {
			return r + 1, i
		}
		i -= n
	}
	return 0, 0
}

// checkWheelRoom refuses a new shortcut when the wheel is full.
func (s *Service) checkWheelRoom(tx *store.Tx, name string) error {
	n := len(s.builtinList())
	err := skillsC.Each(tx, "", store.ScanOptions{}, func(id string, sk Skill) error {
		if sk.Shortcut && id != name {
			n++
		}
		return nil
	})
	if err != nil {
		return err
	}
	if n >= WheelCapacity {
		return errs.New(errs.Conflict, "the wheel is full (%d entries, built-in actions included); remove a shortcut first", WheelCapacity)
	}
	return nil
}

// BuiltinResult is what a built-in action answered.
type BuiltinResult struct {
	Action string `json:"action"`
	Output string `json:"output"`
}

// InvokeBuiltin runs a built-in action for a Snapshot.
func (s *Service) InvokeBuiltin(ctx context.Context, id string, snap Snapshot) (BuiltinResult, error) {
	var a BuiltinAction
	for _, b := range s.builtinList() {
		if b.ID() == id {
			a = b
		}
	}
	if a == nil {
		return BuiltinResult{}, errs.New(errs.NotFound, "no built-in action %q", id)
	}
	snap, err := snap.normalize(s.now())
	if err != nil {
		return BuiltinResult{}, err
	}
	if ok, reason := a.Availability(ctx); !ok {
		return BuiltinResult{}, errs.New(errs.Unavailable, "built-in action %s is unavailable: %s", id, reason)
	}
	out, err := a.Invoke(ctx, snap)
	if err != nil {
		var ce *errs.Error
		if !errors.As(err, &ce) {
			err = errs.Wrap(errs.Internal, err, "built-in action %s failed", id)
		}
		return BuiltinResult{}, err
	}
	return BuiltinResult{Action: id, Output: out}, nil
}

// Availability is whether an executor can run here, and why not.
type Availability struct {
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"`
}

// Prober is implemented by executors that can tell whether they work on this machine (the bash
// executor: whether the kernel can enforce the sandbox policy). Pet asks it for the wheel and
// the diagnostics; an executor without it counts as available.
type Prober interface {
	Probe(ctx context.Context, policy runtime.Policy) error
}

// executorAvailable reports whether Skills of kind can run.
func (s *Service) executorAvailable(ctx context.Context, kind SkillKind) (bool, string) {
	switch kind {
	case KindInstructions:
		if s.model == nil || !s.model.Info().Configured {
			return false, "no Pixie model is configured (instruction Skills need one)"
		}
		return true, ""
	case KindScript, KindWASM:
		rk := runtime.KindScript
		if kind == KindWASM {
			rk = runtime.KindModule
		}
		ex := s.exec
		if d, ok := ex.(runtime.Dispatcher); ok {
			ex = d[rk]
		}
		if ex == nil {
			return false, "no " + string(kind) + " executor is configured"
		}
		if p, ok := ex.(Prober); ok {
			if err := p.Probe(ctx, runtime.PolicyReadOnly); err != nil {
				return false, msgOf(err)
			}
		}
		return true, ""
	}
	return false, "unknown Skill kind " + string(kind)
}

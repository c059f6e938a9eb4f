package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// Error policies.
const (
	OnErrorContinue = "continue" // the original flow continues; the error is recorded
	OnErrorStop     = "stop"     // the point's stop row applies with the error as the reason
)

// Target agents.
const (
	TargetsRoot  = "root"
	TargetsChild = "child"
	TargetsAll   = "all"
)

// Agents of an evaluation.
const (
	AgentRoot  = "root"
	AgentChild = "child"
)

// Limits of a definition.
const (
	MaxTimeoutSeconds = 600
	MaxRedoLimit      = 10
	MaxTaskSize       = 32 * 1024
	MaxGates          = 200
	MaxPresets        = 200
)

// Rule is a gate's script or module.
type Rule struct {
	// Kind is "script" (a file in the script folder) or "module" (a WASM module).
	Kind runtime.Kind `json:"kind"`
	// Name is the script's file name or the module's name.
	Name string `json:"name"`
}

// HookName is the name the task uses for the rule's output, {{hooks.<name>.text}}: the file
// name without its last extension (measure-subtitle.sh → measure-subtitle).
func (r Rule) HookName() string {
	ext := filepath.Ext(r.Name)
	if ext == r.Name {
		return r.Name
	}
	return strings.TrimSuffix(r.Name, ext)
}

// Options are a gate's advanced options.
type Options struct {
	// ShowInChat shows the result right under what the gate checked (default on).
	ShowInChat bool `json:"showInChat"`
	// ConfirmReplace turns a replacement at a message point into a suggestion (default off).
	ConfirmReplace bool `json:"confirmReplace"`
	// OnError is "continue" (default) or "stop".
	OnError string `json:"onError"`
	// Targets is "root", "child" or "all"; the default is "root", or "child" for agent-message.
	Targets string `json:"targets"`
	// TimeoutSeconds is the time limit shared by the rule, the helper and the model calls
	// (default 60, at most 600).
	TimeoutSeconds int `json:"timeoutSeconds"`
	// RedoLimit is the number of redos a turn-end gate may ask for per turn (default 1).
	RedoLimit int `json:"redoLimit"`
}

// Gate is one gate definition.
type Gate struct {
	// Name identifies the gate: letters, digits, ".", "_" and "-", at most 64.
	Name string `json:"name"`
	// Enabled is the global switch (default on).
	Enabled bool `json:"enabled"`
	// Point is when the gate runs: user-message, agent-message, tool-before, tool-after or
	// turn-end.
	Point string `json:"point"`
	// Task is the instruction to Pixie, a template (see docs/gates.md for the variables).
	Task string `json:"task"`
	// Rule is the optional script or module run before the task.
	Rule *Rule `json:"rule,omitempty"`
	// Description is free text for people.
	Description string `json:"description,omitempty"`
	// Advanced are the advanced options.
	Advanced Options `json:"advanced"`
}

// defaultGate is what absent JSON fields default to.
func defaultGate() Gate {
	return Gate{Enabled: true, Advanced: Options{ShowInChat: true, OnError: OnErrorContinue, TimeoutSeconds: 60, RedoLimit: 1}}
}

// UnmarshalJSON decodes a gate, giving absent fields their defaults (enabled, show in chat,
// continue on error, 60 s, one redo).
func (g *Gate) UnmarshalJSON(b []byte) error {
	type plain Gate
	v := plain(defaultGate())
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*g = Gate(v)
	return nil
}

// timeout is the gate's time limit.
func (g Gate) timeout(def time.Duration) time.Duration {
	if g.Advanced.TimeoutSeconds > 0 {
		return time.Duration(g.Advanced.TimeoutSeconds) * time.Second
	}
	return def
}

// targets is the effective target agents.
func (g Gate) targets() string {
	if g.Advanced.Targets != "" {
		return g.Advanced.Targets
	}
	if g.Point == abi.PointAgentMessage {
		return TargetsChild
	}
	return TargetsRoot
}

// normalize fills point-dependent defaults.
func (g *Gate) normalize() {
	g.Name = strings.TrimSpace(g.Name)
	if g.Advanced.OnError == "" {
		g.Advanced.OnError = OnErrorContinue
	}
	if g.Advanced.Targets == "" {
		g.Advanced.Targets = g.targets()
	}
	if g.Advanced.TimeoutSeconds == 0 {
		g.Advanced.TimeoutSeconds = 60
	}
	if g.Rule != nil && g.Rule.Kind == "" && g.Rule.Name == "" {
		g.Rule = nil
	}
	if g.Rule != nil && g.Rule.Kind == "" {
		g.Rule.Kind = runtime.KindScript
	}
}

// Attachment attaches a gate to a preset, with its own switch.
type Attachment struct {
	Gate    string `json:"gate"`
	Enabled bool   `json:"enabled"`
}

// UnmarshalJSON decodes an attachment; an absent switch is on.
func (a *Attachment) UnmarshalJSON(b []byte) error {
	type plain Attachment
	v := plain{Enabled: true}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*a = Attachment(v)
	return nil
}

// Preset is a named set of gate attachments. Agents run with a preset; a gate runs only for
// the presets it is attached to and switched on in.
type Preset struct {
	Name  string       `json:"name"`
	Gates []Attachment `json:"gates"`
}

// Set is the whole saved configuration: every gate and every preset. It is saved
// all-or-nothing.
type Set struct {
	Gates   []Gate   `json:"gates"`
	Presets []Preset `json:"presets"`
	// Revision increases with every save. A save that carries a non-zero revision is refused
	// with a conflict when the saved set has moved on.
	Revision int64 `json:"revision"`
}

// Problem is one reason a save was refused, next to the field it concerns.
type Problem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func validPoint(p string) bool { return slices.Contains(abi.Points, p) }

// validate checks a whole set and returns every problem found. tx is the save's transaction
// (module rules are checked inside it when the checker can); scripts is the current script
// listing (by file name).
func (s *Service) validate(ctx context.Context, tx *store.Tx, set *Set, scripts map[string]bool, scriptsErr error) ([]Problem, error) {
	var ps []Problem
	add := func(field, format string, args ...any) {
		ps = append(ps, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if len(set.Gates) > MaxGates {
		add("gates", "at most %d gates", MaxGates)
	}
	if len(set.Presets) > MaxPresets {
		add("presets", "at most %d presets", MaxPresets)
	}
	byName := map[string]int{}
	for i := range set.Gates {
		g := &set.Gates[i]
		g.normalize()
		f := fmt.Sprintf("gates[%d]", i)
		switch {
		case g.Name == "":
			add(f+".name", "a gate needs a name")
		case !nameRE.MatchString(g.Name):
			add(f+".name", "a gate name is 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
		default:
			if j, dup := byName[g.Name]; dup {
				add(f+".name", "gates[%d] already uses the name %q", j, g.Name)
			} else {
				byName[g.Name] = i
			}
		}
		if g.Rule != nil {
			if err := s.checkRule(ctx, tx, *g.Rule, f+".rule", scripts, scriptsErr, add); err != nil {
				return nil, err
			}
		}
		validateGateFields(f, g, add)
	}
	presetNames := map[string]int{}
	for i := range set.Presets {
		p := &set.Presets[i]
		p.Name = strings.TrimSpace(p.Name)
		f := fmt.Sprintf("presets[%d]", i)
		switch {
		case p.Name == "":
			add(f+".name", "a preset needs a name")
		case !nameRE.MatchString(p.Name):
			add(f+".name", "a preset name is 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
		default:
			if j, dup := presetNames[p.Name]; dup {
				add(f+".name", "presets[%d] already uses the name %q", j, p.Name)
			} else {
				presetNames[p.Name] = i
			}
		}
		attached := map[string]int{}
		// point → the first enabled attachment's index
		enabledAt := map[string]int{}
		for j, a := range p.Gates {
			af := fmt.Sprintf("%s.gates[%d]", f, j)
			gi, ok := byName[a.Gate]
			if !ok {
				add(af+".gate", "no gate is named %q", a.Gate)
				continue
			}
			if k, dup := attached[a.Gate]; dup {
				add(af+".gate", "%q is already attached at %s.gates[%d]", a.Gate, f, k)
				continue
			}
			attached[a.Gate] = j
			g := set.Gates[gi]
			if !a.Enabled || !g.Enabled || !validPoint(g.Point) {
				continue
			}
			if k, dup := enabledAt[g.Point]; dup {
				other := p.Gates[k].Gate
				add(af+".enabled", "%q and %q are both enabled in preset %q at %s; only one enabled gate per preset and point is allowed", other, g.Name, p.Name, g.Point)
				continue
			}
			enabledAt[g.Point] = j
		}
	}
	return ps, nil
}

// validateGateFields checks a gate's own fields (not whether its rule exists).
func validateGateFields(f string, g *Gate, add func(string, string, ...any)) {
	if !validPoint(g.Point) {
		add(f+".point", "the point must be one of %s", strings.Join(abi.Points, ", "))
	}
	if len(g.Task) > MaxTaskSize {
		add(f+".task", "the task is longer than %d bytes", MaxTaskSize)
	}
	if strings.TrimSpace(g.Task) == "" && g.Rule == nil {
		add(f+".task", "a gate with an empty task needs a rule")
	}
	for _, bad := range undefinedVars(g.Task, g.Rule) {
		add(f+".task", "the task uses the undefined variable {{%s}}", bad)
	}
	o := g.Advanced
	if o.OnError != OnErrorContinue && o.OnError != OnErrorStop {
		add(f+".advanced.onError", "onError must be %q or %q", OnErrorContinue, OnErrorStop)
	}
	if o.Targets != TargetsRoot && o.Targets != TargetsChild && o.Targets != TargetsAll {
		add(f+".advanced.targets", "targets must be %q, %q or %q", TargetsRoot, TargetsChild, TargetsAll)
	}
	if o.TimeoutSeconds < 1 || o.TimeoutSeconds > MaxTimeoutSeconds {
		add(f+".advanced.timeoutSeconds", "the time limit must be 1 to %d seconds", MaxTimeoutSeconds)
	}
	if o.RedoLimit < 0 || o.RedoLimit > MaxRedoLimit {
		add(f+".advanced.redoLimit", "the redo limit must be 0 to %d", MaxRedoLimit)
	}
}

// checkRule validates a rule reference; tx is the save's transaction.
func (s *Service) checkRule(ctx context.Context, tx *store.Tx, r Rule, f string, scripts map[string]bool, scriptsErr error, add func(string, string, ...any)) error {
	switch r.Kind {
	case runtime.KindScript:
		if !validScriptName(r.Name) {
			add(f+".name", "a script name is a file name in the script folder (no '/' and no '..')")
			return nil
		}
		if scriptsErr != nil {
			add(f+".name", "the script folder cannot be read: %v", scriptsErr)
			return nil
		}
		if !scripts[r.Name] {
			add(f+".name", "the script %q is not an executable file in the script folder", r.Name)
			return nil
		}
	case runtime.KindModule:
		if r.Name == "" {
			add(f+".name", "a module rule needs the module's name")
			return nil
		}
		if s.cfg.Modules == nil {
			add(f+".kind", "WASM modules are not available on this server")
			return nil
		}
		ok, err := s.moduleExists(ctx, tx, r.Name)
		if err != nil {
			return fmt.Errorf("gate: check module %q: %w", r.Name, err)
		}
		if !ok {
			add(f+".name", "the module %q does not exist", r.Name)
			return nil
		}
	default:
		add(f+".kind", "the rule kind must be %q or %q", runtime.KindScript, runtime.KindModule)
		return nil
	}
	return nil
}

// refusal builds the coded error of a refused save.
func refusal(ps []Problem) error {
	msgs := make([]string, len(ps))
	for i, p := range ps {
		msgs[i] = p.Field + ": " + p.Message
	}
	return errs.New(errs.Invalid, "the gates were not saved: %s", strings.Join(msgs, "; ")).WithDetails(ps)
}

// Definitions returns the saved set.
func (s *Service) Definitions(ctx context.Context) (Set, error) {
	var set Set
	err := s.store.View(ctx, func(tx *store.Tx) error {
		var err error
		set, err = loadSet(tx)
		return err
	})
	if err != nil {
		return Set{}, errs.Wrap(errs.Internal, err, "cannot read the gates")
	}
	return set, nil
}

// Gate returns one saved gate.
func (s *Service) Gate(ctx context.Context, name string) (Gate, error) {
	var g Gate
	err := s.store.View(ctx, func(tx *store.Tx) error {
		var err error
		g, err = defsCol.Get(tx, name)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return Gate{}, errs.New(errs.NotFound, "no gate is named %q", name)
	}
	if err != nil {
		return Gate{}, errs.Wrap(errs.Internal, err, "cannot read the gate")
	}
	return g, nil
}

func loadSet(tx *store.Tx) (Set, error) {
	set := Set{Gates: []Gate{}, Presets: []Preset{}}
	gs, err := defsCol.List(tx, "", store.ScanOptions{})
	if err != nil {
		return Set{}, err
	}
	for _, e := range gs {
		set.Gates = append(set.Gates, e.Value)
	}
	ps, err := presetsCol.List(tx, "", store.ScanOptions{})
	if err != nil {
		return Set{}, err
	}
	for _, e := range ps {
		if e.Value.Gates == nil {
			e.Value.Gates = []Attachment{}
		}
		set.Presets = append(set.Presets, e.Value)
	}
	set.Revision, err = revCol.Get(tx, cfgRevision)
	if errors.Is(err, store.ErrNotFound) {
		err = nil
	}
	return set, err
}

// Save replaces the whole saved set, or refuses with every problem listed (errs.Invalid with
// []Problem details). Nothing is written on refusal.
func (s *Service) Save(ctx context.Context, set Set) (Set, error) {
	return s.mutate(ctx, set.Revision, func(cur *Set) error {
		cur.Gates, cur.Presets = set.Gates, set.Presets
		return nil
	})
}

// SaveGate adds or replaces one gate; the whole resulting set is validated.
func (s *Service) SaveGate(ctx context.Context, g Gate) (Set, error) {
	return s.mutate(ctx, 0, func(cur *Set) error {
		for i := range cur.Gates {
			if cur.Gates[i].Name == strings.TrimSpace(g.Name) {
				cur.Gates[i] = g
				return nil
			}
		}
		cur.Gates = append(cur.Gates, g)
		return nil
	})
}

// DeleteGate removes a gate and its attachments.
func (s *Service) DeleteGate(ctx context.Context, name string) (Set, error) {
	return s.mutate(ctx, 0, func(cur *Set) error {
		i := slices.IndexFunc(cur.Gates, func(g Gate) bool { return g.Name == name })
		if i < 0 {
			return errs.New(errs.NotFound, "no gate is named %q", name)
		}
		cur.Gates = slices.Delete(cur.Gates, i, i+1)
		for j := range cur.Presets {
			cur.Presets[j].Gates = slices.DeleteFunc(cur.Presets[j].Gates, func(a Attachment) bool { return a.Gate == name })
		}
		return nil
	})
}

// SavePreset adds or replaces one preset; the whole resulting set is validated.
func (s *Service) SavePreset(ctx context.Context, p Preset) (Set, error) {
	return s.mutate(ctx, 0, func(cur *Set) error {
		for i := range cur.Presets {
			if cur.Presets[i].Name == strings.TrimSpace(p.Name) {
				cur.Presets[i] = p
				return nil
			}
		}
		cur.Presets = append(cur.Presets, p)
		return nil
	})
}

// DeletePreset removes a preset.
func (s *Service) DeletePreset(ctx context.Context, name string) (Set, error) {
	return s.mutate(ctx, 0, func(cur *Set) error {
		i := slices.IndexFunc(cur.Presets, func(p Preset) bool { return p.Name == name })
		if i < 0 {
			return errs.New(errs.NotFound, "no preset is named %q", name)
		}
		cur.Presets = slices.Delete(cur.Presets, i, i+1)
		return nil
	})
}

// Attach attaches a gate to a preset (creating the preset if needed) or changes that
// attachment's switch. Other presets' attachments do not change.
func (s *Service) Attach(ctx context.Context, preset, gateName string, enabled bool) (Set, error) {
	return s.mutate(ctx, 0, func(cur *Set) error {
		i := slices.IndexFunc(cur.Presets, func(p Preset) bool { return p.Name == preset })
		if i < 0 {
			cur.Presets = append(cur.Presets, Preset{Name: preset})
			i = len(cur.Presets) - 1
		}
		p := &cur.Presets[i]
		for j := range p.Gates {
			if p.Gates[j].Gate == gateName {
				p.Gates[j].Enabled = enabled
				return nil
			}
		}
		p.Gates = append(p.Gates, Attachment{Gate: gateName, Enabled: enabled})
		return nil
	})
}

// Detach removes a gate from a preset.
func (s *Service) Detach(ctx context.Context, preset, gateName string) (Set, error) {
	return s.mutate(ctx, 0, func(cur *Set) error {
		i := slices.IndexFunc(cur.Presets, func(p Preset) bool { return p.Name == preset })
		if i < 0 {
			return errs.New(errs.NotFound, "no preset is named %q", preset)
		}
		n := len(cur.Presets[i].Gates)
		cur.Presets[i].Gates = slices.DeleteFunc(cur.Presets[i].Gates, func(a Attachment) bool { return a.Gate == gateName })
		if len(cur.Presets[i].Gates) == n {
			return errs.New(errs.NotFound, "%q is not attached to preset %q", gateName, preset)
		}
		return nil
	})
}

// mutate loads the saved set, applies f, validates the result and writes it, all in one
// transaction.
func (s *Service) mutate(ctx context.Context, wantRev int64, f func(*Set) error) (Set, error) {
	scripts, scriptsErr := s.scriptNames(ctx)
	var out Set
	err := s.store.Update(ctx, func(tx *store.Tx) error {
		cur, err := loadSet(tx)
		if err != nil {
			return err
		}
		if wantRev != 0 && wantRev != cur.Revision {
			return errs.New(errs.Conflict, "the gates were changed since revision %d (now %d); reload and save again", wantRev, cur.Revision)
		}
		next := Set{Gates: slices.Clone(cur.Gates), Presets: clonePresets(cur.Presets)}
		if err := f(&next); err != nil {
			return err
		}
		if next.Gates == nil {
			next.Gates = []Gate{}
		}
		if next.Presets == nil {
			next.Presets = []Preset{}
		}
		ps, err := s.validate(ctx, tx, &next, scripts, scriptsErr)
		if err != nil {
			return err
		}
		if len(ps) > 0 {
			return refusal(ps)
		}
		for _, g := range cur.Gates {
			if err := defsCol.Delete(tx, g.Name); err != nil {
				return err
			}
		}
		for _, p := range cur.Presets {
			if err := presetsCol.Delete(tx, p.Name); err != nil {
				return err
			}
		}
		for _, g := range next.Gates {
			if err := defsCol.Put(tx, g.Name, g); err != nil {
				return err
			}
		}
		for _, p := range next.Presets {
			if p.Gates == nil {
				p.Gates = []Attachment{}
			}
			if err := presetsCol.Put(tx, p.Name, p); err != nil {
				return err
			}
		}
		if err := forgetMissing(tx, next.Presets); err != nil {
			return err
		}
		next.Revision = cur.Revision + 1
		if err := revCol.Put(tx, cfgRevision, next.Revision); err != nil {
			return err
		}
		sort.Slice(next.Gates, func(i, j int) bool { return next.Gates[i].Name < next.Gates[j].Name })
		sort.Slice(next.Presets, func(i, j int) bool { return next.Presets[i].Name < next.Presets[j].Name })
		out = next
		if err := s.notify(tx, noteDefs); err != nil {
			return err
		}
		snap := buildSnapshot(next)
		tx.AfterCommit(func() {
			s.mu.Lock()
			if s.snap == nil || s.snap.rev < snap.rev {
				s.snap = snap
			}
			s.mu.Unlock()
		})
		return nil
	})
	if err != nil {
		if errs.CodeOf(err) != errs.Internal {
			return Set{}, err
		}
		return Set{}, errs.Wrap(errs.Internal, err, "cannot save the gates")
	}
	return out, nil
}

func clonePresets(ps []Preset) []Preset {
	out := make([]Preset, len(ps))
	for i, p := range ps {
		out[i] = Preset{Name: p.Name, Gates: slices.Clone(p.Gates)}
	}
	return out
}

// moduleExists checks a module rule, inside the save's transaction tx when the checker can
// (tx nil: outside any).
func (s *Service) moduleExists(ctx context.Context, tx *store.Tx, name string) (bool, error) {
	if tc, ok := s.cfg.Modules.(TxModuleChecker); ok && tx != nil {
		return tc.ModuleExistsTx(ctx, tx, name)
	}
	return s.cfg.Modules.ModuleExists(ctx, name)
}

// InUse reports whether a saved gate uses the module called name (the module registry refuses
// to delete a module in use).
func (s *Service) InUse(ctx context.Context, name string) (bool, error) {
	set, err := s.Definitions(ctx)
	if err != nil {
		return false, err
	}
	return usesModule(set, name), nil
}

// ModuleInUse is InUse inside the caller's store transaction: the module registry's delete
// passes its own, so that a save changing the definitions meanwhile conflicts with the delete
// (which the store then retries) instead of both committing.
func (s *Service) ModuleInUse(ctx context.Context, tx *store.Tx, name string) (bool, error) {
	set, err := loadSet(tx)
	if err != nil {
		return false, err
	}
	return usesModule(set, name), nil
}

func usesModule(set Set, name string) bool {
	for _, g := range set.Gates {
		if g.Rule != nil && g.Rule.Kind == runtime.KindModule && g.Rule.Name == name {
			return true
		}
	}
	return false
}

// snapshot indexes the saved set for evaluation.
type snapshot struct {
	rev   int64
	gates map[string]Gate
	// active maps preset → point → the one gate enabled there.
	active map[string]map[string]string
	// applying maps preset → names of the enabled gates attached and switched on there.
	applying map[string][]string
}

func buildSnapshot(set Set) *snapshot {
	sn := &snapshot{rev: set.Revision, gates: map[string]Gate{}, active: map[string]map[string]string{}, applying: map[string][]string{}}
	for _, g := range set.Gates {
		sn.gates[g.Name] = g
	}
	for _, p := range set.Presets {
		m := map[string]string{}
		for _, a := range p.Gates {
			g, ok := sn.gates[a.Gate]
			if !ok || !a.Enabled || !g.Enabled {
				continue
			}
			if _, dup := m[g.Point]; !dup {
				m[g.Point] = g.Name
			}
			sn.applying[p.Name] = append(sn.applying[p.Name], g.Name)
		}
		sn.active[p.Name] = m
	}
	return sn
}

// loadSnapshot returns the cached snapshot, loading it on first use.
func (s *Service) loadSnapshot(ctx context.Context) (*snapshot, error) {
	s.mu.Lock()
	sn, gen := s.snap, s.snapGen
	s.mu.Unlock()
	if sn != nil {
		return sn, nil
	}
	set, err := s.Definitions(ctx)
	if err != nil {
		return nil, err
	}
	sn = buildSnapshot(set)
	s.mu.Lock()
	if s.snap == nil && s.snapGen == gen {
		s.snap = sn // not if another replica's change was heard meanwhile
	} else if s.snap != nil {
		sn = s.snap
	}
	s.mu.Unlock()
	return sn, nil
}

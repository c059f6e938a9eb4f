package pet

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/runtime"
)

// Skill is a registered Skill: a link from its name to the directory the user gave, never a
// copy. Registered (the record exists), enabled and shortcut are three separate facts.
type Skill struct {
	Name string `json:"name"`
	// Path is the absolute directory the user gave; edits there take effect at once.
	Path string `json:"path"`
	// Description is the Skill's own description as of registration; views show the current one.
	Description string `json:"description"`
	// Enabled Skills are in the allowlist and projected into the Pet workspace.
	Enabled bool `json:"enabled"`
	// Shortcut Skills appear on the wheel.
	Shortcut bool `json:"shortcut"`
	// Executor runs an instruction Skill: builtin (the Pixie model; also the stored empty
	// value), claude (Claude Code) or codex (Codex). The person chooses it; SKILL.md has no say.
	Executor string `json:"executor,omitempty"`
	// Identity is the directory's device and inode ("dev:ino") as registered (or as accepted by
	// the last projection rebuild): another directory at the same path is drift.
	Identity string `json:"identity,omitempty"`
	// Sandbox is the sandbox policy registration granted (what SKILL.md asked for, confirmed):
	// read-only or workspace-write. Every Run of the Skill uses it (or less, when SKILL.md now
	// asks for less); empty in older records means read-only.
	Sandbox      runtime.Policy `json:"sandbox,omitempty"`
	RegisteredAt time.Time      `json:"registeredAt"`
	UpdatedAt    time.Time      `json:"updatedAt"`
}

// Inspection is the read-only result of looking at a Skill directory before registering it.
type Inspection struct {
	Path        string    `json:"path"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Kind        SkillKind `json:"kind"`
	// Sandbox is the sandbox policy SKILL.md asks for (its "sandbox" key; read-only when
	// absent). Registration must confirm it.
	Sandbox   runtime.Policy `json:"sandbox"`
	Files     []SkillFile    `json:"files"`
	TotalSize int64          `json:"totalSize"`
	// Fingerprint digests every file's path and content; Register requires it, so the Skill
	// registered is the one inspected.
	Fingerprint string `json:"fingerprint"`
	// Registered reports that a Skill of this name exists (at RegisteredPath).
	Registered     bool   `json:"registered"`
	RegisteredPath string `json:"registeredPath,omitempty"`
}

// Inspect reads and validates the Skill directory at path without changing anything.
func (s *Service) Inspect(ctx context.Context, path string) (Inspection, error) {
	p, err := cleanSkillPath(path)
	if err != nil {
		return Inspection{}, err
	}
	sc, err := s.scanSkill(p, true)
	if err != nil {
		return Inspection{}, err
	}
	in := Inspection{Path: p, Name: sc.name, Description: sc.description, Kind: sc.kind, Sandbox: sc.sandbox,
		Files: sc.files, TotalSize: sc.total, Fingerprint: sc.fingerprint}
	err = s.st.View(ctx, func(tx *store.Tx) error {
		old, err := skillsC.Get(tx, sc.name)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		in.Registered, in.RegisteredPath = true, old.Path
		return nil
	})
	return in, err
}

// RegisterRequest registers the Skill directory at Path.
type RegisterRequest struct {
	Path string `json:"path"`
	// Confirm must be true: registration is the separately confirmed second step after Inspect.
	Confirm bool `json:"confirm"`
	// Fingerprint is required and must equal the fingerprint Inspect showed: what is registered
	// is what was inspected, unchanged since.
	Fingerprint string `json:"fingerprint"`
	// Sandbox confirms the sandbox policy the Skill asks for (Inspection.Sandbox): it must
	// equal it. It may be left out only when the Skill asks for read-only.
	Sandbox runtime.Policy `json:"sandbox,omitempty"`
	// Enabled and Shortcut set those facts at once (both default to false).
	Enabled  bool `json:"enabled,omitempty"`
	Shortcut bool `json:"shortcut,omitempty"`
	// Executor runs the Skill when it is an instruction Skill: builtin (the default), claude or
	// codex. Another executor than builtin is refused for a WASM or script Skill.
	Executor string `json:"executor,omitempty"`
}

// Register validates the directory again and stores the link name → path.
func (s *Service) Register(ctx context.Context, req RegisterRequest) (SkillView, error) {
	if !req.Confirm {
		return SkillView{}, errs.New(errs.Invalid, "registration must be confirmed: inspect the Skill first, then register it with confirm set")
	}
	if req.Fingerprint == "" {
		return SkillView{}, errs.New(errs.Invalid, "registration needs the fingerprint of an inspection: inspect the Skill first and pass the fingerprint it showed")
	}
	p, err := cleanSkillPath(req.Path)
	if err != nil {
		return SkillView{}, err
	}
	sc, err := s.scanSkill(p, true)
	if err != nil {
		return SkillView{}, err
	}
	if req.Fingerprint != sc.fingerprint {
		return SkillView{}, errs.New(errs.Conflict, "the Skill at %s changed since it was inspected (or the fingerprint is not the one inspection showed); inspect it again", p)
	}
	switch {
	case req.Sandbox == "" && sc.sandbox != runtime.PolicyReadOnly:
		return SkillView{}, errs.New(errs.Invalid, "the Skill %s asks for the %s sandbox (its commands may change files in the snapshot's folder): confirm it by registering with sandbox %q", sc.name, sc.sandbox, sc.sandbox)
	case req.Sandbox != "" && req.Sandbox != sc.sandbox:
		return SkillView{}, errs.New(errs.Conflict, "the Skill %s asks for the %s sandbox, not %q: inspect it again and confirm what it asks for", sc.name, sc.sandbox, req.Sandbox)
	}
	executor, err := checkSkillExecutor(req.Executor, sc.kind)
	if err != nil {
		return SkillView{}, err
	}
	s.skillMu.Lock()
	defer s.skillMu.Unlock()
	now := s.now()
	sk := Skill{Name: sc.name, Path: p, Description: sc.description, Enabled: req.Enabled,
		Shortcut: req.Shortcut, Executor: storedExecutor(executor), Identity: sc.identity, Sandbox: sc.sandbox, RegisteredAt: now, UpdatedAt: now}
	// Check first, so that a refused registration leaves no projection entry behind.
	if err := s.st.View(ctx, func(tx *store.Tx) error { return s.checkNewSkill(tx, sk) }); err != nil {
		return SkillView{}, err
	}
	if sk.Enabled {
		if err := s.project(sk); err != nil {
			return SkillView{}, err
		}
	}
	err = s.st.Update(ctx, func(tx *store.Tx) error {
		if err := s.checkNewSkill(tx, sk); err != nil {
			return err
		}
		return skillsC.Put(tx, sk.Name, sk)
	})
	if err != nil {
		if sk.Enabled {
			s.unproject(sk.Name)
		}
		return SkillView{}, err
	}
	return s.viewSkill(ctx, sk), nil
}

func (s *Service) checkNewSkill(tx *store.Tx, sk Skill) error {
	old, err := skillsC.Get(tx, sk.Name)
	switch {
	case err == nil:
		return errs.New(errs.Conflict, "a Skill named %q is already registered (→ %s); remove it first", sk.Name, old.Path)
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	if sk.Shortcut {
		return s.checkWheelRoom(tx, sk.Name)
	}
	return nil
}

// SkillPatch changes the enabled and shortcut facts and the executor of a Skill; nil fields
// are left alone.
type SkillPatch struct {
	Enabled  *bool `json:"enabled,omitempty"`
	Shortcut *bool `json:"shortcut,omitempty"`
	// Executor is builtin, claude or codex (instruction Skills only).
	Executor *string `json:"executor,omitempty"`
}

// UpdateSkill changes whether a Skill is enabled (which projects it into, or removes it from,
// the Pet workspace) and whether it is a shortcut on the wheel.
func (s *Service) UpdateSkill(ctx context.Context, name string, patch SkillPatch) (SkillView, error) {
	if !ValidSkillName(name) {
		return SkillView{}, errs.New(errs.Invalid, "%q is not a Skill name", name)
	}
	if patch.Enabled == nil && patch.Shortcut == nil && patch.Executor == nil {
		return SkillView{}, errs.New(errs.Invalid, "nothing to change: set enabled, shortcut and/or executor")
	}
	if patch.Executor != nil {
		if _, err := checkExecutor(*patch.Executor); err != nil {
			return SkillView{}, err
		}
	}
	s.skillMu.Lock()
	defer s.skillMu.Unlock()
	sk, err := s.getSkill(ctx, name)
	if err != nil {
		return SkillView{}, err
	}
	var executor string
	if patch.Executor != nil {
		// The kind the Skill has now decides. One that does not resolve now is taken as an
		// instruction Skill; should it come back as another kind, it shows unavailable, with
		// the reason, until its executor is builtin again.
		kind := KindInstructions
		if sc, err := s.scanSkill(sk.Path, false); err == nil {
			kind = sc.kind
		}
		if executor, err = checkSkillExecutor(*patch.Executor, kind); err != nil {
			return SkillView{}, err
		}
	}
	enable := patch.Enabled != nil && *patch.Enabled && !sk.Enabled
	disable := patch.Enabled != nil && !*patch.Enabled && sk.Enabled
	if enable {
		// Enabling projects the Skill: it must resolve to a valid directory now.
		sc, err := s.scanSkill(sk.Path, false)
		if err != nil {
			return SkillView{}, errs.Wrap(errs.CodeOf(err), err, "cannot enable %s: %s", name, msgOf(err)).WithDetails(detailsOf(err))
		}
		if sc.name != name {
			return SkillView{}, errs.New(errs.Unprocessable, "cannot enable %s: its SKILL.md now names %q; register that Skill instead", name, sc.name)
		}
		if err := s.project(sk); err != nil {
			return SkillView{}, err
		}
	}
	err = s.st.Update(ctx, func(tx *store.Tx) error {
		cur, err := skillsC.Get(tx, name)
		if err != nil {
			return notFoundSkill(name, err)
		}
		if patch.Enabled != nil {
			cur.Enabled = *patch.Enabled
		}
		if patch.Executor != nil {
			cur.Executor = storedExecutor(executor)
		}
		if patch.Shortcut != nil {
			if *patch.Shortcut && !cur.Shortcut {
				if err := s.checkWheelRoom(tx, name); err != nil {
					return err
				}
			}
			cur.Shortcut = *patch.Shortcut
		}
		cur.UpdatedAt = s.now()
		sk = cur
		return skillsC.Put(tx, name, cur)
	})
	if err != nil {
		if enable {
			s.unproject(name)
		}
		return SkillView{}, err
	}
	if disable {
		s.unproject(name)
	}
	return s.viewSkill(ctx, sk), nil
}

// RemoveSkill unregisters a Skill and removes its projection entry. The user's directory is
// never touched.
func (s *Service) RemoveSkill(ctx context.Context, name string) error {
	if !ValidSkillName(name) {
		return errs.New(errs.Invalid, "%q is not a Skill name", name)
	}
	s.skillMu.Lock()
	defer s.skillMu.Unlock()
	err := s.st.Update(ctx, func(tx *store.Tx) error {
		if _, err := skillsC.Get(tx, name); err != nil {
			return notFoundSkill(name, err)
		}
		if err := driftC.Delete(tx, name); err != nil {
			return err
		}
		return skillsC.Delete(tx, name)
	})
	if err != nil {
		return err
	}
	s.unproject(name)
	return nil
}

// SkillView is a registered Skill with its live state.
type SkillView struct {
	Skill
	// Kind is how the Skill runs now (empty when it does not resolve).
	Kind SkillKind `json:"kind,omitempty"`
	// SandboxAsked is the sandbox policy SKILL.md asks for now (empty when it does not
	// resolve); more than Sandbox (the grant) makes the Skill fail closed.
	SandboxAsked runtime.Policy `json:"sandboxAsked,omitempty"`
	// Resolvable reports that the link resolves to a directory that passes validation now.
	Resolvable bool `json:"resolvable"`
	// Projection is the state of the Skill's entry in the Pet workspace: ok, absent (a disabled
	// Skill), or the drift found (missing, not-symlink, broken, wrong-target).
	Projection string `json:"projection"`
	// Drift reports that the Skill fails closed until the projection is rebuilt.
	Drift bool `json:"drift"`
	// Available reports that an invocation would run; Reason says why not.
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"`
}

// Skills lists the registered Skills by name, with their live state.
func (s *Service) Skills(ctx context.Context) ([]SkillView, error) {
	list, err := s.listSkills(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]SkillView, 0, len(list))
	for _, sk := range list {
		out = append(out, s.viewSkill(ctx, sk))
	}
	return out, nil
}

// Skill returns one registered Skill with its live state.
func (s *Service) Skill(ctx context.Context, name string) (SkillView, error) {
	if !ValidSkillName(name) {
		return SkillView{}, errs.New(errs.Invalid, "%q is not a Skill name", name)
	}
	sk, err := s.getSkill(ctx, name)
	if err != nil {
		return SkillView{}, err
	}
	return s.viewSkill(ctx, sk), nil
}

func (s *Service) listSkills(ctx context.Context) ([]Skill, error) {
	var out []Skill
	err := s.st.View(ctx, func(tx *store.Tx) error {
		out = out[:0]
		return skillsC.Each(tx, "", store.ScanOptions{}, func(_ string, sk Skill) error {
			out = append(out, sk)
			return nil
		})
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

func (s *Service) getSkill(ctx context.Context, name string) (Skill, error) {
	var sk Skill
	err := s.st.View(ctx, func(tx *store.Tx) error {
		var err error
		sk, err = skillsC.Get(tx, name)
		return notFoundSkill(name, err)
	})
	return sk, err
}

func notFoundSkill(name string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return errs.New(errs.NotFound, "no Skill named %q is registered", name)
	}
	return err
}

// checkSkillExecutor validates an executor for a Skill of kind: only instruction Skills run on
// an external CLI.
func checkSkillExecutor(e string, kind SkillKind) (string, error) {
	ex, err := checkExecutor(e)
	if err != nil {
		return "", err
	}
	if ex != ExecutorBuiltin && kind != KindInstructions {
		return "", errs.New(errs.Invalid, "the executor %s runs instruction Skills (SKILL.md alone); this is a %s Skill", ex, kind)
	}
	return ex, nil
}

// storedExecutor is what the Skill record keeps: builtin as the empty default.
func storedExecutor(ex string) string {
	if ex == ExecutorBuiltin {
		return ""
	}
	return ex
}

// viewSkill computes a Skill's live state; it never fails (problems become the Reason).
func (s *Service) viewSkill(ctx context.Context, sk Skill) SkillView {
	v := SkillView{Skill: sk}
	v.Sandbox = sk.granted()
	v.Executor = executorOf(sk)
	st := s.skillState(ctx, sk)
	if st.scan != nil {
		v.Kind = st.scan.kind
		v.SandboxAsked = st.scan.sandbox
		v.Description = st.scan.description
	}
	v.Resolvable = st.resolveErr == nil
	v.Projection = st.projection
	v.Drift = st.drift
	if st.err != nil {
		v.Reason = msgOf(st.err)
	} else {
		v.Available = true
	}
	return v
}

// msgOf is the client-safe message of an error.
func msgOf(err error) string {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}

// detailsOf returns the details of a coded error, if any.
func detailsOf(err error) any {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Details
	}
	return nil
}

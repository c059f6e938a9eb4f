package pet

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/runtime"
)

// Projection states of a Skill's entry in <workspace>/.pixie/skills.
const (
	ProjectionOK          = "ok"           // a symlink to the Skill's path
	ProjectionAbsent      = "absent"       // no entry, as a disabled Skill should have
	ProjectionStray       = "stray"        // an entry for a disabled Skill
	ProjectionMissing     = "missing"      // drift: an enabled Skill has no entry
	ProjectionNotSymlink  = "not-symlink"  // drift: the entry is a file or directory
	ProjectionBroken      = "broken"       // drift: the symlink's target does not resolve
	ProjectionWrongTarget = "wrong-target" // drift: the symlink points somewhere else
)

// driftMark is pet-drift/<name>: drift was seen, and the Skill fails closed until a rebuild.
type driftMark struct {
	Problem string    `json:"problem"`
	SeenAt  time.Time `json:"seenAt"`
}

// entryState inspects the projection entry of name for a Skill at target.
func (s *Service) entryState(name, target string) string {
	p := filepath.Join(s.projectionDir(), name)
	info, err := os.Lstat(p)
	if err != nil {
		return ProjectionMissing
	}
	if info.Mode()&fs.ModeSymlink == 0 {
		return ProjectionNotSymlink
	}
	if st, err := os.Stat(p); err != nil || !st.IsDir() {
		return ProjectionBroken
	}
	if dest, err := os.Readlink(p); err != nil || dest != target {
		return ProjectionWrongTarget
	}
	return ProjectionOK
}

// ensureProjectionDir creates the skills folder, refusing when it, or .pixie above it, is not a
// real directory (someone replaced it with a symlink): that is drift only a rebuild repairs.
func (s *Service) ensureProjectionDir() error {
	if err := os.MkdirAll(s.cfg.Workspace, 0o700); err != nil {
		return errs.Wrap(errs.Unavailable, err, "cannot create the Pet workspace %s: %s", s.cfg.Workspace, errText(err))
	}
	dir := s.cfg.Workspace
	for _, el := range strings.Split(ProjectionDir, "/") {
		dir = filepath.Join(dir, el)
		info, err := os.Lstat(dir)
		if errors.Is(err, fs.ErrNotExist) {
			if err := os.Mkdir(dir, 0o700); err != nil {
				return errs.Wrap(errs.Unavailable, err, "cannot create %s: %s", dir, errText(err))
			}
			continue
		}
		if err != nil {
			return errs.Wrap(errs.Unavailable, err, "cannot read %s: %s", dir, errText(err))
		}
		if !info.IsDir() || info.Mode()&fs.ModeSymlink != 0 {
			return errs.New(errs.Conflict, "projection drift: %s is not a directory; rebuild the projection", dir)
		}
	}
	return nil
}

// project creates (or repairs a stale symlink into) the projection entry of sk. An entry that is
// not a symlink is left alone and refused: only a rebuild removes it.
func (s *Service) project(sk Skill) error {
	if err := s.ensureProjectionDir(); err != nil {
		return err
	}
	p := filepath.Join(s.projectionDir(), sk.Name)
	if info, err := os.Lstat(p); err == nil {
		if info.Mode()&fs.ModeSymlink == 0 {
			return errs.New(errs.Conflict, "projection drift: %s exists and is not a symlink; rebuild the projection", p)
		}
		if dest, err := os.Readlink(p); err == nil && dest == sk.Path {
			return nil
		}
		if err := os.Remove(p); err != nil {
			return errs.Wrap(errs.Unavailable, err, "cannot replace the projection entry %s: %s", p, errText(err))
		}
	}
	if err := os.Symlink(sk.Path, p); err != nil {
		return errs.Wrap(errs.Unavailable, err, "cannot project %s into %s: %s", sk.Name, s.projectionDir(), errText(err))
	}
	return nil
}

// unproject removes the projection entry of name when it is a symlink (anything else there is
// drift, left for a rebuild).
func (s *Service) unproject(name string) {
	p := filepath.Join(s.projectionDir(), name)
	if info, err := os.Lstat(p); err == nil && info.Mode()&fs.ModeSymlink != 0 {
		if err := os.Remove(p); err != nil {
			s.log.Warn("pet: cannot remove a projection entry", "entry", p, "err", err)
		}
	}
}

// RebuildReport says what a projection rebuild did.
type RebuildReport struct {
	// Created are the enabled Skills whose entry was (re)created.
	Created []string `json:"created"`
	// Kept are the enabled Skills whose entry was already right.
	Kept []string `json:"kept"`
	// Removed are the entries removed: stray ones and drifted ones that were replaced.
	Removed []string `json:"removed"`
	// Cleared are the Skills whose sticky drift mark was cleared.
	Cleared []string `json:"cleared"`
}

// RebuildProjection makes the projection exactly the enabled Skills, each a symlink to its
// path, removes everything else in the skills folder (it belongs to Pet), and clears every
// drift mark. It is the only way a drifted Skill runs again.
func (s *Service) RebuildProjection(ctx context.Context) (RebuildReport, error) {
	s.skillMu.Lock()
	defer s.skillMu.Unlock()
	rep := RebuildReport{Created: []string{}, Kept: []string{}, Removed: []string{}, Cleared: []string{}}
	list, err := s.listSkills(ctx)
	if err != nil {
		return rep, err
	}
	// A .pixie or skills path that is not a real directory is replaced.
	dir := s.cfg.Workspace
	for _, el := range strings.Split(ProjectionDir, "/") {
		dir = filepath.Join(dir, el)
		if info, err := os.Lstat(dir); err == nil && (!info.IsDir() || info.Mode()&fs.ModeSymlink != 0) {
			if err := os.Remove(dir); err != nil {
				return rep, errs.Wrap(errs.Unavailable, err, "cannot remove %s: %s", dir, errText(err))
			}
			rep.Removed = append(rep.Removed, dir)
		}
	}
	if err := s.ensureProjectionDir(); err != nil {
		return rep, err
	}
	want := map[string]Skill{}
	for _, sk := range list {
		if sk.Enabled {
			want[sk.Name] = sk
		}
	}
	entries, err := os.ReadDir(s.projectionDir())
	if err != nil {
		return rep, errs.Wrap(errs.Unavailable, err, "cannot read %s: %s", s.projectionDir(), errText(err))
	}
	for _, e := range entries {
		name := e.Name()
		if sk, ok := want[name]; ok && s.entryState(name, sk.Path) == ProjectionOK {
			continue
		}
		p := filepath.Join(s.projectionDir(), name)
		if err := os.RemoveAll(p); err != nil {
			return rep, errs.Wrap(errs.Unavailable, err, "cannot remove the projection entry %s: %s", p, errText(err))
		}
		rep.Removed = append(rep.Removed, name)
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		sk := want[n]
		if s.entryState(n, sk.Path) == ProjectionOK {
			rep.Kept = append(rep.Kept, n)
			continue
		}
		if err := os.Symlink(sk.Path, filepath.Join(s.projectionDir(), n)); err != nil {
			return rep, errs.Wrap(errs.Unavailable, err, "cannot project %s: %s", n, errText(err))
		}
		rep.Created = append(rep.Created, n)
	}
	// The rebuild accepts the directory now at each Skill's path as the Skill's (its identity),
	// so a Skill moved and brought back runs again only after it.
	identities := map[string]string{}
	for _, sk := range list {
		if info, err := os.Lstat(sk.Path); err == nil && info.IsDir() && info.Mode()&fs.ModeSymlink == 0 {
			identities[sk.Name] = fileIdentity(info)
		}
	}
	err = s.st.Update(ctx, func(tx *store.Tx) error {
		rep.Cleared = rep.Cleared[:0]
		marks, err := driftC.List(tx, "", store.ScanOptions{})
		if err != nil {
			return err
		}
		for _, m := range marks {
			if err := driftC.Delete(tx, m.ID); err != nil {
				return err
			}
			rep.Cleared = append(rep.Cleared, m.ID)
		}
		for name, id := range identities {
			sk, err := skillsC.Get(tx, name)
			if err != nil || sk.Identity == id {
				continue
			}
			sk.Identity = id
			if err := skillsC.Put(tx, name, sk); err != nil {
				return err
			}
		}
		return nil
	})
	return rep, err
}

// skillState is the live state of a registered Skill.
type skillState struct {
	scan       *scan
	resolveErr error
	projection string
	drift      bool
	// err is why an invocation would be refused (nil when it would run).
	err error
}

// movedReason says why the directory at sk.Path is no longer the registered one ("" when it
// is): gone, a symlink or a file now, under a symlinked parent, or another directory (another
// device and inode than registered).
func movedReason(sk Skill) string {
	info, err := os.Lstat(sk.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "the directory is gone (moved or deleted)"
	case err != nil:
		return ""
	case info.Mode()&fs.ModeSymlink != 0:
		return "the directory was replaced by a symlink"
	case !info.IsDir():
		return "the directory was replaced by a file"
	}
	if real, err := filepath.EvalSymlinks(sk.Path); err == nil && real != sk.Path {
		return "a parent folder is now a symlink (the path resolves to " + real + ")"
	}
	if id := fileIdentity(info); sk.Identity != "" && id != "" && id != sk.Identity {
		return "another directory now stands at the path (it was moved away and something put in its place)"
	}
	return ""
}

// markDrift records a sticky drift mark for the Skill name, unless one exists or the Skill was
// removed meanwhile.
func (s *Service) markDrift(ctx context.Context, name, problem string) driftMark {
	mark := driftMark{Problem: problem, SeenAt: s.now()}
	s.log.Warn("pet: drift; the Skill fails closed until the projection is rebuilt", "skill", name, "problem", problem)
	err := s.st.Update(ctx, func(tx *store.Tx) error {
		if _, err := skillsC.Get(tx, name); err != nil {
			return nil // removed meanwhile
		}
		if old, err := driftC.Get(tx, name); err == nil {
			mark = old
			return nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return driftC.Put(tx, name, mark)
	})
	if err != nil {
		s.log.Warn("pet: cannot record drift", "skill", name, "err", err)
	}
	return mark
}

// skillState resolves sk now: its link, its directory's validity and identity, its projection
// entry and its sticky drift mark, and the availability of its executor. Drift seen on a
// resolvable, enabled Skill, and a registered directory moved or replaced, are recorded as
// sticky marks.
func (s *Service) skillState(ctx context.Context, sk Skill) skillState {
	var st skillState
	moved := movedReason(sk)
	sc, err := s.scanSkill(sk.Path, false)
	switch {
	case err != nil:
		st.resolveErr = errs.Wrap(errs.Unprocessable, err, "Skill %s does not resolve: %s", sk.Name, msgOf(err)).WithDetails(detailsOf(err))
	case sc.name != sk.Name:
		st.resolveErr = errs.New(errs.Unprocessable, "Skill %s does not resolve: its SKILL.md now names %q; register that Skill instead", sk.Name, sc.name)
	default:
		st.scan = sc
	}
	if !sk.Enabled {
		st.projection = ProjectionAbsent
		if _, err := os.Lstat(filepath.Join(s.projectionDir(), sk.Name)); err == nil {
			st.projection = ProjectionStray
		}
	} else {
		st.projection = s.entryState(sk.Name, sk.Path)
	}
	// A projection problem of an enabled, resolvable Skill is drift, made sticky.
	var mark driftMark
	haveMark := false
	err = s.st.View(ctx, func(tx *store.Tx) error {
		m, err := driftC.Get(tx, sk.Name)
		switch {
		case err == nil:
			mark, haveMark = m, true
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		return nil
	})
	if err != nil {
		// Fail closed: a drift mark that cannot be read may exist.
		st.err = errs.Wrap(errs.Unavailable, err, "Skill %s: cannot read its drift state", sk.Name)
		return st
	}
	switch {
	case haveMark:
	case moved != "":
		// A moved directory stays drift even once something is back at the path.
		mark, haveMark = s.markDrift(ctx, sk.Name, "moved: "+moved), true
	case sk.Enabled && st.resolveErr == nil && st.projection != ProjectionOK:
		mark, haveMark = s.markDrift(ctx, sk.Name, st.projection), true
	}
	st.drift = haveMark
	switch {
	case !sk.Enabled:
		st.err = errs.New(errs.Conflict, "Skill %s is disabled", sk.Name)
	case st.resolveErr != nil:
		st.err = st.resolveErr
	case st.drift:
		kind := "projection drift"
		if strings.HasPrefix(mark.Problem, "moved:") {
			kind = "drift"
		}
		st.err = errs.New(errs.Conflict, "Skill %s fails closed: %s (%s, seen %s); rebuild the projection", sk.Name, kind, mark.Problem, mark.SeenAt.Format(time.RFC3339))
	default:
		if err := sandboxGranted(sk, st.scan.sandbox); err != nil {
			st.err = err
		} else if ok, reason := s.skillExecutorAvailable(ctx, sk, st.scan.kind); !ok {
			st.err = errs.New(errs.Unavailable, "Skill %s cannot run: %s", sk.Name, reason)
		}
	}
	return st
}

// granted is the sandbox policy a Skill's registration granted (read-only for records made
// before Skills could ask for more).
func (sk Skill) granted() runtime.Policy {
	if sk.Sandbox == "" {
		return runtime.PolicyReadOnly
	}
	return sk.Sandbox
}

// policyRank orders the policies a Skill may hold.
func policyRank(p runtime.Policy) int {
	switch p {
	case runtime.PolicyReadOnly:
		return 0
	case runtime.PolicyWorkspaceWrite:
		return 1
	}
	return 2
}

// sandboxGranted fails closed when the Skill's SKILL.md now asks for more than its registration
// granted (it was edited since).
func sandboxGranted(sk Skill, asked runtime.Policy) error {
	if policyRank(asked) > policyRank(sk.granted()) {
		return errs.New(errs.Conflict, "Skill %s fails closed: its SKILL.md now asks for the %s sandbox, but it was registered with %s; remove it and register it again to grant that", sk.Name, asked, sk.granted())
	}
	return nil
}

package pet_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/pet"
)

// problems returns the refusal's problems.
func problems(t *testing.T, err error) []pet.Problem {
	t.Helper()
	var e *errs.Error
	if !errors.As(err, &e) {
		t.Fatalf("not a coded error: %v", err)
	}
	p, _ := e.Details.([]pet.Problem)
	return p
}

func TestInspectRefusals(t *testing.T) {
	const limitFiles, limitFile, limitTotal = 5, 100, 300
	cfg := pet.Config{MaxSkillFiles: limitFiles, MaxSkillFileSize: limitFile, MaxSkillSize: limitTotal, MaxSkillModuleSize: 200}
	e := newEnv(t, nil, nil, cfg)
	ctx := context.Background()
	fill := func(n int) string { return strings.Repeat("x", n) }
	tests := []struct {
		name    string
		setup   func(t *testing.T) string // returns the path to inspect
		code    errs.Code
		problem string // a substring of some problem's reason (or of the message)
	}{
		{"symlink", func(t *testing.T) string {
			d := skillDir(t, "a", "d", "body", nil)
			if err := os.Symlink("/etc/passwd", filepath.Join(d, "link")); err != nil {
				t.Fatal(err)
			}
			return d
		}, errs.Unprocessable, "symlinks are not allowed"},
		{"symlinked directory", func(t *testing.T) string {
			d := skillDir(t, "a", "d", "body", nil)
			if err := os.Symlink(t.TempDir(), filepath.Join(d, "sub")); err != nil {
				t.Fatal(err)
			}
			return d
		}, errs.Unprocessable, "symlinks are not allowed"},
		{"fifo", func(t *testing.T) string {
			d := skillDir(t, "a", "d", "body", nil)
			if err := syscall.Mkfifo(filepath.Join(d, "pipe"), 0o644); err != nil {
				t.Fatal(err)
			}
			return d
		}, errs.Unprocessable, "special files are not allowed (fifo)"},
		{"../ escape", func(t *testing.T) string {
			d := skillDir(t, "a", "d", "body", nil)
			return filepath.Dir(d) + "/../skills/a"
		}, errs.Unprocessable, "path escape"},
		{"relative path", func(t *testing.T) string { return "skills/a" }, errs.Invalid, "not absolute"},
		{"root is a symlink", func(t *testing.T) string {
			d := skillDir(t, "a", "d", "body", nil)
			l := filepath.Join(t.TempDir(), "alias")
			if err := os.Symlink(d, l); err != nil {
				t.Fatal(err)
			}
			return l
		}, errs.Unprocessable, "is a symlink"},
		{"missing directory", func(t *testing.T) string { return filepath.Join(t.TempDir(), "none") }, errs.NotFound, "no Skill directory"},
		{"oversized file", func(t *testing.T) string {
			return skillDir(t, "a", "d", "body", map[string]string{"big.txt": fill(limitFile + 1)})
		}, errs.Unprocessable, "the per-file limit is 100"},
		{"too many files", func(t *testing.T) string {
			files := map[string]string{}
			for i := range limitFiles { // + SKILL.md = limit+1
				files["f"+string(rune('a'+i))] = "x"
			}
			return skillDir(t, "a", "d", "body", files)
		}, errs.Unprocessable, "more than 5 files"},
		{"oversized skill.wasm", func(t *testing.T) string {
			return skillDir(t, "a", "d", "body", map[string]string{pet.WASMFile: fill(201)})
		}, errs.Unprocessable, "the limit for skill.wasm is 200"},
		{"total size", func(t *testing.T) string {
			return skillDir(t, "a", "d", "body", map[string]string{"1": fill(100), "2": fill(100), "3": fill(100)})
		}, errs.Unprocessable, "in total; the limit is 300"},
		{"bad name", func(t *testing.T) string { return skillDir(t, "Bad_Name", "d", "body", nil) }, errs.Unprocessable, "not kebab-case"},
		{"double hyphen", func(t *testing.T) string { return skillDir(t, "a--b", "d", "body", nil) }, errs.Unprocessable, "not kebab-case"},
		{"name too long", func(t *testing.T) string { return skillDir(t, strings.Repeat("a", 65), "d", "b", nil) }, errs.Unprocessable, "not kebab-case"},
		{"missing description", func(t *testing.T) string { return skillDir(t, "a", "", "body", nil) }, errs.Unprocessable, "no description"},
		{"blank description", func(t *testing.T) string { return skillDir(t, "a", `"   "`, "body", nil) }, errs.Unprocessable, "no description"},
		{"missing SKILL.md", func(t *testing.T) string {
			d := skillDir(t, "a", "d", "body", nil)
			os.Remove(filepath.Join(d, pet.ManifestFile))
			writeFile(t, filepath.Join(d, "README.md"), "hi")
			return d
		}, errs.Unprocessable, "SKILL.md is missing"},
		{"no front matter", func(t *testing.T) string {
			d := skillDir(t, "a", "d", "body", nil)
			writeFile(t, filepath.Join(d, pet.ManifestFile), "# just text\n")
			return d
		}, errs.Unprocessable, "no front matter"},
		{"unclosed front matter", func(t *testing.T) string {
			d := skillDir(t, "a", "d", "body", nil)
			writeFile(t, filepath.Join(d, pet.ManifestFile), "---\nname: a\ndescription: d\n")
			return d
		}, errs.Unprocessable, "not closed"},
		{"instructions without a body", func(t *testing.T) string { return skillDir(t, "a", "d", "", nil) }, errs.Unprocessable, "no instructions"},
		{"not a directory", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "file")
			writeFile(t, p, "x")
			return p
		}, errs.Unprocessable, "not a directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.setup(t)
			_, err := e.svc.Inspect(ctx, p)
			if err == nil {
				t.Fatalf("inspect %s succeeded", p)
			}
			if got := errs.CodeOf(err); got != tc.code {
				t.Fatalf("code %s, want %s: %v", got, tc.code, err)
			}
			found := strings.Contains(err.Error(), tc.problem)
			for _, p := range problems(t, err) {
				found = found || strings.Contains(p.Reason, tc.problem)
			}
			if !found {
				t.Fatalf("no problem mentions %q: %v %+v", tc.problem, err, problems(t, err))
			}
			// A refused directory cannot be registered either, and nothing is stored.
			if _, err := e.svc.Register(ctx, pet.RegisterRequest{Path: p, Confirm: true, Enabled: true}); err == nil {
				t.Fatal("register of a refused directory succeeded")
			}
			list, err := e.svc.Skills(ctx)
			if err != nil || len(list) != 0 {
				t.Fatalf("skills after refusal: %v %v", list, err)
			}
		})
	}
}

func TestInspectLimitsAtTheirEdge(t *testing.T) {
	const limitFiles, limitFile, limitTotal = 5, 100, 300
	e := newEnv(t, nil, nil, pet.Config{MaxSkillFiles: limitFiles, MaxSkillFileSize: limitFile, MaxSkillSize: limitTotal, MaxSkillModuleSize: 200})
	manifest := "---\nname: a\ndescription: d\n---\nbody\n" // 36 bytes
	files := map[string]string{
		"1": strings.Repeat("x", limitFile), // exactly the per-file limit
		"2": strings.Repeat("x", 100),
		"3": strings.Repeat("x", limitTotal-200-len(manifest)), // total exactly the limit
		"4": "",                                                // 5 files with SKILL.md: exactly the count limit
	}
	// skill.wasm has its own limit and counts towards neither the per-file limit nor the total
	// (it does count as a file).
	wasmDir := skillDir(t, "w", "d", "body\n", map[string]string{pet.WASMFile: strings.Repeat("x", 200)})
	if in, err := e.svc.Inspect(context.Background(), wasmDir); err != nil || in.Kind != pet.KindWASM || in.TotalSize != int64(len(manifest)) {
		t.Fatalf("skill.wasm at its limit: %+v %v", in, err)
	}
	d := skillDir(t, "a", "d", "body\n", files)
	in, err := e.svc.Inspect(context.Background(), d)
	if err != nil {
		t.Fatalf("at the limits: %v %+v", err, problems(t, err))
	}
	if len(in.Files) != limitFiles || in.TotalSize != limitTotal {
		t.Fatalf("files %d size %d", len(in.Files), in.TotalSize)
	}
	// One byte more in total fails.
	writeFile(t, filepath.Join(d, "4"), "x")
	if _, err := e.svc.Inspect(context.Background(), d); err == nil || !strings.Contains(err.Error(), "in total") {
		t.Fatalf("one byte over the total: %v", err)
	}
}

func TestInspectShowsTheSkill(t *testing.T) {
	e := newEnv(t, nil, nil, pet.Config{})
	ctx := context.Background()
	d := skillDir(t, "tidy-worktree", "Clean up a worktree.", "Do the thing.\n", map[string]string{
		"scripts/helper.sh": "echo hi", "run.sh": "echo run",
	})
	in, err := e.svc.Inspect(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if in.Name != "tidy-worktree" || in.Description != "Clean up a worktree." || in.Kind != pet.KindScript || in.Registered {
		t.Fatalf("inspection %+v", in)
	}
	var paths []string
	for _, f := range in.Files {
		paths = append(paths, f.Path)
	}
	if strings.Join(paths, ",") != "SKILL.md,run.sh,scripts/helper.sh" || in.Fingerprint == "" {
		t.Fatalf("inventory %v fingerprint %q", paths, in.Fingerprint)
	}
	// Inspection is read-only.
	if list, _ := e.svc.Skills(ctx); len(list) != 0 {
		t.Fatal("inspect registered something")
	}
	if _, err := os.Lstat(filepath.Join(e.ws, pet.ProjectionDir)); !os.IsNotExist(err) {
		t.Fatal("inspect created the projection")
	}
}

func TestRegisterNeedsConfirmationAndTheInspectedContent(t *testing.T) {
	e := newEnv(t, nil, nil, pet.Config{})
	ctx := context.Background()
	d := skillDir(t, "a", "d", "body", nil)
	in, err := e.svc.Inspect(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Register(ctx, pet.RegisterRequest{Path: d}); errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("unconfirmed: %v", err)
	}
	// confirm:true without the fingerprint of an inspection is refused, and stores nothing.
	if _, err := e.svc.Register(ctx, pet.RegisterRequest{Path: d, Confirm: true}); errs.CodeOf(err) != errs.Invalid || !strings.Contains(err.Error(), "fingerprint of an inspection") {
		t.Fatalf("no fingerprint: %v", err)
	}
	if _, err := e.svc.Register(ctx, pet.RegisterRequest{Path: d, Confirm: true, Fingerprint: strings.Repeat("0", 64)}); errs.CodeOf(err) != errs.Conflict {
		t.Fatalf("a made-up fingerprint: %v", err)
	}
	if list, _ := e.svc.Skills(ctx); len(list) != 0 {
		t.Fatalf("a refused registration stored %+v", list)
	}
	writeFile(t, filepath.Join(d, "new.txt"), "changed")
	if _, err := e.svc.Register(ctx, pet.RegisterRequest{Path: d, Confirm: true, Fingerprint: in.Fingerprint}); errs.CodeOf(err) != errs.Conflict {
		t.Fatalf("changed since inspection: %v", err)
	}
	v, err := e.svc.Register(ctx, pet.RegisterRequest{Path: d, Confirm: true, Fingerprint: fingerprint(t, e.svc, d)})
	if err != nil {
		t.Fatal(err)
	}
	// Registered, enabled and shortcut are separate facts: registration alone enables nothing.
	if v.Enabled || v.Shortcut || v.Available || v.Path != d || v.Projection != pet.ProjectionAbsent {
		t.Fatalf("registered %+v", v)
	}
	if _, err := e.svc.Register(ctx, pet.RegisterRequest{Path: d, Confirm: true, Fingerprint: fingerprint(t, e.svc, d)}); errs.CodeOf(err) != errs.Conflict {
		t.Fatalf("second registration: %v", err)
	}
	in, err = e.svc.Inspect(ctx, d)
	if err != nil || !in.Registered || in.RegisteredPath != d {
		t.Fatalf("inspection after registration %+v %v", in, err)
	}
}

func TestSkillIsALinkNotACopy(t *testing.T) {
	ms, m := newModelServer(t)
	_ = ms
	e := newEnv(t, nil, m, pet.Config{})
	ctx := context.Background()
	d := skillDir(t, "notes", "Old description.", "Old body.", nil)
	register(t, e.svc, d)
	// Editing the directory takes effect at once.
	writeFile(t, filepath.Join(d, pet.ManifestFile), "---\nname: notes\ndescription: New description.\n---\nNew body.\n")
	v, err := e.svc.Skill(ctx, "notes")
	if err != nil || v.Description != "New description." || !v.Available {
		t.Fatalf("after edit %+v %v", v, err)
	}
	if _, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "notes", Snapshot: snapshot("independent")}); err != nil {
		t.Fatal(err)
	}
	_, reqs := ms.received()
	// The body follows the agent's fixed preamble.
	if got := reqs[len(reqs)-1].Messages[0].Content; !strings.HasSuffix(got, "The Skill's instructions follow.\n\nNew body.") {
		t.Fatalf("system prompt %q", got)
	}
	// Moving it away makes the Skill unresolvable: it refuses to run and records nothing.
	if err := os.Rename(d, d+".moved"); err != nil {
		t.Fatal(err)
	}
	v, _ = e.svc.Skill(ctx, "notes")
	if v.Available || v.Resolvable || !strings.Contains(v.Reason, "does not resolve") {
		t.Fatalf("moved %+v", v)
	}
	_, err = e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "notes", Snapshot: snapshot("session:s2")})
	if errs.CodeOf(err) != errs.Unprocessable || !strings.Contains(err.Error(), "does not resolve") {
		t.Fatalf("invoke of a moved Skill: %v", err)
	}
	if tasks, _ := e.svc.Tasks(ctx, pet.TaskFilter{Scope: "session:s2"}); len(tasks) != 0 {
		t.Fatal("a refused invocation created a task")
	}
	// A symlink added after registration is refused at run time too.
	if err := os.Rename(d+".moved", d); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(d, "etc")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "notes", Snapshot: snapshot("independent")}); errs.CodeOf(err) != errs.Unprocessable {
		t.Fatalf("invoke with a symlink inside: %v", err)
	}
	// A renamed Skill (SKILL.md names another) does not resolve under its old name.
	os.Remove(filepath.Join(d, "etc"))
	writeFile(t, filepath.Join(d, pet.ManifestFile), "---\nname: other\ndescription: x\n---\nbody\n")
	if _, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "notes", Snapshot: snapshot("independent")}); err == nil || !strings.Contains(err.Error(), `names "other"`) {
		t.Fatalf("invoke of a renamed Skill: %v", err)
	}
}

func TestEnabledAndShortcutAreSeparateFacts(t *testing.T) {
	_, m := newModelServer(t)
	e := newEnv(t, nil, m, pet.Config{})
	ctx := context.Background()
	d := skillDir(t, "a", "d", "body", nil)
	if _, err := e.svc.Register(ctx, pet.RegisterRequest{Path: d, Confirm: true, Fingerprint: fingerprint(t, e.svc, d)}); err != nil {
		t.Fatal(err)
	}
	yes, no := true, false
	v, err := e.svc.UpdateSkill(ctx, "a", pet.SkillPatch{Shortcut: &yes})
	if err != nil || !v.Shortcut || v.Enabled || v.Available || v.Reason != "Skill a is disabled" {
		t.Fatalf("shortcut only: %+v %v", v, err)
	}
	w, _ := e.svc.Wheel(ctx)
	if len(w.Entries) != 1 || w.Entries[0].Available || w.Entries[0].Reason != "Skill a is disabled" {
		t.Fatalf("wheel %+v", w)
	}
	if _, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "a", Snapshot: snapshot("independent")}); errs.CodeOf(err) != errs.Conflict {
		t.Fatalf("invoke of a disabled Skill: %v", err)
	}
	link := filepath.Join(e.ws, pet.ProjectionDir, "a")
	v, err = e.svc.UpdateSkill(ctx, "a", pet.SkillPatch{Enabled: &yes, Shortcut: &no})
	if err != nil || !v.Enabled || v.Shortcut || !v.Available || v.Projection != pet.ProjectionOK {
		t.Fatalf("enabled: %+v %v", v, err)
	}
	if dest, err := os.Readlink(link); err != nil || dest != d {
		t.Fatalf("projection %q %v", dest, err)
	}
	if w, _ := e.svc.Wheel(ctx); len(w.Entries) != 0 {
		t.Fatalf("wheel without shortcuts %+v", w)
	}
	if _, err := e.svc.UpdateSkill(ctx, "a", pet.SkillPatch{Enabled: &no}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Fatal("disabling left the projection entry")
	}
	if _, err := e.svc.UpdateSkill(ctx, "a", pet.SkillPatch{}); errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("empty patch: %v", err)
	}
	if _, err := e.svc.UpdateSkill(ctx, "nope", pet.SkillPatch{Enabled: &yes}); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("unknown: %v", err)
	}
	if err := e.svc.RemoveSkill(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d, pet.ManifestFile)); err != nil {
		t.Fatal("removal touched the user's directory")
	}
	if err := e.svc.RemoveSkill(ctx, "a"); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("second removal: %v", err)
	}
}

package pet_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/pet"
)

func TestDriftFailsClosedUntilRebuild(t *testing.T) {
	_, m := newModelServer(t)
	ctx := context.Background()
	tests := []struct {
		name    string
		drift   func(t *testing.T, link, skill string)
		problem string
	}{
		{"missing", func(t *testing.T, link, _ string) { must(t, os.Remove(link)) }, pet.ProjectionMissing},
		{"not a symlink", func(t *testing.T, link, _ string) {
			must(t, os.Remove(link))
			must(t, os.Mkdir(link, 0o755))
		}, pet.ProjectionNotSymlink},
		{"broken", func(t *testing.T, link, _ string) {
			must(t, os.Remove(link))
			must(t, os.Symlink(filepath.Join(t.TempDir(), "gone"), link))
		}, pet.ProjectionBroken},
		{"wrong target", func(t *testing.T, link, _ string) {
			must(t, os.Remove(link))
			must(t, os.Symlink(t.TempDir(), link))
		}, pet.ProjectionWrongTarget},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil, m, pet.Config{})
			d := skillDir(t, "a", "d", "body", nil)
			register(t, e.svc, d)
			if _, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "a", Snapshot: snapshot("independent")}); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(e.ws, pet.ProjectionDir, "a")
			tc.drift(t, link, d)

			_, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "a", Snapshot: snapshot("independent")})
			if errs.CodeOf(err) != errs.Conflict || !strings.Contains(err.Error(), "drift ("+tc.problem) {
				t.Fatalf("invoke with drift: %v", err)
			}
			diag, err := e.svc.Diagnostics(ctx)
			if err != nil || len(diag.Drift) != 1 || diag.Drift[0].Skill != "a" || diag.Drift[0].Problem != tc.problem {
				t.Fatalf("diagnostics drift %+v %v", diag.Drift, err)
			}
			w, _ := e.svc.Wheel(ctx)
			if w.Entries[0].Available || !strings.Contains(w.Entries[0].Reason, "rebuild the projection") {
				t.Fatalf("wheel %+v", w.Entries)
			}
			// Repairing the entry by hand does not lift it: only an explicit rebuild does.
			must(t, os.RemoveAll(link))
			must(t, os.Symlink(d, link))
			if _, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "a", Snapshot: snapshot("independent")}); errs.CodeOf(err) != errs.Conflict {
				t.Fatalf("invoke after a manual repair: %v", err)
			}
			tc.drift(t, link, d)
			rep, err := e.svc.RebuildProjection(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(rep.Created, ",") != "a" || strings.Join(rep.Cleared, ",") != "a" {
				t.Fatalf("rebuild report %+v", rep)
			}
			if dest, err := os.Readlink(link); err != nil || dest != d {
				t.Fatalf("rebuilt entry %q %v", dest, err)
			}
			if _, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "a", Snapshot: snapshot("independent")}); err != nil {
				t.Fatalf("invoke after rebuild: %v", err)
			}
		})
	}
}

func TestRebuildRemovesStrayEntries(t *testing.T) {
	_, m := newModelServer(t)
	e := newEnv(t, nil, m, pet.Config{})
	ctx := context.Background()
	register(t, e.svc, skillDir(t, "a", "d", "body", nil))
	off := skillDir(t, "b", "d", "body", nil)
	if _, err := e.svc.Register(ctx, pet.RegisterRequest{Path: off, Confirm: true, Fingerprint: fingerprint(t, e.svc, off)}); err != nil {
		t.Fatal(err)
	}
	proj := filepath.Join(e.ws, pet.ProjectionDir)
	must(t, os.Symlink(off, filepath.Join(proj, "b")))              // a disabled Skill's entry
	must(t, os.Symlink(t.TempDir(), filepath.Join(proj, "global"))) // a Skill Pet does not know
	writeFile(t, filepath.Join(proj, "notes.txt"), "x")
	diag, err := e.svc.Diagnostics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(diag.Stray) != 3 || strings.Join(diag.Allowlist, ",") != "a" || len(diag.Drift) != 0 {
		t.Fatalf("diagnostics %+v", diag)
	}
	v, _ := e.svc.Skill(ctx, "b")
	if v.Projection != pet.ProjectionStray {
		t.Fatalf("disabled Skill's entry: %s", v.Projection)
	}
	rep, err := e.svc.RebuildProjection(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rep.Removed, ",") != "b,global,notes.txt" || strings.Join(rep.Kept, ",") != "a" {
		t.Fatalf("report %+v", rep)
	}
	entries, _ := os.ReadDir(proj)
	if len(entries) != 1 || entries[0].Name() != "a" {
		t.Fatalf("entries after rebuild %v", entries)
	}
}

func TestProjectionFolderReplacedBySymlinkIsDrift(t *testing.T) {
	_, m := newModelServer(t)
	e := newEnv(t, nil, m, pet.Config{})
	ctx := context.Background()
	register(t, e.svc, skillDir(t, "a", "d", "body", nil))
	elsewhere := t.TempDir()
	writeFile(t, filepath.Join(elsewhere, "keep.txt"), "not Pet's")
	proj := filepath.Join(e.ws, pet.ProjectionDir)
	must(t, os.RemoveAll(proj))
	must(t, os.Symlink(elsewhere, proj))
	if _, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "a", Snapshot: snapshot("independent")}); errs.CodeOf(err) != errs.Conflict {
		t.Fatalf("invoke: %v", err)
	}
	if _, err := e.svc.RebuildProjection(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(elsewhere, "keep.txt")); err != nil {
		t.Fatal("rebuild deleted through a symlinked projection folder")
	}
	if info, err := os.Lstat(proj); err != nil || !info.IsDir() {
		t.Fatalf("projection folder %v %v", info, err)
	}
	if _, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "a", Snapshot: snapshot("independent")}); err != nil {
		t.Fatal(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

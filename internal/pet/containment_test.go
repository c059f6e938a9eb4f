package pet_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/pet"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/bash"
	"github.com/pixie-dev/pixie/runtime/sandbox"
)

// scriptEnv is a Pet over the real bash executor, at the read-only policy every Skill gets by
// default (a Skill is never granted full): what these tests check is which files run, not the
// sandbox, but the sandbox needs Landlock.
func scriptEnv(t *testing.T) *env {
	t.Helper()
	needLandlock(t)
	bx, err := bash.New(context.Background(), bash.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bx.Close(context.Background()) })
	return newEnv(t, runtime.Dispatcher{runtime.KindScript: bx}, nil, pet.Config{RunTimeout: 20 * time.Second})
}

// TestSwappingTheSkillDirectoryNeverRunsAnotherSkill is the attack: while 150
// invocations of Skill a run, its registered directory is swapped, atomically, for a symlink to
// Skill b's and back. No invocation may run b's run.sh: each runs a's, or is refused.
func TestSwappingTheSkillDirectoryNeverRunsAnotherSkill(t *testing.T) {
	e := scriptEnv(t)
	ctx := context.Background()
	root := t.TempDir()
	a := filepath.Join(root, "a")
	writeFile(t, filepath.Join(a, pet.ManifestFile), "---\nname: a\ndescription: A.\n---\n")
	writeFile(t, filepath.Join(a, pet.ScriptFile), "echo ran-a\n")
	b := filepath.Join(root, "b")
	writeFile(t, filepath.Join(b, pet.ManifestFile), "---\nname: a\ndescription: B, named a too.\n---\n")
	writeFile(t, filepath.Join(b, pet.ScriptFile), "echo ran-b\n")
	register(t, e.svc, a)

	var stop atomic.Bool
	var swaps atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		aside, link := filepath.Join(root, "a.aside"), filepath.Join(root, "a.link")
		for !stop.Load() {
			// a → a symlink to b (rename over the path), then back.
			if os.Rename(a, aside) != nil {
				continue
			}
			_ = os.Symlink(b, link)
			_ = os.Rename(link, a)
			swaps.Add(1)
			time.Sleep(200 * time.Microsecond)
			_ = os.Remove(a)
			_ = os.Rename(aside, a)
			time.Sleep(200 * time.Microsecond)
		}
	}()
	ranA, refused := 0, 0
	for i := range 150 {
		v, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "a", Snapshot: snapshot("independent")})
		if err != nil {
			refused++
			continue
		}
		out := v.Latest().Output
		switch {
		case strings.Contains(out, "ran-b"):
			t.Fatalf("invocation %d ran the other Skill's run.sh: %+v", i, v.Latest())
		case out == "ran-a":
			ranA++
		default:
			refused++ // the run itself failed (e.g. its copy was refused as changed)
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("150 invocations during %d swaps: %d ran a, %d refused", swaps.Load(), ranA, refused)
	if swaps.Load() == 0 {
		t.Fatal("the swapper never swapped")
	}
	// The swap is drift, sticky until a rebuild.
	if v, err := e.svc.Skill(ctx, "a"); err != nil || v.Available || !v.Drift {
		t.Fatalf("after the swaps: %+v, %v", v, err)
	}
}

// TestARunExecutesTheCopyItValidated: run.sh is replaced (atomically) while invocations run;
// each Run's output is the run.sh its recorded fingerprint covers, never a mix.
func TestARunExecutesTheCopyItValidated(t *testing.T) {
	e := scriptEnv(t)
	ctx := context.Background()
	d := filepath.Join(t.TempDir(), "a")
	writeFile(t, filepath.Join(d, pet.ManifestFile), "---\nname: a\ndescription: A.\n---\n")
	variants := map[string]string{"one": "echo one\n", "two": "echo two\n"}
	fps := map[string]string{}
	for name, body := range variants {
		writeFile(t, filepath.Join(d, pet.ScriptFile), body)
		fps[fingerprint(t, e.svc, d)] = name
	}
	register(t, e.svc, d)
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; !stop.Load(); i++ {
			body := variants["one"]
			if i%2 == 1 {
				body = variants["two"]
			}
			tmp := filepath.Join(filepath.Dir(d), ".swap") // outside the Skill, same file system
			_ = os.WriteFile(tmp, []byte(body), 0o644)
			_ = os.Rename(tmp, filepath.Join(d, pet.ScriptFile))
			time.Sleep(300 * time.Microsecond)
		}
	}()
	checked := 0
	for range 60 {
		v, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "a", Snapshot: snapshot("independent")})
		if err != nil {
			continue // refused: the directory changed while being copied
		}
		r := v.Latest()
		if r.Status != pet.StatusSucceeded {
			continue
		}
		if want, ok := fps[r.Fingerprint]; !ok || r.Output != want {
			t.Fatalf("run output %q with fingerprint %s (%q): not what was validated", r.Output, r.Fingerprint, want)
		}
		checked++
	}
	stop.Store(true)
	<-done
	if checked == 0 {
		t.Fatal("no run succeeded; nothing was checked")
	}
	t.Logf("%d runs checked against their fingerprints", checked)
}

// failingOnce is a script executor that fails its first run with a timeout (transient), then
// passes to bash.
type failingOnce struct {
	runtime.Executor
	failed atomic.Bool
	refs   chan string
}

func (f *failingOnce) Run(ctx context.Context, req runtime.Request) (runtime.Result, error) {
	raw, _ := os.ReadFile(req.Ref)
	f.refs <- string(raw)
	if f.failed.CompareAndSwap(false, true) {
		return runtime.Result{ExitCode: -1}, errs.Wrap(errs.Timeout, runtime.ErrTimeout, "rule timed out")
	}
	return f.Executor.Run(ctx, req)
}

func TestARetryRunsTheSameDirectoryAndContent(t *testing.T) {
	ctx := context.Background()
	needLandlock(t)
	newFlaky := func(t *testing.T) (*env, *failingOnce) {
		bx, err := bash.New(context.Background(), bash.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bx.Close(context.Background()) })
		f := &failingOnce{Executor: bx, refs: make(chan string, 10)}
		return newEnv(t, runtime.Dispatcher{runtime.KindScript: f}, nil, pet.Config{}), f
	}
	skill := func(t *testing.T, out string) string {
		d := filepath.Join(t.TempDir(), "a")
		writeFile(t, filepath.Join(d, pet.ManifestFile), "---\nname: a\ndescription: A.\n---\n")
		writeFile(t, filepath.Join(d, pet.ScriptFile), "echo "+out+"\n")
		return d
	}
	first := func(t *testing.T, e *env) pet.InvocationView {
		v, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "a", Snapshot: snapshot("independent")})
		if err != nil || v.Status != pet.StatusFailed || !v.Latest().Transient {
			t.Fatalf("first run %+v, %v", v, err)
		}
		return v
	}
	t.Run("unchanged: the retry runs the same content", func(t *testing.T) {
		e, f := newFlaky(t)
		d := skill(t, "one")
		register(t, e.svc, d)
		v := first(t, e)
		v2, err := e.svc.Retry(ctx, v.ID)
		if err != nil || v2.Latest().Output != "one" || v2.Runs[1].Fingerprint != v.Runs[0].Fingerprint || v2.Runs[1].SkillPath != d {
			t.Fatalf("retry %+v, %v", v2, err)
		}
		if a, b := <-f.refs, <-f.refs; a != b {
			t.Fatalf("run 1 ran %q, run 2 %q", a, b)
		}
	})
	t.Run("re-registered at another path: refused", func(t *testing.T) {
		e, _ := newFlaky(t)
		register(t, e.svc, skill(t, "one"))
		v := first(t, e)
		if err := e.svc.RemoveSkill(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		other := skill(t, "other")
		register(t, e.svc, other)
		_, err := e.svc.Retry(ctx, v.ID)
		if errs.CodeOf(err) != errs.Conflict || !strings.Contains(err.Error(), "never runs another directory") {
			t.Fatalf("retry after re-registration: %v", err)
		}
		if cur, _ := e.svc.Invocation(ctx, v.ID); len(cur.Runs) != 1 {
			t.Fatalf("a refused retry added a Run: %+v", cur.Runs)
		}
	})
	t.Run("content changed: refused", func(t *testing.T) {
		e, _ := newFlaky(t)
		d := skill(t, "one")
		register(t, e.svc, d)
		v := first(t, e)
		writeFile(t, filepath.Join(d, pet.ScriptFile), "echo changed\n")
		_, err := e.svc.Retry(ctx, v.ID)
		if errs.CodeOf(err) != errs.Conflict || !strings.Contains(err.Error(), "never runs other code") {
			t.Fatalf("retry after an edit: %v", err)
		}
	})
}

func TestAMovedDirectoryIsStickyDrift(t *testing.T) {
	_, m := newModelServer(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		move func(t *testing.T, d string)
	}{
		{"moved away and back", func(t *testing.T, d string) {
			must(t, os.Rename(d, d+".moved"))
			// Someone looks while it is gone.
			must(t, os.Rename(d+".moved", d))
		}},
		{"replaced by another directory, unseen", func(t *testing.T, d string) {
			must(t, os.Rename(d, d+".old"))
			must(t, os.Mkdir(d, 0o755))
			raw, err := os.ReadFile(filepath.Join(d+".old", pet.ManifestFile))
			must(t, err)
			writeFile(t, filepath.Join(d, pet.ManifestFile), string(raw))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil, m, pet.Config{})
			d := skillDir(t, "a", "d", "body", nil)
			register(t, e.svc, d)
			if _, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "a", Snapshot: snapshot("independent")}); err != nil {
				t.Fatal(err)
			}
			if tc.name == "moved away and back" {
				must(t, os.Rename(d, d+".moved"))
				if v, _ := e.svc.Skill(ctx, "a"); v.Available {
					t.Fatalf("a moved Skill is available: %+v", v)
				}
				must(t, os.Rename(d+".moved", d))
			} else {
				tc.move(t, d)
			}
			_, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "a", Snapshot: snapshot("independent")})
			if errs.CodeOf(err) != errs.Conflict || !strings.Contains(err.Error(), "drift (moved") {
				t.Fatalf("invoke after the move: %v", err)
			}
			rep, err := e.svc.RebuildProjection(ctx)
			if err != nil || len(rep.Cleared) != 1 {
				t.Fatalf("rebuild %+v %v", rep, err)
			}
			if _, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "a", Snapshot: snapshot("independent")}); err != nil {
				t.Fatalf("invoke after the rebuild: %v", err)
			}
		})
	}
}

func TestImportRefusesLinksOut(t *testing.T) {
	e := newEnv(t, nil, nil, pet.Config{})
	ctx := context.Background()
	t.Run("a symlinked parent folder", func(t *testing.T) {
		d := skillDir(t, "a", "d", "body", nil)
		link := filepath.Join(t.TempDir(), "linked")
		must(t, os.Symlink(filepath.Dir(d), link))
		for _, p := range []string{filepath.Join(link, "a"), filepath.Join(link, ".", "a")} {
			_, err := e.svc.Inspect(ctx, p)
			if errs.CodeOf(err) != errs.Unprocessable || !strings.Contains(err.Error(), "parent folder of the Skill path is a symlink") {
				t.Fatalf("inspect %s: %v", p, err)
			}
			if _, err := e.svc.Register(ctx, pet.RegisterRequest{Path: p, Confirm: true, Fingerprint: fingerprint(t, e.svc, d)}); err == nil {
				t.Fatalf("registered through a symlinked parent")
			}
		}
	})
	t.Run("a hard link to a file outside the Skill", func(t *testing.T) {
		token := filepath.Join(t.TempDir(), "token")
		writeFile(t, token, "admin-token-secret")
		d := skillDir(t, "b", "d", "body", nil)
		must(t, os.Link(token, filepath.Join(d, "notes.txt")))
		_, err := e.svc.Inspect(ctx, d)
		if errs.CodeOf(err) != errs.Unprocessable || !strings.Contains(err.Error(), "hard link to a file outside the Skill") {
			t.Fatalf("inspect: %v", err)
		}
		if strings.Contains(err.Error(), "admin-token-secret") {
			t.Fatal("the refusal shows the file")
		}
	})
	t.Run("hard links inside the Skill are fine", func(t *testing.T) {
		d := skillDir(t, "c", "d", "body", map[string]string{"a.txt": "x"})
		must(t, os.Link(filepath.Join(d, "a.txt"), filepath.Join(d, "b.txt")))
		if _, err := e.svc.Inspect(ctx, d); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a dot-dot path", func(t *testing.T) {
		d := skillDir(t, "e", "d", "body", nil)
		if _, err := e.svc.Inspect(ctx, d+"/../e"); errs.CodeOf(err) != errs.Unprocessable {
			t.Fatalf("inspect with ..: %v", err)
		}
	})
}

// TestHistoryNeverCarriesAnEnvironmentValue: a value set after a Run printed it stays out of
// the next Run's prompt (the Task history is redacted with today's values).
func TestHistoryNeverCarriesAnEnvironmentValue(t *testing.T) {
	ms, m := newModelServer(t)
	e := newEnv(t, nil, m, pet.Config{})
	ctx := context.Background()
	register(t, e.svc, skillDir(t, "a", "d", "body", nil))
	ms.answer("the code is zq9x")
	if _, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "a", Snapshot: snapshot("independent")}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.SetEnv(ctx, "", "CODE", "zq9x"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "a", Snapshot: snapshot("independent")}); err != nil {
		t.Fatal(err)
	}
	bodies, _ := ms.received()
	if last := bodies[len(bodies)-1]; strings.Contains(last, "zq9x") || !strings.Contains(last, "[$DSH_PET_CODE]") {
		t.Fatalf("the second prompt: %s", last)
	}
}

// needLandlock skips a test whose scripts run sandboxed where the kernel cannot enforce it (the
// run would fail closed; runtime/bash tests that).
func needLandlock(t *testing.T) {
	t.Helper()
	if err := sandbox.Probe(); err != nil {
		t.Skipf("no Landlock here (%v): sandboxed Skills fail closed", err)
	}
}

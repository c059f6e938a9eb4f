package wasm

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/sdk/abi"
)

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func write(t *testing.T, dir, name, body string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestListChangedFiles(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	e := env(t)
	e.push(t, "list-changed-files", "list-changed-files")
	vars := map[string]string{abi.VarPoint: abi.PointTurnEnd}
	wasm := func(t *testing.T, cwd string) runtime.Result {
		res, err := e.run(t, runtime.Request{Ref: "list-changed-files", Vars: vars, Cwd: cwd, Policy: runtime.PolicyReadOnly, MountCwd: true})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%+v %v", res, err)
		}
		return res
	}
	repo := func(t *testing.T) string {
		dir := t.TempDir()
		git(t, dir, "init", "-q")
		write(t, dir, "README.md", "hello\n")
		write(t, dir, "src/main.go", "package main\n")
		write(t, dir, "src/util.go", "package main\n\nfunc f() {}\n")
		write(t, dir, "docs/old.md", "old\n")
		write(t, dir, ".gitignore", "*.log\nbuild/\n!keep.log\n")
		git(t, dir, "add", "-A")
		git(t, dir, "commit", "-q", "-m", "first")
		return dir
	}
	t.Run("a changed work tree", func(t *testing.T) {
		dir := repo(t)
		write(t, dir, "README.md", "hello, world\n")           // modified, unstaged
		os.Remove(filepath.Join(dir, "docs/old.md"))           // deleted, unstaged
		write(t, dir, "src/new.go", "package main\n")          // staged new file...
		git(t, dir, "add", "src/new.go")                       //
		write(t, dir, "src/util.go", "package main\n// x\n")   // staged and then changed again
		git(t, dir, "add", "src/util.go")                      //
		write(t, dir, "src/util.go", "package main\n// xy\n")  //
		write(t, dir, "notes.txt", "todo\n")                   // untracked file
		write(t, dir, "scratch/a/b.txt", "x\n")                // untracked folder
		write(t, dir, "debug.log", "x\n")                      // ignored
		write(t, dir, "keep.log", "x\n")                       // un-ignored by !keep.log
		write(t, dir, "build/out.bin", "x\n")                  // ignored folder
		write(t, dir, "src/with space ü.go", "package main\n") // quoted
		got := wasm(t, dir).Stdout
		want := bashTwin(t, "list-changed-files", vars, "", dir)
		if want.Exit != 0 || got != want.Text {
			t.Fatalf("WASM:\n%s\ngit:\n%s", got, want.Text)
		}
		if !strings.Contains(got, " M README.md") || !strings.Contains(got, "MM src/util.go") || !strings.Contains(got, "?? scratch/") {
			t.Fatalf("unexpected status:\n%s", got)
		}
	})
	t.Run("a clean work tree", func(t *testing.T) {
		dir := repo(t)
		if got := wasm(t, dir).Stdout; got != "" {
			t.Fatalf("%q", got)
		}
	})
	t.Run("not a repository", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "a.txt", "x")
		got := wasm(t, dir)
		if want := bashTwin(t, "list-changed-files", vars, "", dir); !reflect.DeepEqual(decide(got.ExitCode, got.Stdout), want) {
			t.Fatalf("WASM %q, git %+v", got.Stdout, want)
		}
	})
	t.Run("at most 50 lines", func(t *testing.T) {
		dir := repo(t)
		for i := range 60 {
			write(t, dir, filepath.Join("many", strings.Repeat("f", i+1)+".txt"), "x")
			git(t, dir, "add", "many")
		}
		got := wasm(t, dir).Stdout
		want := bashTwin(t, "list-changed-files", vars, "", dir)
		if strings.Count(got, "\n") != 49 || got != want.Text {
			t.Fatalf("WASM:\n%s\ngit:\n%s", got, want.Text)
		}
	})
	t.Run("packed history is said, not hidden", func(t *testing.T) {
		dir := repo(t)
		git(t, dir, "gc", "-q")
		write(t, dir, "README.md", "changed\n")
		got := wasm(t, dir).Stdout
		if !strings.Contains(got, " M README.md") || !strings.HasSuffix(got, "(staged changes not shown: HEAD is in a pack file)") {
			t.Fatalf("%q", got)
		}
	})
}

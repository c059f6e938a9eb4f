package gate

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/pixie-dev/pixie/internal/errs"
)

func TestScriptFolderListing(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	dir := e.scripts
	outside := t.TempDir()
	write := func(p string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(p, []byte("#!/bin/bash\nexit 10\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "good.sh"), 0o755)
	write(filepath.Join(dir, "owner-only"), 0o700)
	write(filepath.Join(dir, "not-executable.sh"), 0o644)
	write(filepath.Join(dir, "a..b.sh"), 0o755)
	write(filepath.Join(outside, "evil.sh"), 0o755)
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(dir, "sub", "nested.sh"), 0o755)
	if err := os.Mkdir(filepath.Join(dir, "exec-dir.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"inside-link.sh":   "good.sh",
		"outside-link.sh":  filepath.Join(outside, "evil.sh"),
		"escape-link.sh":   "../commands/../" + filepath.Base(outside),
		"into-sub-link.sh": "sub/nested.sh",
		"dangling.sh":      "missing.sh",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}

	l, err := e.svc.RefreshScripts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range l.Scripts {
		names = append(names, s.Name)
	}
	if want := []string{"good.sh", "inside-link.sh", "owner-only"}; !reflect.DeepEqual(names, want) {
		t.Errorf("listed %v, want %v", names, want)
	}
	if !l.Exists || l.Custom || l.Folder != dir || l.Default != dir {
		t.Errorf("listing header: %+v", l)
	}
	if l.Scripts[0].HookName != "good" || !l.Scripts[1].Link {
		t.Errorf("script details: %+v", l.Scripts)
	}

	// A new file appears only after a refresh.
	write(filepath.Join(dir, "late.sh"), 0o755)
	if l, _ = e.svc.Scripts(ctx); len(l.Scripts) != 3 {
		t.Errorf("the cached listing changed without a refresh: %d", len(l.Scripts))
	}
	if l, _ = e.svc.RefreshScripts(ctx); len(l.Scripts) != 4 {
		t.Errorf("refresh did not list late.sh: %+v", l.Scripts)
	}

	// Excluded names cannot be resolved for a run either.
	for _, name := range []string{"outside-link.sh", "not-executable.sh", "a..b.sh", "sub/nested.sh", "../commands/good.sh"} {
		if _, err := e.svc.resolveScript(ctx, name); err == nil {
			t.Errorf("resolveScript(%q) succeeded", name)
		}
	}
	if p, err := e.svc.resolveScript(ctx, "good.sh"); err != nil || p != filepath.Join(dir, "good.sh") {
		t.Errorf("resolveScript(good.sh) = %q, %v", p, err)
	}
}

func TestScriptFolderSetting(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	home := t.TempDir()
	t.Setenv("HOME", home)

	for _, bad := range []string{"relative/dir", "./x", "~user/x"} {
		if _, err := e.svc.SetScriptFolder(ctx, bad); !errs.Is(err, errs.Invalid) {
			t.Errorf("SetScriptFolder(%q) = %v, want invalid", bad, err)
		}
	}
	// ~/… expands; the folder is not created for you.
	l, err := e.svc.SetScriptFolder(ctx, "~/pixie-scripts")
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(home, "pixie-scripts")
	if l.Folder != want || !l.Custom || l.Exists {
		t.Errorf("listing = %+v, want folder %s, custom, missing", l, want)
	}
	if _, err := os.Stat(want); !os.IsNotExist(err) {
		t.Errorf("the folder was created: %v", err)
	}
	if err := os.Mkdir(want, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(want, "x.sh"), []byte("#!/bin/bash\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if l, _ = e.svc.RefreshScripts(ctx); !l.Exists || len(l.Scripts) != 1 {
		t.Errorf("after creating it: %+v", l)
	}
	// The setting persists in the store.
	other, err := New(ctx, Config{Store: e.st, Home: e.home})
	if err != nil {
		t.Fatal(err)
	}
	if f, custom, _ := other.ScriptFolder(ctx); f != want || !custom {
		t.Errorf("a new service sees %q (custom %v)", f, custom)
	}
	// Empty restores the default inside the home.
	if l, err = e.svc.SetScriptFolder(ctx, ""); err != nil || l.Folder != filepath.Join(e.home, "commands") || l.Custom {
		t.Errorf("restoring the default: %+v, %v", l, err)
	}
}

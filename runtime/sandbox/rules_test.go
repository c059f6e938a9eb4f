//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pixie-dev/pixie/runtime"
)

// parentRulesets makes sandboxed and sandboxedIn hand the verb a ruleset built by ReadRules,
// as the bash executor does (Options.RulesetFD), instead of letting it build its own.
var parentRulesets bool

// parentRuleset returns the ruleset ReadRules builds for o (a run with its own /proc with
// ownProc) when parentRulesets is set and o is confined, and sets o to pass it as descriptor 4;
// nil otherwise, or when it cannot be built (the verb then builds it and reports why).
func parentRuleset(t *testing.T, ownProc bool, o *Options) *os.File {
	t.Helper()
	if !parentRulesets || o.Policy == runtime.PolicyFull {
		return nil
	}
	r := NewReadRules(o.Hidden, ownProc)
	t.Cleanup(func() { _ = r.Close() })
	f, flags, err := r.Ruleset(o.Writable, o.Readable, o.MinABI)
	if err != nil {
		t.Logf("no parent ruleset: %v", err)
		return nil
	}
	t.Cleanup(func() { _ = f.Close() })
	o.RulesetFD, o.RulesetFlags = 4, flags
	return f
}

// TestParentRulesets runs the containment tests again with every ruleset built by ReadRules,
// the bash executor's way: the verb must confine exactly as with its own. It doubles the
// package's time (about a minute under -race), which is the price of that proof; its parts run
// in parallel.
func TestParentRulesets(t *testing.T) {
	requireLandlock(t)
	parentRulesets = true
	t.Cleanup(func() { parentRulesets = false }) // after the parallel parts, unlike a defer
	for name, test := range map[string]func(*testing.T){
		"ReadOnly":                    TestReadOnly,
		"WorkspaceWrite":              TestWorkspaceWrite,
		"HiddenDirectory":             TestHiddenDirectory,
		"CannotReachOtherProcesses":   TestCannotReachOtherProcesses,
		"ProcSelfStillWorks":          TestProcSelfStillWorks,
		"UnsupportedFailsClosed":      TestUnsupportedFailsClosed,
		"PixieHomeIsNeverReachable":   TestPixieHomeIsNeverReachable,
		"PixieHomeThroughABindMount":  TestPixieHomeThroughABindMount,
		"HomeScriptStillRuns":         TestHomeScriptStillRuns,
		"RootScriptCannotReadTheDisk": TestRootScriptCannotReadTheDisk,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t)
		})
	}
}

// TestReadRulesFollowChanges: a run reads what was added beside a hidden directory since the
// last walk, and never the hidden directory itself.
func TestReadRulesFollowChanges(t *testing.T) {
	requireLandlock(t)
	root := t.TempDir()
	hidden := filepath.Join(root, "home")
	if err := os.Mkdir(hidden, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hidden, "token"), []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	r := NewReadRules([]string{hidden}, false)
	defer r.Close()
	run := func(script string) outcome {
		t.Helper()
		f, flags, err := r.Ruleset(nil, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		o := Options{Policy: runtime.PolicyReadOnly, Cwd: t.TempDir(), Hidden: []string{hidden}, RulesetFD: 4, RulesetFlags: flags}
		return sandboxedWith(t, Isolation{}, nil, o, script, f)
	}
	probe := "cat " + root + "/new 2>/dev/null || echo none; cat " + hidden + "/token 2>/dev/null || echo hidden"
	if out := run(probe); out.stdout != "none\nhidden\n" {
		t.Fatalf("before: stdout %q stderr %q status %q", out.stdout, out.stderr, out.status)
	}
	for i := range 3 {
		name := filepath.Join(root, "new")
		if err := os.WriteFile(name, []byte("fresh"), 0o644); err != nil {
			t.Fatal(err)
		}
		if out := run(probe); out.stdout != "freshhidden\n" {
			t.Fatalf("after an entry was added (%d): stdout %q stderr %q status %q", i, out.stdout, out.stderr, out.status)
		}
		if err := os.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReadRulesStale: a walk serves while nothing it read changed; it is stale once a listed
// directory gains or loses an entry (even with its modification time set back), is replaced,
// or the mount table changes, and after readRulesTTL; a walk of a directory changed just before
// it serves one run.
func TestReadRulesStale(t *testing.T) {
	dir := t.TempDir()
	past := time.Now().Add(-time.Hour)
	if err := os.Chtimes(dir, past, past); err != nil {
		t.Fatal(err)
	}
	st, ok := stamp(dir)
	if !ok {
		t.Fatal("no stamp of a directory")
	}
	r := NewReadRules(nil, false)
	defer r.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mountsChangedLocked() // armed
	w := &readWalk{at: time.Now(), dirs: []dirStamp{st}}
	if r.staleLocked(w) {
		t.Fatal("a walk of an unchanged directory is stale")
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if !r.staleLocked(w) {
		t.Fatal("a walk is not stale after its directory gained an entry")
	}
	if err := os.Remove(dir + "/f"); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(dir, past, past); err != nil { // its modification time set back
		t.Fatal(err)
	}
	if !r.staleLocked(w) {
		t.Fatal("a walk is not stale after its directory changed and got its old modification time back")
	}
	moved := dir + ".old"
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if !r.staleLocked(w) {
		t.Fatal("a walk is not stale after its directory was replaced by another")
	}
	_ = os.RemoveAll(moved)
	w.dirs[0], _ = stamp(dir)
	if r.staleLocked(w) {
		t.Fatal("stale with the new stamp")
	}
	w.at = w.at.Add(-2 * readRulesTTL)
	if !r.staleLocked(w) {
		t.Fatal("a walk older than readRulesTTL is not stale")
	}
	w.at = time.Now()
	if mnt := t.TempDir(); unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=4k") == nil {
		defer unix.Unmount(mnt, unix.MNT_DETACH)
		if !r.staleLocked(w) {
			t.Fatal("a walk is not stale after the mount table changed")
		}
		if r.staleLocked(w) {
			t.Fatal("a walk is stale again with no new change of the mount table")
		}
	} else {
		t.Log("cannot mount here: the mount watch is not tested")
	}

	// A walk that lists a directory modified just now serves one run.
	fresh := t.TempDir()
	hidden := filepath.Join(fresh, "home")
	if err := os.Mkdir(hidden, 0o700); err != nil {
		t.Fatal(err)
	}
	r2 := NewReadRules([]string{hidden}, false)
	defer r2.Close()
	r2.mu.Lock()
	nw, err := r2.newWalk()
	r2.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	defer nw.closeAll()
	if !nw.once || len(nw.rules) == 0 || len(nw.dirs) < 2 {
		t.Fatalf("a walk of a directory modified just now: once %v, %d rules, %d directories", nw.once, len(nw.rules), len(nw.dirs))
	}
}

package scratch

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const helperEnv = "PIXIE_SCRATCH_TEST_HOLD"

// TestMain lets the test binary play a server that makes a scratch directory, prints it, and
// waits to be killed.
func TestMain(m *testing.M) {
	if parent := os.Getenv(helperEnv); parent != "" {
		d, err := Open(parent, "pixie-test-", nil)
		if err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString(d.Path() + "\n")
		time.Sleep(time.Hour)
	}
	os.Exit(m.Run())
}

// holder starts a process that makes a scratch directory in parent and holds it until killed.
func holder(t *testing.T, parent string) (*exec.Cmd, string) {
	t.Helper()
	exe, _ := os.Executable()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), helperEnv+"="+parent)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	buf := make([]byte, 4096)
	n, _ := out.Read(buf)
	held := strings.TrimSpace(string(buf[:n]))
	if !strings.HasPrefix(held, filepath.Join(parent, "pixie-test-")) {
		t.Fatalf("helper printed %q", held)
	}
	return cmd, held
}

// TestOnlyTheDeadOwnersDirectoryIsRemoved: two live owners and one killed with SIGKILL; the
// next Open removes only the dead one's directory.
func TestOnlyTheDeadOwnersDirectoryIsRemoved(t *testing.T) {
	parent := t.TempDir()
	_, live1 := holder(t, parent)
	_, live2 := holder(t, parent)
	dead, gone := holder(t, parent)
	if removed := Clean(parent, "pixie-test-", nil); len(removed) != 0 {
		t.Fatalf("Clean removed live directories: %v", removed)
	}
	_ = dead.Process.Signal(syscall.SIGKILL)
	_ = dead.Wait()
	if _, err := os.Stat(gone); err != nil {
		t.Fatalf("the killed process's directory is already gone: %v", err)
	}
	d, err := Open(parent, "pixie-test-", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Fatalf("Open left the killed process's %s behind (%v)", gone, err)
	}
	for _, p := range []string{live1, live2} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("a live owner's %s was removed: %v", p, err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.Path()); !os.IsNotExist(err) {
		t.Fatalf("Close left %s", d.Path())
	}
}

func TestCleanSparesOthers(t *testing.T) {
	parent := t.TempDir()
	live, err := Open(parent, "pixie-test-", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	fresh := filepath.Join(parent, "pixie-test-nolock-fresh")
	old := filepath.Join(parent, "pixie-test-nolock-old")
	other := filepath.Join(parent, "other-dir")
	for _, d := range []string{fresh, old, other} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// An old lockless directory that holds something else than the legacy layout is kept.
	oldOther := filepath.Join(parent, "pixie-test-nolock-old-other")
	if err := os.Mkdir(oldOther, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(oldOther, "pixie"), []byte("a binary"), 0o700); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-2 * time.Minute)
	for _, d := range []string{old, oldOther} {
		if err := os.Chtimes(d, past, past); err != nil {
			t.Fatal(err)
		}
	}
	target := t.TempDir()
	if err := os.Symlink(target, filepath.Join(parent, "pixie-test-link")); err != nil {
		t.Fatal(err)
	}
	onlyEmpty := func(entries []fs.DirEntry) bool { return len(entries) == 0 }
	// Without a legacy rule no lockless directory is touched; with one, only what it accepts.
	if removed := Clean(parent, "pixie-test-", nil); len(removed) != 0 {
		t.Fatalf("Clean removed lockless directories: %v", removed)
	}
	removed := Clean(parent, "pixie-test-", OlderThan(time.Minute, onlyEmpty))
	if len(removed) != 1 || removed[0] != old {
		t.Fatalf("Clean removed %v, want only %s", removed, old)
	}
	for _, d := range []string{live.Path(), fresh, other, target, oldOther} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
}

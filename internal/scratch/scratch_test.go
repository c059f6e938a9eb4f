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

func TestALeftoverOfAKilledProcessIsRemoved(t *testing.T) {
	parent := t.TempDir()
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
	buf := make([]byte, 4096)
	n, _ := out.Read(buf)
	held := strings.TrimSpace(string(buf[:n]))
	if !strings.HasPrefix(held, filepath.Join(parent, "pixie-test-")) {
		t.Fatalf("helper printed %q", held)
	}
	// While its owner lives, the directory is left alone.
	if removed := Clean(parent, "pixie-test-", nil); len(removed) != 0 {
		t.Fatalf("Clean removed a live directory: %v", removed)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if _, err := os.Stat(held); err != nil {
		t.Fatalf("the killed process's directory is already gone: %v", err)
	}
	d, err := Open(parent, "pixie-test-", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := os.Stat(held); !os.IsNotExist(err) {
		t.Fatalf("Open left the killed process's %s behind (%v)", held, err)
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

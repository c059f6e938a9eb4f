//go:build linux

package confine

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestOpenBeneathRefusesEveryEscape(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "in"), []byte("i"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"abs": filepath.Join(outside, "secret"), "rel": "../" + filepath.Base(outside) + "/secret", "inner": "in"} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	dirfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dirfd)
	for _, p := range []string{"abs", "rel", "../" + filepath.Base(outside) + "/secret", "/etc/passwd", "in/../../x", "/proc/self/root/etc/passwd"} {
		fd, err := OpenBeneath(dirfd, p, unix.O_RDONLY)
		if err == nil {
			unix.Close(fd)
			t.Errorf("OpenBeneath(%q) escaped", p)
		} else if errors.Is(err, ErrNoOpenat2) {
			t.Skip(err)
		}
	}
	for _, p := range []string{"in", "inner", "./in", "x/../in"} {
		if p == "x/../in" {
			_ = os.Mkdir(filepath.Join(root, "x"), 0o700)
		}
		fd, err := OpenBeneath(dirfd, p, unix.O_RDONLY)
		if err != nil {
			t.Errorf("OpenBeneath(%q) = %v, want it to open", p, err)
			continue
		}
		unix.Close(fd)
	}
}

func TestOpenNoSymlinksRefusesALinkedParent(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "real", "skill"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "real"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if fd, err := OpenNoSymlinks(filepath.Join(root, "link", "skill"), unix.O_PATH, false); err == nil {
		unix.Close(fd)
		t.Fatal("a symlinked parent was followed")
	}
	fd, err := OpenNoSymlinks(filepath.Join(root, "real", "skill"), unix.O_PATH, false)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
}

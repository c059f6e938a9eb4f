//go:build linux

package pet

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/pixie-dev/pixie/internal/confine"
)

// pinned checks that p, opened with no symbolic link in any component, is the directory st
// describes: a parent folder swapped for a symlink after the path was resolved is caught.
func pinned(p string, st fs.FileInfo) error {
	fd, err := confine.OpenNoSymlinks(p, unix.O_PATH|unix.O_DIRECTORY, false)
	if errors.Is(err, confine.ErrNoOpenat2) {
		return nil // an older kernel: the resolved-path check stands alone
	}
	if err != nil {
		return errors.New("a parent folder of the Skill path is a symlink, or changed while being read; give the real path")
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !os.SameFile(info, st) {
		return errors.New("the Skill directory changed while being read")
	}
	return nil
}

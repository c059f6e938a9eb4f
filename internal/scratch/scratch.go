// Package scratch owns Pixie's private temporary directories. Each is made 0700 in a parent
// (normally os.TempDir()) under a fixed prefix, and holds a lock file that the process owning
// it keeps locked (flock) until it removes the directory. Open first removes every directory
// of the same prefix whose lock is free: one left behind by a process killed before it could
// clean up (kill -9, a crash, a power cut), so such leftovers do not pile up.
package scratch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// LockFile is the name of the lock file inside a scratch directory.
const LockFile = ".pixie-lock"

// legacyAge is how old a directory without a lock file (made by an older Pixie, or caught
// between its creation and its lock) must be before Clean takes it for a leftover.
const legacyAge = time.Minute

// Dir is one scratch directory, locked by this process until Close.
type Dir struct {
	path string
	lock *os.File
}

// Open cleans parent of the leftovers of prefix (Clean) and makes a new scratch directory
// there, named prefix followed by random characters.
func Open(parent, prefix string) (*Dir, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	Clean(parent, prefix)
	dir, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		err = flock(lock, true)
	}
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	return &Dir{path: dir, lock: lock}, nil
}

// Path returns the directory's path.
func (d *Dir) Path() string { return d.path }

// Close removes the directory and everything in it, then releases the lock.
func (d *Dir) Close() error {
	err := os.RemoveAll(d.path)
	_ = d.lock.Close()
	return err
}

// Clean removes the directories of parent named prefix… that no live process holds: their
// lock file is not locked, or (for a directory without one) they are older than a minute. Only
// real directories owned by this user are considered. It returns what it removed.
func Clean(parent, prefix string) []string {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) || !e.IsDir() || e.Type()&fs.ModeSymlink != 0 {
			continue
		}
		p := filepath.Join(parent, e.Name())
		info, err := os.Lstat(p)
		if err != nil || !info.IsDir() || !ownedByMe(info) {
			continue
		}
		if stale(p, info) {
			if err := os.RemoveAll(p); err == nil {
				removed = append(removed, p)
			}
		}
	}
	return removed
}

// stale reports whether no process holds the scratch directory p.
func stale(p string, info fs.FileInfo) bool {
	lock, err := os.OpenFile(filepath.Join(p, LockFile), os.O_RDWR|syscallNoFollow, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return time.Since(info.ModTime()) > legacyAge
	}
	if err != nil {
		return false
	}
	defer lock.Close()
	// Locked here, the lock stays ours until the directory is gone: a process that lost a race
	// to it cannot start using it meanwhile.
	return flock(lock, false) == nil
}

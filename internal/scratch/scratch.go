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

// LegacyFunc tells whether a directory without a lock file (made by an older Pixie, or by
// something else that uses the same prefix) is a leftover Clean may remove.
type LegacyFunc func(path string, info fs.FileInfo) bool

// OlderThan returns a LegacyFunc that takes a lockless directory for a leftover once it is
// older than age, and contains nothing but what only accepts (nil accepts anything).
func OlderThan(age time.Duration, only func(entries []fs.DirEntry) bool) LegacyFunc {
	return func(path string, info fs.FileInfo) bool {
		if time.Since(info.ModTime()) <= age {
			return false
		}
		if only == nil {
			return true
		}
		entries, err := os.ReadDir(path)
		return err == nil && only(entries)
	}
}

// Dir is one scratch directory, locked by this process until Close.
type Dir struct {
	path string
	lock *os.File
}

// Open cleans parent of the leftovers of prefix (Clean, with legacy for lockless ones) and
// makes a new scratch directory there, named prefix followed by random characters.
func Open(parent, prefix string, legacy LegacyFunc) (*Dir, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	Clean(parent, prefix, legacy)
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
// lock file is not locked, or (for a directory without one) legacy accepts them (nil accepts
// none). Only real directories owned by this user are considered. It returns what it removed.
func Clean(parent, prefix string, legacy LegacyFunc) []string {
	if parent == "" {
		parent = os.TempDir()
	}
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
		if stale(p, info, legacy) {
			if err := os.RemoveAll(p); err == nil {
				removed = append(removed, p)
			}
		}
	}
	return removed
}

// stale reports whether no process holds the scratch directory p.
func stale(p string, info fs.FileInfo, legacy LegacyFunc) bool {
	lock, err := os.OpenFile(filepath.Join(p, LockFile), os.O_RDWR|syscallNoFollow, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return legacy != nil && legacy(p, info)
	}
	if err != nil {
		return false
	}
	defer lock.Close()
	// Locked here, the lock stays ours until the directory is gone: a process that lost a race
	// to it cannot start using it meanwhile.
	return flock(lock, false) == nil
}

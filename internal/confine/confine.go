// Package confine owns the path facts the sandboxes rely on: a path's resolved form (every
// symbolic link of every component followed), whether one resolved path lies within another,
// and every place in the mount table at which a directory can be reached (its aliases: the
// directory itself, bind mounts of it or of anything inside it, and a second mount of a file
// system that holds it). The bash sandbox (runtime/sandbox), the WASM guest's /work mount
// (runtime/wasm) and Pet's Skill checks (internal/pet) compare paths only through it, never as
// the strings a user gave.
package confine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Resolve returns p absolute, clean and with every symbolic link resolved (filepath.EvalSymlinks
// of every component). p must exist.
func Resolve(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	r, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	return filepath.Clean(r), nil
}

// Within reports whether p is dir or lies beneath it. Both must be clean and absolute.
func Within(p, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// WithinAny returns the first of dirs that p lies within, and whether there is one.
func WithinAny(p string, dirs []string) (string, bool) {
	for _, d := range dirs {
		if Within(p, d) {
			return d, true
		}
	}
	return "", false
}

// ErrRoot is returned by Aliases for a directory that resolves to the root directory: all of the
// file system cannot be hidden.
var ErrRoot = errors.New("the root directory cannot be hidden")

// Aliases returns every path of the current mount namespace through which dir, or something
// inside it, can be reached: dir resolved first, then (sorted, without duplicates) the mount
// points of bind mounts of dir or of anything inside it, and the path at which another mount of
// a file system that holds dir shows it. Mounts nested inside dir count too: another mount of
// their file system is an alias as well. A missing dir has no aliases (nil, nil).
//
// Hard links to files inside dir are not found (no index of them exists); a directory cannot
// be hard-linked.
func Aliases(dir string) ([]string, error) {
	real, err := Resolve(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", dir, err)
	}
	if real == "/" {
		return nil, fmt.Errorf("%s: %w", dir, ErrRoot)
	}
	mounts, err := readMounts()
	if err != nil {
		return nil, err
	}
	return aliases(real, mounts, statID), nil
}

//go:build !unix

package pet

import (
	"errors"
	"io/fs"
	"os"
)

const (
	noFollow = 0
	nonBlock = 0
)

// openNoFollow opens path for reading, refusing a symlink (checked just before opening; this
// platform has no O_NOFOLLOW).
func openNoFollow(path string) (*os.File, error) {
	info, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	return os.Open(path)
}

func fileIdentity(fs.FileInfo) string { return "" }
func deviceOf(fs.FileInfo) uint64     { return 0 }
func linkCount(fs.FileInfo) uint64    { return 1 }

// pinned has no descriptor-based check here; the path was resolved just before.
func pinned(string, fs.FileInfo) error { return nil }

//go:build !unix

package pet

import (
	"errors"
	"os"
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

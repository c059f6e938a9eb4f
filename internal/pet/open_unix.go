//go:build unix

package pet

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

const (
	noFollow = syscall.O_NOFOLLOW
	nonBlock = syscall.O_NONBLOCK
)

// openNoFollow opens path for reading without following a final symlink and without blocking
// on a fifo.
func openNoFollow(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
}

func statOf(info fs.FileInfo) *syscall.Stat_t {
	st, _ := info.Sys().(*syscall.Stat_t)
	return st
}

// fileIdentity is a file's device and inode numbers, "dev:ino".
func fileIdentity(info fs.FileInfo) string {
	if st := statOf(info); st != nil {
		return fmt.Sprintf("%d:%d", uint64(st.Dev), uint64(st.Ino))
	}
	return ""
}

func deviceOf(info fs.FileInfo) uint64 {
	if st := statOf(info); st != nil {
		return uint64(st.Dev)
	}
	return 0
}

func linkCount(info fs.FileInfo) uint64 {
	if st := statOf(info); st != nil {
		return uint64(st.Nlink)
	}
	return 1
}

//go:build unix

package agent

import (
	"io/fs"
	"syscall"
)

// nonBlock keeps an open of a fifo from blocking.
const nonBlock = syscall.O_NONBLOCK

// linkCount is a file's number of hard links.
func linkCount(info fs.FileInfo) uint64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

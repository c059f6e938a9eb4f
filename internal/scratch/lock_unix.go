//go:build unix

package scratch

import (
	"io/fs"
	"os"
	"syscall"
)

const syscallNoFollow = syscall.O_NOFOLLOW

// flock takes an exclusive lock on f without waiting.
func flock(f *os.File, _ bool) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != syscall.EINTR {
			return err
		}
	}
}

func ownedByMe(info fs.FileInfo) bool {
	st, ok := info.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

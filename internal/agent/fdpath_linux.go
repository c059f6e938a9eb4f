package agent

import (
	"os"
	"strconv"
)

// fdPath is the real path of an open file, as the kernel knows it.
func fdPath(f *os.File) (string, bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return "", false
	}
	var p string
	var lerr error
	if err := rc.Control(func(fd uintptr) {
		p, lerr = os.Readlink("/proc/self/fd/" + strconv.FormatUint(uint64(fd), 10))
	}); err != nil || lerr != nil || p == "" || p[0] != '/' {
		return "", false
	}
	return p, true
}

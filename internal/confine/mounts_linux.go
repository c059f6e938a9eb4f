//go:build linux

package confine

import (
	"fmt"
	"os"
	"syscall"
)

func readMounts() ([]mount, error) {
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading the mount table: %w", err)
	}
	return parseMountInfo(string(raw)), nil
}

func statID(p string) (fileID, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		return fileID{}, false
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino}, true
}

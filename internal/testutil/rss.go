package testutil

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// RSSMiB returns the resident set size of process pid (0: this process) in MiB, read from
// /proc; it skips the benchmark or test where there is no /proc.
func RSSMiB(tb testing.TB, pid int) float64 {
	tb.Helper()
	path := "/proc/self/status"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/status", pid)
	}
	f, err := os.Open(path)
	if err != nil {
		tb.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				tb.Fatal(err)
			}
			return float64(kb) / 1024
		}
	}
	tb.Fatal("no VmRSS in " + path)
	return 0
}

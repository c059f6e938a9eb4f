package loadbench

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// PinDriver restricts this process (every thread it has, and so the threads it starts later)
// to the CPUs in list ("1", "0-1,3"), so that the driver and the servers can be kept apart.
func PinDriver(list string) error {
	var set unix.CPUSet
	set.Zero()
	for _, part := range strings.Split(list, ",") {
		lo, hi, found := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return fmt.Errorf("cpu list %q: %w", list, err)
		}
		b := a
		if found {
			if b, err = strconv.Atoi(hi); err != nil {
				return fmt.Errorf("cpu list %q: %w", list, err)
			}
		}
		for c := a; c <= b; c++ {
			set.Set(c)
		}
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			return fmt.Errorf("pin thread %d to CPUs %s: %w", tid, list, err)
		}
	}
	return nil
}

// driverCPUs lists the CPUs this thread may run on, or "" when that is every online CPU.
func driverCPUs() string {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return ""
	}
	n := 0
	var cpus []string
	for c := range 1024 {
		if set.IsSet(c) {
			cpus = append(cpus, strconv.Itoa(c))
			n++
		}
	}
	if online, err := os.ReadFile("/sys/devices/system/cpu/online"); err == nil && cpuCount(strings.TrimSpace(string(online))) == n {
		return ""
	}
	return strings.Join(cpus, ",")
}

// cpuCount counts the CPUs of a list such as "0-1,3".
func cpuCount(list string) int {
	n := 0
	for _, part := range strings.Split(list, ",") {
		lo, hi, found := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		switch {
		case err1 != nil:
		case found && err2 == nil:
			n += b - a + 1
		default:
			n++
		}
	}
	return n
}

// rssPartsMiB is process pid's resident set in MiB split into anonymous memory (RssAnon) and
// mapped files (RssFile: its binary, and Badger's tables and logs, which it maps).
func rssPartsMiB(pid int) (anon, file float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "RssAnon" && k != "RssFile") {
			continue
		}
		kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		if err != nil {
			return 0, 0, err
		}
		if k == "RssAnon" {
			anon = float64(kb) / 1024
		} else {
			file = float64(kb) / 1024
		}
	}
	return anon, file, nil
}

// rssMiB is process pid's VmRSS in MiB.
func rssMiB(pid int) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				return 0, err
			}
			return float64(kb) / 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

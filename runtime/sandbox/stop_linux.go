package sandbox

import (
	"errors"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The caller's side of a run's end: the bash executor (runtime/bash) and Pet's external
// executors (internal/pet) start the verb the same way and stop it the same way.

// StopVerb kills every process of the run whose verb is pid: in namespaces by killing the verb
// (the kernel kills the rest of its PID namespace), otherwise by SignalStop first, after which
// the verb kills its descendants and exits (it gets up to wait for that), then SIGKILL to the
// verb and its process group. exited is closed once the verb has exited (WaitExited); StopVerb
// returns then.
func StopVerb(pid int, iso Isolation, wait time.Duration, exited <-chan struct{}) {
	if !iso.Namespaces {
		_ = syscall.Kill(pid, SignalStop)
		t := time.NewTimer(wait)
		select {
		case <-exited:
		case <-t.C:
		}
		t.Stop()
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-exited
}

// WaitExited blocks until the process pid has exited, without reaping it (WNOWAIT): the
// caller's cmd.Wait reaps it later, after the process group has been swept.
func WaitExited(pid int) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, syscall.EINTR) {
			return
		}
	}
}

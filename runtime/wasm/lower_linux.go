package wasm

import "golang.org/x/sys/unix"

// lowerable is whether threads can be moved to an idle class here.
const lowerable = true

// threadAttr is a thread's scheduling attributes before it was lowered, and the thread.
type threadAttr struct {
	tid  int
	attr unix.SchedAttr
}

const schedIdle = 5 // SCHED_IDLE

// lowerThread moves the calling thread (locked to its goroutine) to SCHED_IDLE and returns what
// it was; false when the OS refused.
func lowerThread() (threadAttr, bool) {
	tid := unix.Gettid()
	attr, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return threadAttr{}, false
	}
	saved := threadAttr{tid: tid, attr: *attr}
	idle := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: schedIdle}
	if err := unix.SchedSetAttr(tid, &idle, 0); err != nil {
		return threadAttr{}, false
	}
	return saved, true
}

// raiseThread gives a lowered thread its attributes back (it may be called from another
// thread, and more than once).
func raiseThread(s threadAttr) error {
	a := s.attr
	a.Size = unix.SizeofSchedAttr
	return unix.SchedSetAttr(s.tid, &a, 0)
}

// onMainThread reports whether the calling thread is the process's first one.
func onMainThread() bool { return unix.Gettid() == unix.Getpid() }

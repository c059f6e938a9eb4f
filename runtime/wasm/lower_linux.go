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

// mayRaise reports whether the calling thread (locked to its goroutine) could leave SCHED_IDLE
// again, without lowering it: the kernel lets a thread leave the idle class exactly when it
// would let it take back its nice value once lowered (RLIMIT_NICE or CAP_SYS_NICE), so the
// thread's nice value goes one step up and back. changed is whether the thread was left one
// step up (the answer is no, and the thread must not go back to the runtime's pool).
func mayRaise() (ok, changed bool) {
	a, err := unix.SchedGetAttr(0, 0)
	if err != nil || (a.Policy != 0 && a.Policy != 3) || a.Nice >= 19 { // SCHED_OTHER, SCHED_BATCH
		return false, false
	}
	saved := *a
	saved.Size = unix.SizeofSchedAttr
	up := saved
	up.Nice++
	if unix.SchedSetAttr(0, &up, 0) != nil {
		return false, false
	}
	if unix.SchedSetAttr(0, &saved, 0) != nil {
		return false, true
	}
	return true, false
}

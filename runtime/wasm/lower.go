package wasm

import (
	"context"
	"os"
	goruntime "runtime"
	"sync"
	"sync/atomic"
)

// Background runs on idle threads (off unless IdleThreadsEnv turns them on).
//
// `pixie serve` runs more Go processors than CPUs (cmd/pixie: procs.go), so that a thread the
// OS preempts does not stall the goroutines queued on its processor. The Go scheduler then no
// longer decides alone who gets a CPU: the OS shares the CPUs between the server's threads, and
// a background run (a module that faults, or a run that went on too long: admission.go) that
// spins on one thread took its OS share from the threads serving healthy gates (a storm of
// fault guests pushed a good gate's p99 to 2.5× its quiet p99). So background guest code runs
// on threads of the OS's idle class (SCHED_IDLE on Linux): they get a CPU only when no other
// thread wants it, and any other thread that wakes preempts them at once.
//
// What that costs, and how it is bounded:
//   - A thread cannot leave the idle class without privilege (CAP_SYS_NICE, or an RLIMIT_NICE
//     of 20; it is 0 by default), and a thread discarded lowered can, as it exits, start the
//     thread that takes its processor, which inherits the idle class and joins the runtime's
//     pool. So a lowered thread is either raised again before it is given back (canRaise,
//     asked once without lowering one), or kept for good by an idle worker (below).
//   - A run that is in the background from its start, and the making of instances for a
//     faulting module's pool, run on a thread lowered for them (onIdleThread): with the
//     privilege, a goroutine of their own whose thread is raised and given back when they
//     end; without it, an idle worker. A run demoted while it executes is on its caller's
//     goroutine: its thread is lowered in place only with the privilege, and only when the
//     demotion counts against its module (admission.go: not at a run's first check).
//   - Code on an idle thread can wait for a CPU while other processes keep both busy, and the
//     run's deadline, the GC's stop-the-world and the run's slot are all met at its checks. So
//     a lowered run checks sixteen times as often (loweredDivisor, about every 60 µs of code);
//     and when the thread can be raised, it is raised once the run's context is done, so that
//     the time limit ends it as promptly as any other run.

// IdleThreadsEnv is the environment variable that turns idle threads on ("1"). They are off by
// default: on a machine that other processes keep busy (a build beside the agent), an
// idle-class thread waits about a second between turns, and a GC's stop-the-world waits for
// it. With four busy loops on two CPUs, runs ended 0.2–3.9 s after their deadline and GCs took
// up to 4 s; without idle threads, 1–16 ms and 2–52 ms (TestTimeLimit, docs/runtime.md).
const IdleThreadsEnv = "PIXIE_WASM_IDLE_THREADS"

// idleThreads is whether background code is lowered at all (IdleThreadsEnv).
var idleThreads atomic.Bool

func init() { idleThreads.Store(os.Getenv(IdleThreadsEnv) == "1") }

// loweredDivisor divides the fuel between checks of code on a lowered thread.
const loweredDivisor = 16

// loweredKey marks the context of code that runs on a lowered thread.
type loweredKey struct{}

func withLowered(ctx context.Context) context.Context {
	return context.WithValue(ctx, loweredKey{}, true)
}

func isLowered(ctx context.Context) bool {
	v, _ := ctx.Value(loweredKey{}).(bool)
	return v
}

// CanLowerBackground reports whether background guest code runs on idle-class threads here
// (turned on by IdleThreadsEnv, on Linux, where the OS lets a thread be lowered); `pixie
// serve` runs more Go processors than CPUs only then.
func CanLowerBackground() bool {
	return lowerable && idleThreads.Load() && (canRaise() || idleWorkersLower())
}

// canRaise reports whether this process can move a thread out of the idle class again. It
// asks the kernel the same question without lowering a thread (mayRaise: a thread's nice
// value is raised by one and given back); where the answer is no, the probing thread is left
// one nice step down, so its goroutine keeps it, asleep, for good: discarded, it could start
// the thread that takes its processor as it exits, which would inherit its priority.
var canRaise = sync.OnceValue(func() bool {
	ok := make(chan bool, 1)
	go func() {
		goruntime.LockOSThread()
		can, changed := mayRaise()
		ok <- can
		if changed {
			select {} // the thread stays, asleep, with this goroutine
		}
		goruntime.UnlockOSThread()
	}()
	return <-ok
})

// onIdleThread runs f on a thread in the OS's idle class, and waits for it; ctx is f's
// context, marked as lowered (withLowered). Where a thread can be raised again (canRaise), f
// runs on a new goroutine whose thread is lowered for it, then raised and given back; elsewhere
// on an idle worker (below). f runs on the caller's goroutine instead when no thread can be
// lowered here. A panic in f is raised again in the caller.
func onIdleThread(ctx context.Context, f func(ctx context.Context)) {
	if !lowerable || !idleThreads.Load() {
		f(ctx)
		return
	}
	if !canRaise() {
		// A thread that cannot be raised is never handed back, nor discarded: as it exits, it
		// can start the thread that takes its processor, which would inherit the idle class
		// and join the runtime's pool (TestBackgroundRunsWithoutPrivilege caught one).
		if !onIdleWorker(ctx, f) {
			f(ctx)
		}
		return
	}
	done := make(chan any, 1)
	go func() {
		goruntime.LockOSThread()
		j := &idleJob{ctx: ctx, f: f}
		lowered := lowerLocked(ctx)
		if lowered == nil {
			p := j.call(ctx)
			goruntime.UnlockOSThread() // a thread left as it was is the runtime's again
			done <- p
			return
		}
		p := j.call(withLowered(ctx))
		raised := lowered.restore()
		done <- p
		if !raised {
			// Not raised after all (the limit changed meanwhile): the thread stays lowered, so
			// this goroutine keeps it for good, as an idle worker, rather than discard it.
			idleWorkers.Add(1)
			idleWorker(nil, nil, true)
		}
	}()
	if p := <-done; p != nil {
		panic(p)
	}
}

// Idle workers.
//
// Where a thread cannot be raised out of the idle class again, background code runs on idle
// workers: goroutines that lock a thread, lower it, and keep it for good, taking one job after
// another. A locked thread runs no other goroutine, and a thread its goroutine keeps never
// exits, so no lowered thread ever reaches the runtime's pool. A worker waits for a job asleep
// (it holds no processor then); a job that finds none waiting starts one, up to
// maxIdleWorkers: past that, it runs at its caller's priority.

// maxIdleWorkers bounds the idle workers (each is an OS thread kept for good). Background code
// holds a background slot, so this is reached only when many background runs wait for the
// model at once.
const maxIdleWorkers = 32

// idleJob is one call of onIdleThread given to a worker.
type idleJob struct {
	ctx  context.Context
	f    func(ctx context.Context)
	done chan any // f's panic, or nil
}

var (
	// idleJobs hands a job to a worker.
	idleJobs = make(chan *idleJob)
	// idleWorkers counts the workers started; idleFree those that wait for a job and no caller
	// has claimed. A worker counts itself free before its caller learns that its job is done,
	// so that the caller's next job finds it.
	idleWorkers, idleFree atomic.Int32
)

// idleWorkersLower reports whether a worker's thread can be lowered here; asking starts the
// first worker.
var idleWorkersLower = sync.OnceValue(func() bool {
	lowered := make(chan bool, 1)
	idleWorkers.Add(1)
	go idleWorker(nil, lowered, false)
	return <-lowered
})

// onIdleWorker runs f on an idle worker and waits for it; false when none can take it (no
// thread can be lowered here, or maxIdleWorkers are busy).
func onIdleWorker(ctx context.Context, f func(ctx context.Context)) bool {
	if !idleWorkersLower() {
		return false
	}
	j := &idleJob{ctx: ctx, f: f, done: make(chan any, 1)}
	for {
		n := idleFree.Load()
		if n > 0 {
			if !idleFree.CompareAndSwap(n, n-1) {
				continue
			}
			idleJobs <- j // a free worker is on its way to take it
			break
		}
		if idleWorkers.Add(1) > maxIdleWorkers {
			idleWorkers.Add(-1)
			return false
		}
		go idleWorker(j, nil, false)
		break
	}
	if p := <-j.done; p != nil {
		panic(p)
	}
	return true
}

// idleWorker is a worker's goroutine: it runs first (if any), then every job it receives. It
// tells lowered whether its thread could be lowered; one that could not gives its thread
// back, after its first job, at its caller's priority. already is whether the calling
// goroutine holds a lowered thread already.
func idleWorker(first *idleJob, lowered chan<- bool, already bool) {
	ok := already
	if !already {
		goruntime.LockOSThread()
		_, ok = lowerThread()
	}
	if lowered != nil {
		lowered <- ok
	}
	if !ok {
		idleWorkers.Add(-1)
		goruntime.UnlockOSThread()
		if first != nil {
			first.done <- first.call(first.ctx)
		}
		return
	}
	for j := first; ; j = <-idleJobs {
		if j == nil {
			idleFree.Add(1)
			continue
		}
		panicked := j.call(withLowered(j.ctx))
		idleFree.Add(1)
		j.done <- panicked
	}
}

// call runs the job's f and returns its panic.
func (j *idleJob) call(ctx context.Context) (panicked any) {
	defer func() { panicked = recover() }()
	j.f(ctx)
	return nil
}

// raiseBack raises a lowered thread at the end of its job (a variable for a test of the case
// where that fails).
var raiseBack = raiseThread

// inPlace is a thread a goroutine locked and moved to the idle class.
type inPlace struct {
	saved threadAttr
	// stop ends the raising of the thread when the run's context ends (canRaise).
	stop func() bool
}

// lowerLocked moves the calling thread, which its goroutine has locked, to the idle class; nil
// when the OS refused. Where threads can be raised, it is raised as soon as ctx ends.
func lowerLocked(ctx context.Context) *inPlace {
	saved, ok := lowerThread()
	if !ok {
		return nil
	}
	p := &inPlace{saved: saved, stop: func() bool { return false }}
	if canRaise() {
		p.stop = context.AfterFunc(ctx, func() { _ = raiseThread(saved) })
	}
	return p
}

// lowerInPlace locks the calling goroutine to its thread and lowers the thread until restore,
// only where it can be raised again (canRaise); nil when it did not.
func lowerInPlace(ctx context.Context) *inPlace {
	if !lowerable || !idleThreads.Load() || !canRaise() {
		return nil
	}
	goruntime.LockOSThread()
	p := lowerLocked(ctx)
	if p == nil {
		goruntime.UnlockOSThread()
	}
	return p
}

// restore raises the thread and lets the goroutine go; it is called on the goroutine that
// lowered it. A thread that cannot be raised stays locked to the goroutine: it is never handed
// back to the runtime lowered.
func (p *inPlace) restore() (raised bool) {
	if p == nil {
		return true
	}
	p.stop()
	if raiseBack(p.saved) != nil {
		return false
	}
	goruntime.UnlockOSThread()
	return true
}

package wasm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/runtime"
	"golang.org/x/sys/unix"
)

// threadPolicy is the calling thread's scheduling policy.
func threadPolicy(t *testing.T) uint32 {
	t.Helper()
	a, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return a.Policy
}

// idleThreadCount counts this process's threads in SCHED_IDLE (field 41 of /proc's stat).
func idleThreadCount(t *testing.T) int {
	t.Helper()
	return countIdleThreads(t, false)
}

// runningIdleThreads counts those of them that run or wait for a CPU (state R, field 3): an
// idle worker waiting for a job sleeps.
func runningIdleThreads(t *testing.T) int {
	t.Helper()
	return countIdleThreads(t, true)
}

func countIdleThreads(t *testing.T, running bool) int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/stat")
		if err != nil {
			continue // the thread ended meanwhile
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if p, _ := strconv.Atoi(fields[41-3]); p == schedIdle && (!running || fields[0] == "R") {
			n++
		}
	}
	return n
}

// strayIdleThreads waits for the idle threads other than the idle workers' to end (a thread
// discarded with its goroutine exits after it) and returns how many are left.
func strayIdleThreads(t *testing.T) int {
	t.Helper()
	stray := func() int { return idleThreadCount(t) - int(idleWorkers.Load()) }
	for end := time.Now().Add(5 * time.Second); stray() > 0 && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
	return max(0, stray())
}

// goroutinesOnIdleThreads runs goroutines that come and go, as a server's do, and counts the
// times one found itself on an idle-class thread: a lowered thread in the runtime's pool.
func goroutinesOnIdleThreads(t *testing.T) int {
	t.Helper()
	var seen atomic.Int32
	for range 4 {
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				for range 20 {
					if a, err := unix.SchedGetAttr(0, 0); err == nil && a.Policy == schedIdle {
						seen.Add(1)
					}
					goruntime.Gosched()
					time.Sleep(50 * time.Microsecond)
				}
			})
		}
		wg.Wait()
	}
	return int(seen.Load())
}

// threadsOffNice counts this process's threads whose nice value (field 19 of /proc's stat) is
// not the one most threads have.
func threadsOffNice(t *testing.T) int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	count, total := map[int]int{}, 0
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		nice, _ := strconv.Atoi(fields[19-3])
		count[nice]++
		total++
	}
	most := 0
	for _, n := range count {
		most = max(most, n)
	}
	return total - most
}

// TestCanRaise: the probe lowers no thread, and where the answer is no, the one thread it
// left a nice step down stays out of the runtime's pool (threads started later are not born
// from it).
func TestCanRaise(t *testing.T) {
	withIdleThreads(t)
	can := canRaise()
	if n := strayIdleThreads(t); n != 0 {
		t.Fatalf("%d idle threads after the probe, besides the idle workers'", n)
	}
	// New threads: goroutines that each hold one while the others start.
	release := make(chan struct{})
	held := make(chan struct{})
	for range 8 {
		go func() {
			goruntime.LockOSThread()
			defer goruntime.UnlockOSThread()
			held <- struct{}{}
			<-release
		}()
	}
	for range 8 {
		<-held
	}
	want := 1 // the probe's thread, asleep for good
	if can {
		want = 0
	}
	n := threadsOffNice(t)
	t.Logf("can raise: %v; %d threads off the process's nice value", can, n)
	if n > want {
		t.Errorf("%d threads off the process's nice value, want at most %d (can raise: %v)", n, want, can)
	}
	close(release)
}

// withIdleThreads turns idle threads on for the test (IdleThreadsEnv).
func withIdleThreads(t *testing.T) {
	t.Helper()
	was := idleThreads.Load()
	idleThreads.Store(true)
	t.Cleanup(func() { idleThreads.Store(was) })
}

// TestIdleThreadsOff: by default nothing is lowered: background code runs on its caller's
// goroutine at its priority, and the server keeps one processor per CPU.
func TestIdleThreadsOff(t *testing.T) {
	if os.Getenv(IdleThreadsEnv) == "1" {
		t.Skip(IdleThreadsEnv + " is set")
	}
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	caller, tid := threadPolicy(t), unix.Gettid()
	var inside uint32
	var marked, same bool
	onIdleThread(context.Background(), func(ctx context.Context) {
		inside, marked, same = threadPolicy(t), isLowered(ctx), unix.Gettid() == tid
	})
	if inside != caller || marked || !same {
		t.Errorf("inside: policy %d, marked lowered %v, on the caller's thread %v; want %d, false, true", inside, marked, same, caller)
	}
	if p := lowerInPlace(context.Background()); p != nil {
		p.restore()
		t.Error("lowered in place with idle threads off")
	}
	if CanLowerBackground() {
		t.Error("CanLowerBackground with idle threads off")
	}
}

func TestOnIdleThread(t *testing.T) {
	withIdleThreads(t)
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	caller := threadPolicy(t)
	var inside uint32
	var marked bool
	onIdleThread(context.Background(), func(ctx context.Context) {
		inside, marked = threadPolicy(t), isLowered(ctx)
	})
	if inside != schedIdle || !marked {
		t.Errorf("inside: policy %d, marked lowered %v; want SCHED_IDLE (%d), true (can raise: %v)", inside, marked, schedIdle, canRaise())
	}
	if got := threadPolicy(t); got != caller {
		t.Errorf("the caller's thread: policy %d after, %d before", got, caller)
	}
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Errorf("recovered %v, want the panic of f", p)
			}
		}()
		onIdleThread(context.Background(), func(context.Context) { panic("boom") })
	}()
	if n := goroutinesOnIdleThreads(t); n != 0 {
		t.Errorf("goroutines found themselves on an idle thread %d times", n)
	}
}

// TestIdleWorkers: where threads cannot be raised again, background code runs on workers that
// keep their lowered thread for good. Jobs run lowered, a worker takes one job after another,
// jobs at once get workers of their own up to maxIdleWorkers, and a panic reaches the caller.
func TestIdleWorkers(t *testing.T) {
	withIdleThreads(t)
	ctx := context.Background()
	var inside uint32
	var marked bool
	if !onIdleWorker(ctx, func(ctx context.Context) { inside, marked = threadPolicy(t), isLowered(ctx) }) {
		t.Fatal("no idle worker here")
	}
	if inside != schedIdle || !marked {
		t.Fatalf("inside: policy %d, marked lowered %v; want SCHED_IDLE, true", inside, marked)
	}
	// One after another: the same worker.
	before := idleWorkers.Load()
	for range 20 {
		onIdleWorker(ctx, func(context.Context) {})
	}
	if got := idleWorkers.Load(); got != before {
		t.Errorf("%d workers after 20 jobs one after another, %d before", got, before)
	}
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Errorf("recovered %v, want the job's panic", p)
			}
		}()
		onIdleWorker(ctx, func(context.Context) { panic("boom") })
	}()
	// At once: up to maxIdleWorkers jobs, each on a worker; then none takes one more. (There can
	// be more workers already: a thread that could not be raised after all is kept as one,
	// TestRaiseFailsAfterAll.)
	n := max(maxIdleWorkers, int(idleWorkers.Load()))
	started, release := make(chan uint32), make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			onIdleWorker(ctx, func(context.Context) {
				started <- threadPolicy(t)
				<-release
			})
		})
	}
	for range n {
		if p := <-started; p != schedIdle {
			t.Errorf("a job at once ran with policy %d", p)
		}
	}
	if onIdleWorker(ctx, func(context.Context) { t.Error("a job ran past maxIdleWorkers") }) {
		t.Error("a worker took a job while maxIdleWorkers were busy")
	}
	close(release)
	wg.Wait()
	if got := idleWorkers.Load(); int(got) != n {
		t.Errorf("%d workers, want %d", got, n)
	}
	if got := idleThreadCount(t); got < n {
		t.Errorf("%d idle threads, want the %d workers'", got, n)
	}
	if n := goroutinesOnIdleThreads(t); n != 0 {
		t.Errorf("goroutines found themselves on an idle thread %d times", n)
	}
}

// TestRaiseFailsAfterAll: a thread lowered for a job that cannot be raised at its end (the
// limit changed meanwhile) is kept by its goroutine as an idle worker, not discarded lowered.
func TestRaiseFailsAfterAll(t *testing.T) {
	withIdleThreads(t)
	if !canRaise() {
		t.Skip("this process cannot raise a thread out of SCHED_IDLE: jobs run on idle workers from the start")
	}
	raiseBack = func(threadAttr) error { return unix.EPERM }
	before := idleWorkers.Load()
	var inside uint32
	onIdleThread(context.Background(), func(context.Context) { inside = threadPolicy(t) })
	raiseBack = raiseThread
	if inside != schedIdle {
		t.Fatalf("the job ran with policy %d", inside)
	}
	deadline := time.Now().Add(5 * time.Second)
	for idleWorkers.Load() == before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := idleWorkers.Load(); got != before+1 {
		t.Fatalf("%d idle workers, want %d: the thread that stayed lowered was not kept", got, before+1)
	}
	if n := strayIdleThreads(t); n != 0 {
		t.Errorf("%d idle threads besides the idle workers'", n)
	}
	if n := goroutinesOnIdleThreads(t); n != 0 {
		t.Errorf("goroutines found themselves on an idle thread %d times", n)
	}
	// The kept thread takes idle workers' jobs.
	var worker uint32
	if !onIdleWorker(context.Background(), func(context.Context) { worker = threadPolicy(t) }) || worker != schedIdle {
		t.Errorf("a job on the idle workers ran with policy %d", worker)
	}
}

func TestLowerInPlace(t *testing.T) {
	withIdleThreads(t)
	if !canRaise() {
		t.Skip("this process cannot raise a thread out of SCHED_IDLE (no CAP_SYS_NICE): runs demoted in place keep their priority")
	}
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	before := threadPolicy(t)
	p := lowerInPlace(context.Background())
	if p == nil {
		t.Fatal("not lowered")
	}
	if got := threadPolicy(t); got != schedIdle {
		t.Errorf("lowered: policy %d, want SCHED_IDLE", got)
	}
	p.restore()
	if got := threadPolicy(t); got != before {
		t.Errorf("restored: policy %d, want %d", got, before)
	}

	// The run's context ending raises the thread at once (the time limit must not wait for a
	// CPU no one else wants to give up).
	ctx, cancel := context.WithCancel(context.Background())
	p = lowerInPlace(ctx)
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for threadPolicy(t) == schedIdle && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := threadPolicy(t); got != before {
		t.Errorf("after the context ended: policy %d, want %d", got, before)
	}
	p.restore()
}

// TestBackgroundRunsOnIdleThreads: a run that goes on too long is moved to an idle thread (in
// place, when this process can raise it again), and once its module faulted, its next runs
// execute on an idle thread from their start; none is left behind but the idle workers', and no
// goroutine finds itself on one afterwards.
func TestBackgroundRunsOnIdleThreads(t *testing.T) {
	withIdleThreads(t)
	ctx := context.Background()
	wasm := watModule(t, "treerec")
	sum := sha256.Sum256(wasm)
	src := &fixedSource{sha: hex.EncodeToString(sum[:]), wasm: wasm}
	x, err := New(ctx, Config{CacheDir: t.TempDir(), PoolSize: -1, Source: src})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close(ctx)
	if n := strayIdleThreads(t); n != 0 {
		t.Fatalf("%d idle threads before any run, besides the idle workers'", n)
	}
	for _, tc := range []struct {
		name     string
		wantIdle bool
	}{
		{"the first run, demoted as it runs", canRaise()}, // lowered in place only where it can be raised again
		{"a run of the faulted module", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := x.Run(ctx, runtime.Request{Kind: runtime.KindModule, Ref: "m", Timeout: time.Second})
				done <- err
			}()
			seen := 0
			for end := time.Now().Add(700 * time.Millisecond); time.Now().Before(end) && seen == 0; time.Sleep(5 * time.Millisecond) {
				seen = runningIdleThreads(t)
			}
			if err := <-done; !errors.Is(err, runtime.ErrTimeout) {
				t.Fatalf("got %v, want the timeout error", err)
			}
			if (seen > 0) != tc.wantIdle {
				t.Errorf("%d idle threads seen during the run; want some: %v", seen, tc.wantIdle)
			}
			if n := strayIdleThreads(t); n != 0 {
				t.Errorf("%d idle threads left after the run, besides the idle workers'", n)
			}
			if n := goroutinesOnIdleThreads(t); n != 0 {
				t.Errorf("after the run, goroutines found themselves on an idle thread %d times", n)
			}
		})
	}
}

// TestBackgroundRunsWithoutPrivilege runs the tests above again in a process that cannot raise
// a thread out of SCHED_IDLE (root without CAP_SYS_NICE, as an unprivileged server is): a run
// demoted as it runs keeps its thread's priority, background runs execute on idle workers, and
// no goroutine ever finds itself on a lowered thread.
func TestBackgroundRunsWithoutPrivilege(t *testing.T) {
	if os.Getenv("PIXIE_TEST_WITHOUT_SYS_NICE") != "" {
		t.Skip("this is the process without the privilege")
	}
	if !canRaise() {
		t.Skip("this process has no privilege to drop: the tests above ran without it")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) is not installed")
	}
	cmd := exec.Command(setpriv, "--bounding-set=-sys_nice", "--inh-caps=-sys_nice", "--", os.Args[0],
		"-test.run", "^(TestIdleThreadsOff|TestCanRaise|TestOnIdleThread|TestIdleWorkers|TestLowerInPlace|TestBackgroundRunsOnIdleThreads)$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "PIXIE_TEST_WITHOUT_SYS_NICE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	for _, want := range []string{"--- PASS: TestIdleThreadsOff", "--- PASS: TestCanRaise", "--- SKIP: TestLowerInPlace", "--- PASS: TestOnIdleThread", "--- PASS: TestIdleWorkers", "--- PASS: TestBackgroundRunsOnIdleThreads"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the process without CAP_SYS_NICE did not report %q:\n%s", want, out)
		}
	}
}

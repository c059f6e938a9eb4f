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

// idleThreads counts this process's threads in SCHED_IDLE (field 41 of /proc's stat).
func idleThreads(t *testing.T) int {
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
		if p, _ := strconv.Atoi(fields[41-3]); p == schedIdle {
			n++
		}
	}
	return n
}

// waitNoIdleThreads waits for the idle threads to end (a discarded thread exits after its
// goroutine) and returns how many are left.
func waitNoIdleThreads(t *testing.T) int {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); idleThreads(t) > 0 && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
	return idleThreads(t)
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
	can := canRaise()
	if n := idleThreads(t); n != 0 {
		t.Fatalf("%d idle threads after the probe", n)
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

func TestOnIdleThread(t *testing.T) {
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	caller := threadPolicy(t)
	var inside uint32
	var marked bool
	onIdleThread(context.Background(), func(ctx context.Context) {
		inside, marked = threadPolicy(t), isLowered(ctx)
	})
	if !canRaise() { // not lowered where it could not be raised again
		if inside == schedIdle || marked {
			t.Errorf("inside: policy %d, marked lowered %v; want neither without the privilege", inside, marked)
		}
	} else if inside != schedIdle || !marked {
		t.Errorf("inside: policy %d, marked lowered %v; want SCHED_IDLE (%d), true", inside, marked, schedIdle)
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
}

func TestLowerInPlace(t *testing.T) {
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
// execute on an idle thread from their start; none is left behind.
func TestBackgroundRunsOnIdleThreads(t *testing.T) {
	ctx := context.Background()
	wasm := watModule(t, "treerec")
	sum := sha256.Sum256(wasm)
	src := &fixedSource{sha: hex.EncodeToString(sum[:]), wasm: wasm}
	x, err := New(ctx, Config{CacheDir: t.TempDir(), PoolSize: -1, Source: src})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close(ctx)
	if n := waitNoIdleThreads(t); n != 0 {
		t.Fatalf("%d idle threads before any run", n)
	}
	for _, tc := range []struct {
		name     string
		wantIdle bool
	}{
		{"the first run, demoted as it runs", canRaise()},
		{"a run of the faulted module", canRaise()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := x.Run(ctx, runtime.Request{Kind: runtime.KindModule, Ref: "m", Timeout: time.Second})
				done <- err
			}()
			seen := 0
			for end := time.Now().Add(700 * time.Millisecond); time.Now().Before(end) && seen == 0; time.Sleep(5 * time.Millisecond) {
				seen = idleThreads(t)
			}
			if err := <-done; !errors.Is(err, runtime.ErrTimeout) {
				t.Fatalf("got %v, want the timeout error", err)
			}
			if (seen > 0) != tc.wantIdle {
				t.Errorf("%d idle threads seen during the run; want some: %v", seen, tc.wantIdle)
			}
			if n := waitNoIdleThreads(t); n != 0 {
				t.Errorf("%d idle threads left after the run", n)
			}
		})
	}
}

// TestBackgroundRunsWithoutPrivilege runs the tests above again in a process that cannot raise
// a thread out of SCHED_IDLE (root without CAP_SYS_NICE, as an unprivileged server is): a run
// demoted as it runs keeps its thread's priority, and the idle threads of background runs are
// discarded, not handed back to the Go runtime lowered.
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
		"-test.run", "^(TestCanRaise|TestOnIdleThread|TestLowerInPlace|TestBackgroundRunsOnIdleThreads)$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "PIXIE_TEST_WITHOUT_SYS_NICE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	for _, want := range []string{"--- PASS: TestCanRaise", "--- SKIP: TestLowerInPlace", "--- PASS: TestOnIdleThread", "--- PASS: TestBackgroundRunsOnIdleThreads"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the process without CAP_SYS_NICE did not report %q:\n%s", want, out)
		}
	}
}

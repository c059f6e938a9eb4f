package wasm

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/sdk/abi"
)

func TestAdmissionQueue(t *testing.T) {
	ctx := context.Background()
	a := newAdmission(Config{MaxConcurrent: 1, MaxQueued: 1, QueueTimeout: 50 * time.Millisecond})
	t1, err := a.acquire(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := a.acquire(ctx, false)
		waited <- err
	}()
	for a.fgWaiting.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	// The queue is full: refused at once.
	if _, err := a.acquire(ctx, false); !errors.Is(err, ErrBusy) || !errs.Is(err, errs.Unavailable) || !strings.Contains(err.Error(), "1 waiting") {
		t.Fatalf("got %v, want ErrBusy for a full queue", err)
	}
	// The waiter gives up after the queue timeout.
	if err := <-waited; !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "no guest run slot freed within 50ms") {
		t.Fatalf("got %v, want ErrBusy after the wait", err)
	}
	t1.release()
	t2, err := a.acquire(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	t2.release()
	// A context that ends first ends the wait with its error.
	t3, _ := a.acquire(ctx, false)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := a.acquire(cctx, false); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
	t3.release()
	if a.running != 0 || a.queued != [2]int{} {
		t.Fatalf("running %d queued %v", a.running, a.queued)
	}
}

// TestAdmissionQueuePerClass fills the background queue: another background run is refused at
// once, a foreground run is not (it waits, and here its wait expires).
func TestAdmissionQueuePerClass(t *testing.T) {
	ctx := context.Background()
	a := newAdmission(Config{MaxConcurrent: 1, MaxQueued: 1, QueueTimeout: 50 * time.Millisecond})
	hold, err := a.acquire(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.release()
	waited := make(chan error, 1)
	go func() {
		_, err := a.acquire(ctx, true)
		waited <- err
	}()
	waitQueued(t, a, 0, 1)
	if _, err := a.acquire(ctx, true); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "1 waiting") {
		t.Fatalf("got %v, want ErrBusy for a full background queue", err)
	}
	if _, err := a.acquire(ctx, false); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "no guest run slot freed within 50ms") {
		t.Fatalf("got %v, want the foreground run to wait (and its wait to expire)", err)
	}
	if err := <-waited; !errors.Is(err, ErrBusy) {
		t.Fatalf("the background waiter: %v", err)
	}
}

func TestAdmissionForegroundFirst(t *testing.T) {
	ctx := context.Background()
	a := newAdmission(Config{MaxConcurrent: 2, MaxQueued: 8, QueueTimeout: time.Minute})
	bg1, err := a.acquire(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	// Background runs never take the last slot.
	bg2 := make(chan *ticket, 1)
	go func() {
		tk, err := a.acquire(ctx, true)
		if err != nil {
			t.Error(err)
		}
		bg2 <- tk
	}()
	waitQueued(t, a, 0, 1)
	fg1, err := a.acquire(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	fg2 := make(chan *ticket, 1)
	go func() {
		tk, err := a.acquire(ctx, false)
		if err != nil {
			t.Error(err)
		}
		fg2 <- tk
	}()
	for a.fgWaiting.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	// At its next check the background run gives its slot to the waiting foreground run, and
	// waits behind the other background run.
	yielded := make(chan error, 1)
	go func() { yielded <- bg1.tick(ctx) }()
	f2 := <-fg2
	select {
	case <-yielded:
		t.Fatal("the background run got its slot back while a foreground run holds both")
	case <-time.After(20 * time.Millisecond):
	}
	fg1.release()
	// One slot free, background runs may have one: the first waiting background run (bg2).
	b2 := <-bg2
	f2.release()
	// One background slot (of two slots): bg1 waits until bg2 lets its go.
	select {
	case <-yielded:
		t.Fatal("two background runs hold slots at once")
	case <-time.After(20 * time.Millisecond):
	}
	b2.release()
	if err := <-yielded; err != nil {
		t.Fatal(err)
	}
	bg1.release()
	if a.running != 0 || a.bgRunning != 0 {
		t.Fatalf("running %d, background %d", a.running, a.bgRunning)
	}
}

// waitQueued waits until fg foreground and bg background runs wait for a slot.
func waitQueued(t *testing.T, a *admission, fg, bg int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		a.mu.Lock()
		f, b := len(a.fg), len(a.bg)
		a.mu.Unlock()
		if f == fg && b == bg {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d foreground and %d background runs wait, want %d and %d", f, b, fg, bg)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestAdmissionDemotes(t *testing.T) {
	ctx := context.Background()
	a := newAdmission(Config{MaxConcurrent: 2, MaxQueued: 8, QueueTimeout: time.Minute})
	tk, _ := a.acquire(ctx, false)
	if err := tk.tick(ctx); err != nil || tk.bg {
		t.Fatalf("demoted at once: %v", err)
	}
	tk.start = time.Now().Add(-time.Second)
	if err := tk.tick(ctx); err != nil || !tk.bg || a.bgRunning != 1 {
		t.Fatalf("not demoted: bg %v, %d background runs, %v", tk.bg, a.bgRunning, err)
	}
	tk.release()
}

// TestAdmissionFirstCheckSparesTheModule: a run that reaches its first check late (its thread
// was descheduled) moves to the background class, but its module's next runs do not; one that
// is late at a later check counts against its module, and its thread is lowered where it can
// be raised again (lower.go).
func TestAdmissionFirstCheckSparesTheModule(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		checks int // checks before the late one
		held   bool
	}{
		{"late at its first check", 0, false},
		{"late at its second check", 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newAdmission(Config{MaxConcurrent: 2, MaxQueued: 8, QueueTimeout: time.Minute})
			tk, err := a.acquire(ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			h := &health{}
			tk.health = h
			tk.ctx = ctx
			tk.start = time.Now()
			goruntime.LockOSThread() // tick lowers the thread it runs on; finish raises it
			defer goruntime.UnlockOSThread()
			for range tc.checks {
				if err := tk.tick(ctx); err != nil {
					t.Fatal(err)
				}
			}
			tk.start = time.Now().Add(-2 * demoteAfter)
			if err := tk.tick(ctx); err != nil || !tk.bg {
				t.Fatalf("the late run was not moved: bg %v, %v", tk.bg, err)
			}
			if got := h.unhealthy(); got != tc.held {
				t.Fatalf("module held against: %v, want %v", got, tc.held)
			}
			if want := tc.held && lowerable && idleThreads.Load() && canRaise(); tk.lowered() != want {
				t.Errorf("thread lowered: %v, want %v", tk.lowered(), want)
			}
			tk.finish()
			if tk.lowered() {
				t.Error("still lowered after finish")
			}
		})
	}
}

func TestHealth(t *testing.T) {
	var h health
	if h.unhealthy() {
		t.Fatal("unhealthy at first")
	}
	h.fault()
	if !h.unhealthy() {
		t.Fatal("healthy after a fault")
	}
	h.mu.Lock()
	h.at = h.at.Add(-2 * faultHalfLife)
	h.mu.Unlock()
	if h.unhealthy() {
		t.Fatal("still unhealthy two half-lives later")
	}
}

// TestMemoryBudget runs a memory bomb under a small budget: it fails with the budget's error,
// the budget is whole again afterwards, and other modules keep running; a run that would need
// a new instance the budget cannot hold fails at once.
func TestMemoryBudget(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e, err := newEnv(ctx, dir, Config{CacheDir: testutil.WasmCacheDir(t), MemoryBudget: 48 << 20, PoolSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	e.push(t, "testdata/echo", "echo")
	e.push(t, "testdata/fault-membomb", "fault-membomb")
	if _, err := e.run(t, runtime.Request{Ref: "echo"}); err != nil {
		t.Fatal(err)
	}
	_, err = e.run(t, runtime.Request{Ref: "fault-membomb"})
	if !errors.Is(err, runtime.ErrTrap) || !strings.Contains(err.Error(), "memory budget is exhausted") {
		t.Fatalf("got %v, want the budget's error", err)
	}
	for i := range 3 {
		if _, err := e.run(t, runtime.Request{Ref: "echo"}); err != nil {
			t.Fatalf("run %d after the bomb: %v", i, err)
		}
	}
	m := e.module(t, "echo")
	for len(m.idle) > 0 { // every ready instance taken, so a run must make one
		(<-m.idle).close()
	}
	e.x.budget.limit.Store(e.x.budget.Used()) // no room for one more instance
	_, err = e.run(t, runtime.Request{Ref: "echo"})
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "memory budget is exhausted") {
		t.Fatalf("got %v, want ErrBusy for the budget", err)
	}

	// A budget smaller than one instance: instantiating refuses (wazero cannot be refused a
	// memory's initial size, so the instance is made, found over the budget and closed), the
	// run fails with the budget's error, and the bytes come back.
	small, err := newEnv(ctx, t.TempDir(), Config{CacheDir: testutil.WasmCacheDir(t), MemoryBudget: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer small.close()
	small.push(t, "testdata/echo", "echo")
	for i := range 3 {
		_, err = small.run(t, runtime.Request{Ref: "echo"})
		if !errors.Is(err, ErrBusy) || !errs.Is(err, errs.Unavailable) || !strings.Contains(err.Error(), "MiB of 1 MiB in use; wasm.memoryBudget)") {
			t.Fatalf("run %d: got %v, want ErrBusy for the budget", i, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for small.x.budget.Used() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes of the budget still charged", small.x.budget.Used())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestStorm runs a storm of fault guests, 40 at a time, on other sessions (spinning, loop-free
// recursion, a memory bomb, output over the cap, a trap, the host-call limit) while a healthy
// gate runs one run after another: every healthy run decides as it should, every fault run
// ends in an error, and the executor serves on. (The latency of the healthy runs is logged
// here, and measured by make bench: internal/wasmit BenchmarkStorm.)
func TestStorm(t *testing.T) {
	ctx := context.Background()
	// A queue timeout longer than the test: a healthy run that waits long (the race detector,
	// a loaded machine) is measured, not refused; the latency is make bench's (the storm row).
	e, err := newEnv(ctx, t.TempDir(), Config{CacheDir: testutil.WasmCacheDir(t), QueueTimeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	e.push(t, "block-risky-commands", "block-risky-commands")
	faults := []struct {
		guest string
		wasm  []byte
		req   runtime.Request
	}{
		{guest: "testdata/fault-loop", req: runtime.Request{Timeout: 500 * time.Millisecond}},
		{guest: "testdata/fault-membomb"},
		{guest: "testdata/fault-output"},
		{guest: "testdata/fault-trap"},
		{guest: "testdata/fault-calls", req: runtime.Request{Helper: &helper{}}},
	}
	for _, f := range faults {
		e.push(t, f.guest, strings.TrimPrefix(f.guest, "testdata/"))
	}
	e.push(t, "testdata/echo", "echo")
	for _, ref := range []string{"block-risky-commands", "fault-loop", "fault-membomb", "fault-output", "fault-trap", "fault-calls"} {
		if err := e.x.Warm(ctx, ref); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	faultErrs := map[string]int{}
	for w := range 40 {
		f := faults[w%len(faults)]
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				req := f.req
				req.Ref = strings.TrimPrefix(f.guest, "testdata/")
				req.Vars = map[string]string{abi.VarSessionID: fmt.Sprintf("storm-%d", w)}
				_, err := e.run(t, req)
				mu.Lock()
				if err != nil {
					faultErrs[req.Ref]++
				} else {
					faultErrs[req.Ref+" (no error)"]++
				}
				mu.Unlock()
			}
		})
	}
	var lat []time.Duration
	good := runtime.Request{Kind: runtime.KindModule, Ref: "block-risky-commands", Target: riskyTarget,
		Vars: map[string]string{abi.VarPoint: abi.PointToolBefore, abi.VarToolName: "Bash", abi.VarSessionID: "good"}}
	for i := range 60 {
		t0 := time.Now()
		res, err := e.x.Run(ctx, good)
		lat = append(lat, time.Since(t0))
		if err != nil || res.ExitCode != abi.ExitConclude {
			t.Errorf("healthy run %d during the storm: %+v %v", i, res, err)
		}
	}
	close(stop)
	wg.Wait()
	slices.Sort(lat)
	t.Logf("healthy runs during the storm: p50 %s, p90 %s, max %s; fault runs: %v", lat[len(lat)/2], lat[len(lat)*9/10], lat[len(lat)-1], faultErrs)
	for ref, n := range faultErrs {
		if strings.HasSuffix(ref, "(no error)") && !strings.HasPrefix(ref, "fault-calls") {
			t.Errorf("%d fault runs ended without an error: %s", n, ref)
		}
	}
	e.alive(t)
}

// TestRunAdmission runs modules through an executor with one run slot and a queue of one: a
// run that finds the slot taken waits at most the queue timeout and then fails with ErrBusy;
// a run that finds the queue full fails at once; a run that waits gets the slot when it is
// freed; a guest that spins gives the slot up to other sessions' runs; a run waiting for the
// model holds no slot; and every bound leaves the executor serving.
func TestRunAdmission(t *testing.T) {
	ctx := context.Background()
	e, err := newEnv(ctx, t.TempDir(), Config{CacheDir: testutil.WasmCacheDir(t), MaxConcurrent: 1, MaxQueued: 1,
		QueueTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	e.push(t, "testdata/echo", "echo")
	e.push(t, "testdata/fault-loop", "fault-loop")
	e.push(t, "testdata/fault-calls", "fault-calls")
	echo := runtime.Request{Ref: "echo", Target: "hi", Vars: map[string]string{abi.VarSessionID: "other"}}
	if _, err := e.run(t, echo); err != nil {
		t.Fatal(err)
	}
	a := e.x.adm
	// settled waits until every slot is free and no run waits.
	settled := func(t *testing.T) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			a.mu.Lock()
			running, bg, queued := a.running, a.bgRunning, a.queued
			a.mu.Unlock()
			if running == 0 && bg == 0 && queued == [2]int{} {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("slots left taken: %d running, %d background, %v queued", running, bg, queued)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// hold takes the one slot, as a run executing holds it (waiting as long as it takes: the
	// pools' background refills take the slot too).
	hold := func(t *testing.T) *ticket {
		t.Helper()
		tk := &ticket{a: a}
		if err := a.get(ctx, tk, false); err != nil {
			t.Fatal(err)
		}
		return tk
	}

	t.Run("the wait for a slot expires", func(t *testing.T) {
		hold := hold(t)
		defer hold.release()
		t0 := time.Now()
		_, err = e.run(t, echo)
		if !errors.Is(err, ErrBusy) || !errs.Is(err, errs.Unavailable) || !strings.Contains(err.Error(), "no guest run slot freed within 200ms") {
			t.Fatalf("got %v, want ErrBusy after the queue timeout", err)
		}
		if waited := time.Since(t0); waited < 200*time.Millisecond {
			t.Fatalf("refused after %s, before the queue timeout", waited)
		}
	})

	t.Run("the queue is full", func(t *testing.T) {
		a.wait = time.Minute
		defer func() { a.wait = 200 * time.Millisecond }()
		hold := hold(t)
		waiting := make(chan error, 1)
		go func() {
			res, err := e.run(t, echo)
			if err == nil && !strings.Contains(res.Stdout, `"hi"`) {
				err = fmt.Errorf("the waiting run answered %q", res.Stdout)
			}
			waiting <- err
		}()
		waitQueued(t, a, 1, 0)
		_, err = e.run(t, echo)
		if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "1 guest runs executing and 1 waiting") {
			hold.release()
			t.Fatalf("got %v, want ErrBusy for a full queue", err)
		}
		hold.release() // the waiting run gets the slot
		if err := <-waiting; err != nil {
			t.Fatalf("the waiting run: %v", err)
		}
	})

	// From here on, no wait expires: what is tested is who gets the slot, not when.
	a.wait = time.Minute

	t.Run("a spinning guest gives its slot up", func(t *testing.T) {
		// The spinner's module is loaded and its pool filled first, and every refill is done:
		// a refill holds the one slot in the background class, and the loop below would take
		// it for the spinner (then the spinner, or the first echo run, finds the queue full).
		if err := e.x.Warm(ctx, "fault-loop"); err != nil {
			t.Fatal(err)
		}
		settled(t)
		spun := make(chan error, 1)
		go func() {
			_, err := e.run(t, runtime.Request{Ref: "fault-loop", Timeout: 3 * time.Second, Vars: map[string]string{abi.VarSessionID: "spinner"}})
			spun <- err
		}()
		deadline := time.Now().Add(10 * time.Second)
		for { // the spinner executes, in the background class (demoted), and no run waits
			a.mu.Lock()
			running, bg, waiting := a.running, a.bgRunning, len(a.fg)
			a.mu.Unlock()
			if running == 1 && bg == 1 && waiting == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the spinner never ran in the background class: %d running, %d background", running, bg)
			}
			time.Sleep(time.Millisecond)
		}
		for i := range 5 {
			if _, err := e.run(t, echo); err != nil {
				t.Fatalf("run %d while a guest spins on the only slot: %v", i, err)
			}
		}
		if err := <-spun; !errors.Is(err, runtime.ErrTimeout) {
			t.Fatalf("the spinner: %v", err)
		}
	})

	t.Run("a run waiting for the model holds no slot", func(t *testing.T) {
		asked, answer := make(chan struct{}), make(chan struct{})
		h := &helper{ask: func(abi.AskRequest) (string, error) {
			close(asked)
			<-answer
			return "ok", nil
		}}
		done := make(chan error, 1)
		go func() {
			res, err := e.run(t, runtime.Request{Ref: "fault-calls", Helper: h, Vars: map[string]string{"CALLS": "1"}})
			if err == nil && res.Stdout != "1 calls answered" {
				err = fmt.Errorf("exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
			}
			done <- err
		}()
		<-asked
		for i := range 3 {
			if _, err := e.run(t, echo); err != nil {
				t.Fatalf("run %d while another waits for the model: %v", i, err)
			}
		}
		close(answer)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
	// Every slot comes back (once the pools' background refills are done).
	settled(t)
}

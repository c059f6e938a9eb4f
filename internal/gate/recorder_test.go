package gate

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/later"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/bash"
)

// TestRecordsWrittenInTheBackground: evaluations answer before their records are committed,
// every read sees the runs before it, and Close writes everything queued (read straight from
// the store afterwards).
func TestRecordsWrittenInTheBackground(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	e.saveGates(t, gateAt("g", "user-message", "Check the instruction."))

	const sessions, runs = 4, 15
	ids := make(chan string, sessions*runs)
	var wg sync.WaitGroup
	for s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range runs {
				r := evalReq("user-message", fmt.Sprintf("run %d", i))
				r.Session.ID, r.Turn = fmt.Sprintf("s%d", s), i
				res, err := e.svc.Evaluate(ctx, r)
				if err != nil || res.RunID == "" {
					t.Errorf("%+v %v", res, err)
					return
				}
				ids <- res.RunID
			}
		}()
	}
	wg.Wait()
	close(ids)
	if err := e.svc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	n := 0
	for id := range ids {
		n++
		err := e.st.View(ctx, func(tx *store.Tx) error {
			_, err := lookupRun(tx, id)
			return err
		})
		if err != nil {
			t.Fatalf("run %s is not in the store after Close: %v", id, err)
		}
	}
	if n != sessions*runs {
		t.Fatalf("%d runs", n)
	}
	// A read sees every run before it.
	r := evalReq("user-message", "one more")
	r.Session.ID = "s1"
	if _, err := e.svc.Evaluate(ctx, r); err != nil {
		t.Fatal(err)
	}
	page, err := e.svc.Records(ctx, "s1", "", 0)
	if err != nil || len(page.Records) != runs+1 || page.Records[0].Turn != 1 {
		t.Fatalf("%d records of s1 (%v)", len(page.Records), err)
	}
	// The session's last preset is written with its records.
	sg, err := e.svc.SessionGates(ctx, "s2", "")
	if err != nil || sg.Preset != "dev" {
		t.Fatalf("%+v %v", sg, err)
	}
}

// TestRecordsAfterTheAnswer: under a later.Queue a record is not written until the deferral ends (the
// writer is not even started), a read of records still sees it (the read starts the writer),
// and an evaluation after the deferral ended starts the writer itself.
func TestRecordsAfterTheAnswer(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	e.saveGates(t, gateAt("g", "user-message", "Check the instruction."))
	inStore := func(id string) bool {
		err := e.st.View(ctx, func(tx *store.Tx) error {
			_, err := lookupRun(tx, id)
			return err
		})
		return err == nil
	}
	running := func() bool {
		e.svc.rec.mu.Lock()
		defer e.svc.rec.mu.Unlock()
		return e.svc.rec.running
	}

	q := &later.Queue{}
	start := q.Release
	req := evalReq("user-message", "held")
	req.After = q
	res, err := e.svc.Evaluate(ctx, req)
	if err != nil || res.RunID == "" {
		t.Fatalf("%+v %v", res, err)
	}
	if running() {
		t.Fatal("the writer started before the deferral ended")
	}
	time.Sleep(3 * recordDelay)
	if inStore(res.RunID) {
		t.Fatal("the record was written before the deferral ended")
	}
	start()
	e.svc.rec.flush()
	if !inStore(res.RunID) {
		t.Fatal("the record is not written after the deferral ended")
	}
	start() // a second call is a no-op

	// Never ended: a read of records still sees the run.
	q2 := &later.Queue{}
	defer q2.Release()
	req2 := evalReq("user-message", "read")
	req2.After = q2
	res2, err := e.svc.Evaluate(ctx, req2)
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := e.svc.Record(ctx, res2.RunID); err != nil || rec.ID != res2.RunID {
		t.Fatalf("read during a deferral: %+v %v", rec, err)
	}

	// After the deferral ended, an evaluation under its queue starts the writer itself.
	req3 := evalReq("user-message", "late")
	req3.After = q
	res3, err := e.svc.Evaluate(ctx, req3)
	if err != nil {
		t.Fatal(err)
	}
	if !running() && !inStore(res3.RunID) {
		t.Fatal("an evaluation after the deferral ended did not start the writer")
	}
}

// afterSeen runs rules on the real executor it wraps and keeps the After of each request.
type afterSeen struct {
	runtime.Executor
	mu   sync.Mutex
	seen []runtime.Later
}

func (a *afterSeen) Run(ctx context.Context, req runtime.Request) (runtime.Result, error) {
	a.mu.Lock()
	a.seen = append(a.seen, req.After)
	a.mu.Unlock()
	return a.Executor.Run(ctx, req)
}

// TestRuleRunAfterTheAnswer: the evaluation's After reaches the rule's executor as
// runtime.Request.After (the WASM executor returns its instance to the pool through it:
// runtime/wasm's TestRecycleAfterTheAnswer); without one the executor gets none.
func TestRuleRunAfterTheAnswer(t *testing.T) {
	x := &afterSeen{Executor: bashExecutor(t, bash.Config{})}
	e := newEnv(t, envOptions{exec: x})
	ctx := context.Background()
	e.writeScript(t, "continue.sh", "#!/bin/bash\nexit 0\n")
	e.saveGates(t, scriptGate("g", "tool-before", "Check the call.", "continue.sh"))
	e.llm.SetReply(answer(`{"note":"seen"}`))
	cwd := t.TempDir()

	q := &later.Queue{}
	defer q.Release()
	held := inSession(evalReq("tool-before", "held"), cwd)
	held.After = q
	if _, err := e.svc.Evaluate(ctx, held); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Evaluate(ctx, inSession(evalReq("tool-before", "not held"), cwd)); err != nil {
		t.Fatal(err)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.seen) != 2 || x.seen[0] != runtime.Later(q) || x.seen[1] != nil {
		t.Fatalf("the executor saw After %v, want [%p <nil>]", x.seen, q)
	}
}

// TestNewNeedsAStore: a Config without a Store is refused, not a Service that fails later.
func TestNewNeedsAStore(t *testing.T) {
	if s, err := New(context.Background(), Config{}); err == nil || s != nil {
		t.Fatalf("New without a store: %v, %v", s, err)
	}
}

// TestCloseTwice: Close writes what is queued and may be called again.
func TestCloseTwice(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	e.saveGates(t, gateAt("g", "user-message", "Check the instruction."))
	res, err := e.svc.Evaluate(ctx, evalReq("user-message", "x"))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := e.svc.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	err = e.st.View(ctx, func(tx *store.Tx) error {
		_, err := lookupRun(tx, res.RunID)
		return err
	})
	if err != nil {
		t.Fatalf("the record is not in the store after Close: %v", err)
	}
}

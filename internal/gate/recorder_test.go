package gate

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/later"
	"github.com/pixie-dev/pixie/internal/store"
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
	if err := e.svc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	n := 0
	for id := range ids {
		n++
		err := e.st.View(ctx, func(tx *store.Tx) error {
			key, err := runIDCol.Get(tx, id)
			if err != nil {
				return err
			}
			_, err = runsCol.Get(tx, key)
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
			_, err := runIDCol.Get(tx, id)
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

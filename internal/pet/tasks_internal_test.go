package pet

import (
	"context"
	"github.com/pixie-dev/pixie/runtime"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
)

// TestScopeIndexUnderConcurrentTransactions runs the creating transaction itself from many
// goroutines and two Services over one store (so no in-process lock serialises them): the
// scope index must still yield exactly one Task per scope.
func TestScopeIndexUnderConcurrentTransactions(t *testing.T) {
	st, err := badgerstore.Open(context.Background(), badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var svcs []*Service
	for range 2 {
		s, err := New(context.Background(), Config{Store: st, Workspace: filepath.Join(t.TempDir(), "ws")})
		if err != nil {
			t.Fatal(err)
		}
		svcs = append(svcs, s)
	}
	ctx := context.Background()
	snap := Snapshot{Scope: ScopeSession, SessionID: "s1", CapturedAt: time.Now().UTC()}
	const n = 24
	var wg sync.WaitGroup
	tasks := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			task, _, _, err := svcs[i%2].createInvocation(ctx, snap, "a", KindInstructions, "/x", "", runtime.PolicyReadOnly)
			tasks[i], errs[i] = task.ID, err
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if tasks[i] != tasks[0] {
			t.Fatalf("two tasks for one scope: %s, %s", tasks[0], tasks[i])
		}
	}
	var count, invs int
	err = st.View(ctx, func(tx *store.Tx) error {
		if err := tasksC.Each(tx, "", store.ScanOptions{}, func(string, Task) error { count++; return nil }); err != nil {
			return err
		}
		return taskInvC.Each(tx, tasks[0]+"/", store.ScanOptions{}, func(string, string) error { invs++; return nil })
	})
	if err != nil || count != 1 || invs != n {
		t.Fatalf("%d tasks, %d invocations: %v", count, invs, err)
	}
}

// TestInterruptedRunIsTransient: a Run left running by another server process (a restart)
// shows as failed and transient, so it may be retried; this process's own running Run may not.
func TestInterruptedRunIsTransient(t *testing.T) {
	st, err := badgerstore.Open(context.Background(), badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	before, _ := New(context.Background(), Config{Store: st, Workspace: filepath.Join(t.TempDir(), "ws")})
	after, _ := New(context.Background(), Config{Store: st, Workspace: filepath.Join(t.TempDir(), "ws")})
	snap := Snapshot{Scope: ScopeIndependent, CapturedAt: time.Now().UTC()}
	_, inv, _, err := before.createInvocation(ctx, snap, "a", KindInstructions, "/x", "", runtime.PolicyReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	mine, _ := before.Invocation(ctx, inv.ID)
	if mine.Status != StatusRunning {
		t.Fatalf("own run shows as %s", mine.Status)
	}
	if _, err := before.Retry(ctx, inv.ID); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("retry of a running run: %v", err)
	}
	theirs, _ := after.Invocation(ctx, inv.ID)
	r := theirs.Latest()
	if theirs.Status != StatusFailed || !r.Transient || r.Error == nil || !strings.Contains(r.Error.Message, "interrupted") {
		t.Fatalf("interrupted run shows as %+v", r)
	}
	// The retry passes the retryable check and stops only at the (unregistered) Skill.
	if _, err := after.Retry(ctx, inv.ID); err == nil || !strings.Contains(err.Error(), "no Skill named") {
		t.Fatalf("retry of an interrupted run: %v", err)
	}
}

// TestAShortValueStoredBeforeTheRuleFailsClosed: a value under MinRedactLen bytes that is in
// the store already (written before SetEnv refused it) stops the invocation with the reason.
func TestAShortValueStoredBeforeTheRuleFailsClosed(t *testing.T) {
	ctx := context.Background()
	st, err := badgerstore.Open(ctx, badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc, err := New(context.Background(), Config{Store: st, Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(ctx, func(tx *store.Tx) error {
		return envC.Put(tx, envPrefix("")+"PIN", envValue{Value: "42"})
	}); err != nil {
		t.Fatal(err)
	}
	_, err = svc.resolveEnv(ctx, "")
	if errs.CodeOf(err) != errs.Unprocessable || !strings.Contains(err.Error(), "PIN") || !strings.Contains(err.Error(), "cannot be redacted") {
		t.Fatalf("resolveEnv = %v", err)
	}
}

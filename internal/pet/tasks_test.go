package pet_test

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/pet"
)

func TestOneTaskPerScopeUnderConcurrentInvokes(t *testing.T) {
	_, m := newModelServer(t)
	e := newEnv(t, nil, m, pet.Config{})
	ctx := context.Background()
	register(t, e.svc, skillDir(t, "a", "d", "body", nil))
	register(t, e.svc, skillDir(t, "b", "d", "body", nil))
	const n = 12
	var wg sync.WaitGroup
	views := make([]pet.InvocationView, n)
	fails := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			skill := "a"
			if i%2 == 1 {
				skill = "b"
			}
			views[i], fails[i] = e.svc.Invoke(ctx, pet.InvokeRequest{Skill: skill, Snapshot: snapshot("session:s1")})
		}()
	}
	wg.Wait()
	seqs := map[int]bool{}
	for i := range n {
		if fails[i] != nil {
			t.Fatal(fails[i])
		}
		if views[i].TaskID != views[0].TaskID {
			t.Fatalf("two tasks for one scope: %s and %s", views[i].TaskID, views[0].TaskID)
		}
		seqs[views[i].Seq] = true
	}
	if len(seqs) != n {
		t.Fatalf("sequence numbers %v", seqs)
	}
	tasks, err := e.svc.Tasks(ctx, pet.TaskFilter{})
	if err != nil || len(tasks) != 1 || tasks[0].Invocations != n || tasks[0].Scope != "session:s1" || tasks[0].Epoch != 1 {
		t.Fatalf("tasks %+v %v", tasks, err)
	}
	tv, err := e.svc.Task(ctx, tasks[0].ID)
	if err != nil || len(tv.InvocationList) != n {
		t.Fatalf("task view %v", err)
	}
	for i, iv := range tv.InvocationList {
		if iv.Seq != i+1 {
			t.Fatalf("invocations out of order: %d at %d", iv.Seq, i)
		}
	}
	// Other scopes get their own Tasks.
	for _, sc := range []string{"session:s2", "workspace:w1", "independent"} {
		v, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "a", Snapshot: snapshot(sc)})
		if err != nil || v.TaskID == views[0].TaskID || v.Scope != sc || v.Seq != 1 {
			t.Fatalf("%s: %+v %v", sc, v, err)
		}
	}
	if tasks, _ := e.svc.Tasks(ctx, pet.TaskFilter{}); len(tasks) != 4 || tasks[0].Scope != "independent" {
		t.Fatalf("tasks, newest first: %+v", tasks)
	}
	if tasks, _ := e.svc.Tasks(ctx, pet.TaskFilter{Scope: "workspace:w1"}); len(tasks) != 1 {
		t.Fatalf("filtered %+v", tasks)
	}
	if tasks, _ := e.svc.Tasks(ctx, pet.TaskFilter{Limit: 2}); len(tasks) != 2 {
		t.Fatalf("limited %+v", tasks)
	}
}

func TestArchiveStartsANewEpoch(t *testing.T) {
	ms, m := newModelServer(t)
	e := newEnv(t, nil, m, pet.Config{})
	ctx := context.Background()
	register(t, e.svc, skillDir(t, "a", "d", "body", nil))
	v1, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "a", Snapshot: snapshot("session:s1")})
	if err != nil {
		t.Fatal(err)
	}
	ms.fail(1)
	failed, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "a", Snapshot: snapshot("session:s1")})
	if err != nil || failed.TaskID != v1.TaskID || failed.Status != pet.StatusFailed {
		t.Fatalf("second %+v %v", failed, err)
	}
	task, err := e.svc.Archive(ctx, v1.TaskID)
	if err != nil || !task.Archived || task.ArchivedAt == nil {
		t.Fatalf("archive %+v %v", task, err)
	}
	if _, err := e.svc.Archive(ctx, v1.TaskID); errs.CodeOf(err) != errs.Conflict {
		t.Fatalf("second archive: %v", err)
	}
	if _, err := e.svc.Archive(ctx, "t0000000000000000000000"); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("archive of nothing: %v", err)
	}
	// Archiving closes the Task for good: a retry in it is refused.
	if _, err := e.svc.Retry(ctx, failed.ID); errs.CodeOf(err) != errs.Conflict || !strings.Contains(err.Error(), "archived") {
		t.Fatalf("retry in an archived task: %v", err)
	}
	v2, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "a", Snapshot: snapshot("session:s1")})
	if err != nil {
		t.Fatal(err)
	}
	if v2.TaskID == v1.TaskID || v2.Epoch != 2 || v2.Seq != 1 {
		t.Fatalf("new epoch %+v", v2)
	}
	// The new epoch has a fresh executor session: no history of the old one.
	_, reqs := ms.received()
	if n := len(reqs[len(reqs)-1].Messages); n != 2 {
		t.Fatalf("the new epoch's first run saw %d messages", n)
	}
	t1, _ := e.svc.Task(ctx, v1.TaskID)
	t2, _ := e.svc.Task(ctx, v2.TaskID)
	if t1.ExecutorSession == t2.ExecutorSession || t1.Epoch != 1 || len(t1.InvocationList) != 2 {
		t.Fatalf("tasks %+v %+v", t1.Task, t2.Task)
	}
	open, _ := e.svc.Tasks(ctx, pet.TaskFilter{})
	all, _ := e.svc.Tasks(ctx, pet.TaskFilter{Archived: true})
	if len(open) != 1 || open[0].ID != v2.TaskID || len(all) != 2 {
		t.Fatalf("open %+v all %+v", open, all)
	}
	// Archive the second epoch too; the third one follows.
	if _, err := e.svc.Archive(ctx, v2.TaskID); err != nil {
		t.Fatal(err)
	}
	v3, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "a", Snapshot: snapshot("session:s1")})
	if err != nil || v3.Epoch != 3 {
		t.Fatalf("third epoch %+v %v", v3, err)
	}
}

func TestSnapshotValidation(t *testing.T) {
	_, m := newModelServer(t)
	e := newEnv(t, nil, m, pet.Config{})
	ctx := context.Background()
	register(t, e.svc, skillDir(t, "a", "d", "body", nil))
	now := time.Now()
	tests := []struct {
		name  string
		snap  pet.Snapshot
		code  errs.Code
		scope string // on success
	}{
		{"session form", pet.Snapshot{Scope: "session:abc", CapturedAt: now}, "", "session:abc"},
		{"session fields", pet.Snapshot{Scope: "session", SessionID: "abc", WorkspaceID: "w", CapturedAt: now}, "", "session:abc"},
		{"workspace form", pet.Snapshot{Scope: "workspace:w", CapturedAt: now}, "", "workspace:w"},
		{"independent", pet.Snapshot{Scope: "independent", CapturedAt: now}, "", "independent"},
		{"no scope", pet.Snapshot{CapturedAt: now}, errs.Invalid, ""},
		{"unknown scope", pet.Snapshot{Scope: "team", CapturedAt: now}, errs.Invalid, ""},
		{"session without id", pet.Snapshot{Scope: "session", CapturedAt: now}, errs.Invalid, ""},
		{"disagreeing id", pet.Snapshot{Scope: "session:a", SessionID: "b", CapturedAt: now}, errs.Invalid, ""},
		{"workspace with a session", pet.Snapshot{Scope: "workspace:w", SessionID: "s", CapturedAt: now}, errs.Invalid, ""},
		{"independent with ids", pet.Snapshot{Scope: "independent", WorkspaceID: "w", CapturedAt: now}, errs.Invalid, ""},
		{"id with a slash", pet.Snapshot{Scope: "session:a/b", CapturedAt: now}, errs.Invalid, ""},
		{"id too long", pet.Snapshot{Scope: "session:" + strings.Repeat("x", pet.MaxIDLen+1), CapturedAt: now}, errs.Invalid, ""},
		{"id at its limit", pet.Snapshot{Scope: "session:" + strings.Repeat("x", pet.MaxIDLen), CapturedAt: now}, "", "session:" + strings.Repeat("x", pet.MaxIDLen)},
		{"relative cwd", pet.Snapshot{Scope: "independent", Cwd: "src", CapturedAt: now}, errs.Invalid, ""},
		{"no capture time", pet.Snapshot{Scope: "independent"}, errs.Invalid, ""},
		{"future capture time", pet.Snapshot{Scope: "independent", CapturedAt: now.Add(2 * time.Hour)}, errs.Invalid, ""},
		{"selection at its limit", pet.Snapshot{Scope: "independent", Selection: strings.Repeat("x", pet.MaxSelectionLen), CapturedAt: now}, "", "independent"},
		{"selection over its limit", pet.Snapshot{Scope: "independent", Selection: strings.Repeat("x", pet.MaxSelectionLen+1), CapturedAt: now}, errs.TooLarge, ""},
		{"transcript over its limit", pet.Snapshot{Scope: "independent", Transcript: strings.Repeat("x", pet.MaxTranscript+1), CapturedAt: now}, errs.TooLarge, ""},
		{"title over its limit", pet.Snapshot{Scope: "independent", Title: strings.Repeat("x", pet.MaxTitleLen+1), CapturedAt: now}, errs.TooLarge, ""},
		{"invalid UTF-8", pet.Snapshot{Scope: "independent", Selection: "\xff", CapturedAt: now}, errs.Invalid, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "a", Snapshot: tc.snap})
			if tc.code != "" {
				if errs.CodeOf(err) != tc.code {
					t.Fatalf("code %s, want %s: %v", errs.CodeOf(err), tc.code, err)
				}
				return
			}
			if err != nil || v.Scope != tc.scope || v.Snapshot.CapturedAt.Location() != time.UTC {
				t.Fatalf("%+v %v", v, err)
			}
		})
	}
	if _, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "Not_A_Name", Snapshot: snapshot("independent")}); errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("bad skill name: %v", err)
	}
	if _, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "unknown", Snapshot: snapshot("independent")}); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("unknown skill: %v", err)
	}
	if _, err := e.svc.Tasks(ctx, pet.TaskFilter{Scope: "session:"}); errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("bad scope filter: %v", err)
	}
	scopes := []string{}
	tasks, _ := e.svc.Tasks(ctx, pet.TaskFilter{})
	for _, tk := range tasks {
		scopes = append(scopes, tk.Scope)
	}
	sort.Strings(scopes)
	if len(scopes) != 4 {
		t.Fatalf("scopes %v", scopes)
	}
}

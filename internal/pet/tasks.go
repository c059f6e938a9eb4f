package pet

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/runtime"
)

var (
	taskIDRe = regexp.MustCompile(`^t[0-9a-f]{22}$`)
	invIDRe  = regexp.MustCompile(`^i[0-9a-f]{22}$`)
)

// Limits of task listings.
const (
	DefaultTaskLimit = 100
	MaxTaskLimit     = 1000
)

func runID(invID string, n int) string { return invID + "/" + fmt.Sprintf(seqFormat, n) }

// createInvocation is the one transaction that starts an Invocation: it finds the scope's open
// Task or creates the next epoch's, appends the Invocation, inserts its Snapshot and creates
// Run #1. The scope index key makes the Task unique per scope under concurrent callers: every
// caller reads and writes pet-task-scope/<scope>, so the store serialises them (retrying
// conflicts).
func (s *Service) createInvocation(ctx context.Context, snap Snapshot, skill string, kind SkillKind, path, fingerprint string, policy runtime.Policy) (Task, Invocation, Run, error) {
	var task Task
	var inv Invocation
	var run Run
	key := snap.Key()
	err := s.st.Update(ctx, func(tx *store.Tx) error {
		now := s.now()
		idx, err := scopeC.Get(tx, key)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err == nil && idx.Open {
			if task, err = tasksC.Get(tx, idx.TaskID); err != nil {
				return fmt.Errorf("pet: scope %s points at task %s: %w", key, idx.TaskID, err)
			}
		} else {
			id := s.newID("t")
			task = Task{ID: id, Scope: key, Epoch: idx.Epoch + 1, ExecutorSession: "pet-exec-" + id, CreatedAt: now}
			if err := scopeC.Put(tx, key, scopeIndex{TaskID: id, Epoch: task.Epoch, Open: true}); err != nil {
				return err
			}
		}
		task.Invocations++
		task.UpdatedAt = now
		if err := tasksC.Put(tx, task.ID, task); err != nil {
			return err
		}
		inv = Invocation{ID: s.newID("i"), TaskID: task.ID, Seq: task.Invocations, Skill: skill,
			Status: StatusRunning, Attempts: 1, CreatedAt: now, UpdatedAt: now}
		if err := invC.Insert(tx, inv.ID, inv); err != nil {
			return err
		}
		if err := taskInvC.Put(tx, task.ID+"/"+fmt.Sprintf(seqFormat, inv.Seq), inv.ID); err != nil {
			return err
		}
		if err := snapC.Insert(tx, inv.ID, snap); err != nil {
			return err
		}
		run = Run{InvocationID: inv.ID, N: 1, Executor: kind, SkillPath: path, Fingerprint: fingerprint, Sandbox: policy, Status: StatusRunning, Boot: s.boot, StartedAt: now}
		return runsC.Insert(tx, runID(inv.ID, 1), run)
	})
	return task, inv, run, err
}

// TaskFilter selects Tasks.
type TaskFilter struct {
	// Scope, when set, keeps the Tasks of one scope key ("session:<id>", …).
	Scope string
	// Archived keeps archived Tasks too; by default only open ones are listed.
	Archived bool
	// Limit caps the list; zero means 100, at most 1000.
	Limit int
}

// Tasks lists Tasks, newest first.
func (s *Service) Tasks(ctx context.Context, f TaskFilter) ([]Task, error) {
	if f.Limit < 0 || f.Limit > MaxTaskLimit {
		return nil, errs.New(errs.Invalid, "limit must be between 1 and %d", MaxTaskLimit)
	}
	if f.Limit == 0 {
		f.Limit = DefaultTaskLimit
	}
	if f.Scope != "" {
		if _, err := (Snapshot{Scope: f.Scope}).scopeOnly(); err != nil {
			return nil, err
		}
	}
	out := []Task{}
	err := s.st.View(ctx, func(tx *store.Tx) error {
		out = out[:0]
		return tasksC.Each(tx, "", store.ScanOptions{Reverse: true}, func(_ string, t Task) error {
			if (f.Scope != "" && t.Scope != f.Scope) || (t.Archived && !f.Archived) {
				return nil
			}
			out = append(out, t)
			if len(out) >= f.Limit {
				return store.ErrStop
			}
			return nil
		})
	})
	return out, err
}

// scopeOnly validates a scope key given alone ("session:<id>", "workspace:<id>" or
// "independent").
func (sn Snapshot) scopeOnly() (string, error) {
	kind, id, _ := strings.Cut(sn.Scope, ":")
	switch kind {
	case ScopeSession, ScopeWorkspace:
		if err := validID(kind+" id", id); err != nil {
			return "", err
		}
	case ScopeIndependent:
		if id != "" || strings.Contains(sn.Scope, ":") {
			return "", errs.New(errs.Invalid, "the independent scope has no id")
		}
	default:
		return "", errs.New(errs.Invalid, "scope %q: use session:<id>, workspace:<id> or independent", sn.Scope)
	}
	return sn.Scope, nil
}

// TaskView is a Task with its Invocations (each with its Snapshot and Runs), oldest first.
type TaskView struct {
	Task
	InvocationList []InvocationView `json:"invocationList"`
}

// InvocationView is an Invocation with its Snapshot and Runs (oldest first).
type InvocationView struct {
	Invocation
	Scope    string   `json:"scope"`
	Epoch    int      `json:"epoch"`
	Snapshot Snapshot `json:"snapshot"`
	Runs     []Run    `json:"runs"`
}

// Latest returns the latest Run.
func (v InvocationView) Latest() Run {
	if len(v.Runs) == 0 {
		return Run{}
	}
	return v.Runs[len(v.Runs)-1]
}

// Task returns one Task with its Invocations.
func (s *Service) Task(ctx context.Context, id string) (TaskView, error) {
	if !taskIDRe.MatchString(id) {
		return TaskView{}, errs.New(errs.NotFound, "no task %q", id)
	}
	var v TaskView
	err := s.st.View(ctx, func(tx *store.Tx) error {
		t, err := tasksC.Get(tx, id)
		if errors.Is(err, store.ErrNotFound) {
			return errs.New(errs.NotFound, "no task %q", id)
		}
		if err != nil {
			return err
		}
		v = TaskView{Task: t, InvocationList: []InvocationView{}}
		return taskInvC.Each(tx, id+"/", store.ScanOptions{}, func(_ string, invID string) error {
			iv, err := s.invocationTx(tx, t, invID)
			if err != nil {
				return err
			}
			v.InvocationList = append(v.InvocationList, iv)
			return nil
		})
	})
	return v, err
}

// Invocation returns one Invocation with its Snapshot and Runs.
func (s *Service) Invocation(ctx context.Context, id string) (InvocationView, error) {
	if !invIDRe.MatchString(id) {
		return InvocationView{}, errs.New(errs.NotFound, "no invocation %q", id)
	}
	var v InvocationView
	err := s.st.View(ctx, func(tx *store.Tx) error {
		inv, err := invC.Get(tx, id)
		if errors.Is(err, store.ErrNotFound) {
			return errs.New(errs.NotFound, "no invocation %q", id)
		}
		if err != nil {
			return err
		}
		t, err := tasksC.Get(tx, inv.TaskID)
		if err != nil {
			return err
		}
		v, err = s.invocationTx(tx, t, id)
		return err
	})
	return v, err
}

func (s *Service) invocationTx(tx *store.Tx, t Task, id string) (InvocationView, error) {
	inv, err := invC.Get(tx, id)
	if err != nil {
		return InvocationView{}, fmt.Errorf("pet: invocation %s: %w", id, err)
	}
	snap, err := snapC.Get(tx, id)
	if err != nil {
		return InvocationView{}, fmt.Errorf("pet: snapshot of %s: %w", id, err)
	}
	v := InvocationView{Invocation: inv, Scope: t.Scope, Epoch: t.Epoch, Snapshot: snap, Runs: []Run{}}
	err = runsC.Each(tx, id+"/", store.ScanOptions{}, func(_ string, r Run) error {
		v.Runs = append(v.Runs, s.settled(r))
		return nil
	})
	if n := len(v.Runs); n > 0 {
		v.Status = v.Runs[n-1].Status
	}
	return v, err
}

// settled shows a Run left running by an earlier server process as what it is: failed,
// interrupted, and worth retrying.
func (s *Service) settled(r Run) Run {
	if r.Status == StatusRunning && r.Boot != s.boot && !s.alive(r.Boot) {
		r.Status = StatusFailed
		r.Transient = true
		r.Error = &RunError{Code: errs.Unavailable, Message: "interrupted: the server stopped during the run"}
	}
	return r
}

// alive reports whether another live replica runs under boot (shared stores).
func (s *Service) alive(boot string) bool {
	if s.cfg.Alive == nil || !s.st.Shared() || boot == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ok, err := s.cfg.Alive(ctx, boot)
	return err == nil && ok
}

// Archive closes a Task for good. The next invocation from its scope starts a new epoch.
func (s *Service) Archive(ctx context.Context, id string) (Task, error) {
	if !taskIDRe.MatchString(id) {
		return Task{}, errs.New(errs.NotFound, "no task %q", id)
	}
	var t Task
	err := s.st.Update(ctx, func(tx *store.Tx) error {
		var err error
		t, err = tasksC.Get(tx, id)
		if errors.Is(err, store.ErrNotFound) {
			return errs.New(errs.NotFound, "no task %q", id)
		}
		if err != nil {
			return err
		}
		if t.Archived {
			return errs.New(errs.Conflict, "task %s is already archived", id)
		}
		now := s.now()
		t.Archived, t.ArchivedAt, t.UpdatedAt = true, &now, now
		if err := tasksC.Put(tx, id, t); err != nil {
			return err
		}
		idx, err := scopeC.Get(tx, t.Scope)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err == nil && idx.TaskID == id {
			idx.Open = false
			return scopeC.Put(tx, t.Scope, idx)
		}
		return nil
	})
	return t, err
}

package pet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pixie-dev/pixie/internal/clip"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/helper"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/scratch"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// Caps of what a Run records and what later Runs see.
const (
	maxStderrKept     = 8 << 10
	maxHistoryOutput  = 8 << 10
	maxHistoryTotal   = 64 << 10
	maxLogLines       = abi.MaxLogLines
	maxOutputRecorded = abi.MaxOutputSize
)

// InvokeRequest asks for one Invocation of a Skill against a Snapshot.
type InvokeRequest struct {
	Skill    string   `json:"skill"`
	Snapshot Snapshot `json:"snapshot"`
}

// PetContext is what a Skill receives about its Invocation: pet_context's answer for WASM
// guests, stdin for scripts (instruction Skills get the same facts as chat turns). Environment
// values are never in it.
type PetContext struct {
	TaskID          string         `json:"taskId"`
	Epoch           int            `json:"epoch"`
	ExecutorSession string         `json:"executorSession"`
	InvocationID    string         `json:"invocationId"`
	Seq             int            `json:"seq"`
	Run             int            `json:"run"`
	Skill           string         `json:"skill"`
	Scope           string         `json:"scope"`
	Snapshot        Snapshot       `json:"snapshot"`
	History         []HistoryEntry `json:"history"`
}

// HistoryEntry is an earlier Invocation of the same Task and its result.
type HistoryEntry struct {
	InvocationID string    `json:"invocationId"`
	Seq          int       `json:"seq"`
	Skill        string    `json:"skill"`
	Title        string    `json:"title,omitempty"`
	CapturedAt   time.Time `json:"capturedAt"`
	Status       Status    `json:"status"`
	Output       string    `json:"output,omitempty"`
	Error        string    `json:"error,omitempty"`
}

// Invoke runs a Skill against a Snapshot: it finds or creates the scope's Task, appends an
// Invocation with the Snapshot, and executes Run #1 synchronously (bounded by RunTimeout). A
// refused Skill (unregistered, disabled, unresolvable, drifted, executor unavailable) records
// nothing. A Run that fails is recorded and returned as a failed Invocation, not an error.
func (s *Service) Invoke(ctx context.Context, req InvokeRequest) (InvocationView, error) {
	if !ValidSkillName(req.Skill) {
		return InvocationView{}, errs.New(errs.Invalid, "%q is not a Skill name", req.Skill)
	}
	snap, err := req.Snapshot.normalize(s.now())
	if err != nil {
		return InvocationView{}, err
	}
	if _, err := s.getSkill(ctx, req.Skill); err != nil {
		return InvocationView{}, err
	}
	unlock, err := s.lockScope(ctx, snap.Key())
	if err != nil {
		return InvocationView{}, err
	}
	defer unlock()
	sk, err := s.getSkill(ctx, req.Skill)
	if err != nil {
		return InvocationView{}, err
	}
	st := s.skillState(ctx, sk)
	if st.err != nil {
		return InvocationView{}, st.err
	}
	sc, release, err := s.stage(ctx, sk)
	if err != nil {
		return InvocationView{}, err
	}
	defer release()
	// What the staged copy asks for, never more than the registration granted.
	if err := sandboxGranted(sk, sc.sandbox); err != nil {
		return InvocationView{}, err
	}
	task, inv, run, err := s.createInvocation(ctx, snap, sk.Name, sc.kind, sk.Path, sc.fingerprint, sc.sandbox)
	if err != nil {
		return InvocationView{}, err
	}
	return s.execute(ctx, task, inv, snap, run, sc)
}

// petScratchPrefix names the private directory of one Run (its copy of the Skill, and the cwd
// of a Run without one) in the system's temporary directory.
const petScratchPrefix = "pixie-pet-"

// stage copies the registered Skill sk into a private directory of its own, validating and
// hashing exactly the bytes it copies (scanOptions.stage): the Run executes that copy, so no
// swap of the user's directory between the check and the exec takes effect. The directory must
// still be the one registered (same device and inode), else the Skill drifts. release removes
// the copy.
func (s *Service) stage(ctx context.Context, sk Skill) (*scan, func(), error) {
	d, err := scratch.Open("", petScratchPrefix, nil)
	if err != nil {
		return nil, nil, errs.Wrap(errs.Unavailable, err, "cannot make a run directory: %s", errText(err))
	}
	dest := filepath.Join(d.Path(), "skill")
	if err := os.Mkdir(dest, 0o700); err != nil {
		d.Close()
		return nil, nil, errs.Wrap(errs.Unavailable, err, "cannot make a run directory: %s", errText(err))
	}
	sc, err := s.scanDir(sk.Path, scanOptions{stage: dest})
	switch {
	case err != nil:
		err = errs.Wrap(errs.CodeOf(err), err, "Skill %s does not resolve: %s", sk.Name, msgOf(err)).WithDetails(detailsOf(err))
	case sc.name != sk.Name:
		err = errs.New(errs.Unprocessable, "Skill %s does not resolve: its SKILL.md now names %q; register that Skill instead", sk.Name, sc.name)
	case sk.Identity != "" && sc.identity != sk.Identity:
		mark := s.markDrift(ctx, sk.Name, "moved: another directory now stands at the path (it was moved away and something put in its place)")
		err = errs.New(errs.Conflict, "Skill %s fails closed: drift (%s); rebuild the projection", sk.Name, mark.Problem)
	}
	if err != nil {
		d.Close()
		return nil, nil, err
	}
	sc.scratch = d.Path()
	sc.executor = executorOf(sk)
	return sc, func() { _ = d.Close() }, nil
}

// Retry adds a Run to an Invocation whose latest Run failed transiently (a timeout, an
// unavailable or failing model or executor, a server restart). It never re-targets: the Run
// uses the Invocation's Skill, Snapshot and Task.
func (s *Service) Retry(ctx context.Context, invID string) (InvocationView, error) {
	cur, err := s.Invocation(ctx, invID)
	if err != nil {
		return InvocationView{}, err
	}
	unlock, err := s.lockScope(ctx, cur.Scope)
	if err != nil {
		return InvocationView{}, err
	}
	defer unlock()
	if cur, err = s.Invocation(ctx, invID); err != nil {
		return InvocationView{}, err
	}
	var archived bool
	err = s.st.View(ctx, func(tx *store.Tx) error {
		t, err := tasksC.Get(tx, cur.TaskID)
		archived = t.Archived
		return err
	})
	if err != nil {
		return InvocationView{}, err
	}
	if err := retryable(cur, archived); err != nil {
		return InvocationView{}, err
	}
	sk, err := s.getSkill(ctx, cur.Skill)
	if err != nil {
		return InvocationView{}, errs.New(errs.Conflict, "cannot retry: %s", msgOf(err))
	}
	if len(cur.Runs) == 0 {
		return InvocationView{}, errs.New(errs.Conflict, "cannot retry: invocation %s has no first Run", invID)
	}
	first := cur.Runs[0]
	if sk.Path != first.SkillPath {
		return InvocationView{}, errs.New(errs.Conflict, "cannot retry: the Skill %s is now registered at %s, not at %s where Run 1 ran; a retry never runs another directory (invoke the Skill again)", sk.Name, sk.Path, first.SkillPath)
	}
	st := s.skillState(ctx, sk)
	if st.err != nil {
		return InvocationView{}, st.err
	}
	sc, release, err := s.stage(ctx, sk)
	if err != nil {
		return InvocationView{}, err
	}
	defer release()
	if first.Fingerprint == "" || sc.fingerprint != first.Fingerprint {
		return InvocationView{}, errs.New(errs.Conflict, "cannot retry: the files of the Skill %s changed since Run 1 ran them; a retry never runs other code (invoke the Skill again)", sk.Name)
	}
	// A retry runs at Run 1's policy, and only while the registration still grants it.
	policy := first.Sandbox
	if policy == "" {
		policy = runtime.PolicyReadOnly
	}
	if policyRank(policy) > policyRank(sk.granted()) {
		return InvocationView{}, errs.New(errs.Conflict, "cannot retry: Run 1 ran with the %s sandbox, which the Skill %s is no longer granted (it is registered with %s); invoke it again", policy, sk.Name, sk.granted())
	}
	var task Task
	var inv Invocation
	var run Run
	err = s.st.Update(ctx, func(tx *store.Tx) error {
		var err error
		if task, err = tasksC.Get(tx, cur.TaskID); err != nil {
			return err
		}
		if inv, err = invC.Get(tx, invID); err != nil {
			return err
		}
		last, err := runsC.Get(tx, runID(invID, inv.Attempts))
		if err != nil {
			return err
		}
		view := cur
		view.Runs = []Run{s.settled(last)}
		view.Attempts = inv.Attempts
		if err := retryable(view, task.Archived); err != nil {
			return err
		}
		if last.Status == StatusRunning { // interrupted: record it as such
			if err := runsC.Put(tx, runID(invID, last.N), s.settled(last)); err != nil {
				return err
			}
		}
		now := s.now()
		inv.Attempts++
		inv.Status, inv.UpdatedAt = StatusRunning, now
		if err := invC.Put(tx, invID, inv); err != nil {
			return err
		}
		run = Run{InvocationID: invID, N: inv.Attempts, Executor: sc.kind, SkillPath: sk.Path, Fingerprint: sc.fingerprint, Sandbox: policy, Status: StatusRunning, Boot: s.boot, StartedAt: now}
		return runsC.Insert(tx, runID(invID, run.N), run)
	})
	if err != nil {
		return InvocationView{}, err
	}
	return s.execute(ctx, task, inv, cur.Snapshot, run, sc)
}

// retryable says why an Invocation may not be retried (nil when it may).
func retryable(v InvocationView, archived bool) error {
	if archived {
		return errs.New(errs.Conflict, "the task of invocation %s is archived; invoke the Skill again to start a new epoch", v.ID)
	}
	last := v.Latest()
	switch {
	case last.Status == StatusRunning:
		return errs.New(errs.Conflict, "invocation %s is still running", v.ID)
	case last.Status == StatusSucceeded:
		return errs.New(errs.Conflict, "invocation %s succeeded; there is nothing to retry", v.ID)
	case !last.Transient:
		msg := ""
		if last.Error != nil {
			msg = ": " + last.Error.Message
		}
		return errs.New(errs.Conflict, "invocation %s failed permanently%s; a retry would fail the same way (invoke again after fixing it)", v.ID, msg)
	}
	return nil
}

// outcome is what an executor produced.
type outcome struct {
	exitCode *int
	output   string
	stderr   string
	logs     []string
	usage    *model.Usage
	calls    []helper.Call
	// token is the run's helper token (revoked by now), redacted like an environment value.
	token string
	// steps and toolCalls are the agent's model turns and tool calls (instruction Skills, on the
	// built-in agent or an external executor, already redacted), and droppedCalls how many more
	// calls an external executor made past MaxToolCalls.
	steps        int
	toolCalls    []ToolCall
	droppedCalls int
	// noEnv reports that nothing received the environment values (an agent without a shell).
	noEnv bool
	err   error
}

// execute runs one Run and records its result. The Run goes on even when the caller goes away
// (it is bounded by RunTimeout), so its record is always completed.
func (s *Service) execute(ctx context.Context, task Task, inv Invocation, snap Snapshot, run Run, sc *scan) (InvocationView, error) {
	runCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RunTimeout)
	defer cancel()
	var out outcome
	var red redactor
	vars, err := s.resolveEnv(runCtx, snap.WorkspaceID)
	if err != nil {
		out.err = err
	} else {
		red = newRedactor(vars)
		for k := range vars {
			run.EnvKeys = append(run.EnvKeys, k)
		}
		sort.Strings(run.EnvKeys)
		history, err := s.history(runCtx, task.ID, inv.Seq)
		if err != nil {
			out.err = err
		} else {
			// Earlier results were redacted with the values of their time; today's values are
			// kept out of this Run's prompt and input too.
			for i := range history {
				history[i].Output, history[i].Error, history[i].Title = red.clean(history[i].Output), red.clean(history[i].Error), red.clean(history[i].Title)
			}
			pc := PetContext{TaskID: task.ID, Epoch: task.Epoch, ExecutorSession: task.ExecutorSession,
				InvocationID: inv.ID, Seq: inv.Seq, Run: run.N, Skill: inv.Skill, Scope: task.Scope,
				Snapshot: snap, History: history}
			switch sc.kind {
			case KindInstructions:
				if sc.executor != ExecutorBuiltin {
					run.ExternalExecutor = sc.executor
					out = s.runExternal(runCtx, sc, pc, vars, red, run.Sandbox)
					break
				}
				out = s.runAgent(runCtx, sc, pc, vars, red, run.Sandbox)
				if out.noEnv {
					run.EnvKeys = nil // no shell tool: no process received the values
				}
			default:
				out = s.runProgram(runCtx, sc, pc, vars, red, run.Sandbox)
			}
		}
	}
	s.finish(&run, out, red)
	err = s.st.Update(context.WithoutCancel(ctx), func(tx *store.Tx) error {
		if err := runsC.Put(tx, runID(inv.ID, run.N), run); err != nil {
			return err
		}
		cur, err := invC.Get(tx, inv.ID)
		if err != nil {
			return err
		}
		cur.Status, cur.UpdatedAt = run.Status, *run.EndedAt
		return invC.Put(tx, inv.ID, cur)
	})
	if err != nil {
		return InvocationView{}, err
	}
	return s.Invocation(context.WithoutCancel(ctx), inv.ID)
}

// finish fills the Run's result from the outcome, redacting environment values from every
// text it keeps.
func (s *Service) finish(run *Run, out outcome, red redactor) {
	if out.token != "" {
		red = red.with(abi.VarToken, out.token)
	}
	end := s.now()
	run.EndedAt = &end
	run.DurationMS = end.Sub(run.StartedAt).Milliseconds()
	run.ExitCode = out.exitCode
	// Redact before cutting, so no part of a value survives at a cut.
	stderr := red.clean(out.stderr)
	run.Output = clip.Bytes(red.clean(out.output), maxOutputRecorded)
	run.Stderr = strings.TrimRight(clip.Tail(stderr, maxStderrKept), "\r\n")
	for _, l := range out.logs {
		run.Logs = append(run.Logs, red.clean(l))
	}
	for _, c := range out.calls {
		c.Label, c.Error = red.clean(c.Label), red.clean(c.Error)
		run.HelperCalls = append(run.HelperCalls, c)
	}
	run.Usage = out.usage
	run.Steps = out.steps
	run.ToolCalls = out.toolCalls
	if out.droppedCalls > 0 {
		run.Logs = append(run.Logs, fmt.Sprintf("warn: %d more tool calls were made than the %d a Run keeps", out.droppedCalls, MaxToolCalls))
	}
	run.Status = StatusSucceeded
	switch {
	case out.err != nil:
		code, transient, msg := classify(out.err)
		run.Status, run.Transient = StatusFailed, transient
		run.Error = &RunError{Code: code, Message: red.clean(msg)}
	case out.exitCode != nil && *out.exitCode != 0:
		run.Status = StatusFailed
		msg := fmt.Sprintf("the Skill exited with status %d", *out.exitCode)
		if line := lastLine(stderr); line != "" {
			msg += ": " + line
		}
		run.Error = &RunError{Code: errs.Unprocessable, Message: msg}
	}
}

// classify turns an executor or model error into a code, whether it is transient, and a
// message.
func classify(err error) (errs.Code, bool, string) {
	msg := err.Error()
	var ce *errs.Error
	if errors.As(err, &ce) && ce.Message != "" {
		msg = ce.Message
	}
	switch {
	case errors.Is(err, runtime.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return errs.Timeout, true, msg
	case errors.Is(err, runtime.ErrUnsupported):
		return errs.Unavailable, false, msg
	case errors.Is(err, runtime.ErrNotFound), errors.Is(err, runtime.ErrTrap), errors.Is(err, runtime.ErrPolicyRequired):
		return errs.Unprocessable, false, msg
	case errors.Is(err, runtime.ErrOutputTooLarge):
		return errs.TooLarge, false, msg
	case errors.Is(err, model.ErrAuth), errors.Is(err, model.ErrNoModel):
		return errs.CodeOf(err), false, msg
	}
	code := errs.CodeOf(err)
	switch code {
	case errs.Timeout, errs.Unavailable, errs.Upstream, errs.RateLimited:
		return code, true, msg
	}
	return code, false, msg
}

func historyPrompt(h HistoryEntry) string {
	title := ""
	if h.Title != "" {
		title = fmt.Sprintf(", source %q", h.Title)
	}
	return fmt.Sprintf("Pet invocation #%d of the Skill %q (captured %s%s).", h.Seq, h.Skill, h.CapturedAt.Format(time.RFC3339), title)
}

// skillAskSystem is the system prompt of a Skill's ask calls.
const skillAskSystem = `You are Pixie, a helper called from a Skill that Pet runs for a person: a chore done against a frozen snapshot of what they were working on. Follow the instruction exactly. Answer with the result only: no preamble, no explanation, no code fences unless the instruction asks for them.`

// runProgram runs a script or WASM Skill through the executor, with the helper gate rules get
// (when Config.Helpers is set): WASM guests call it through host functions, scripts through
// `pixie ask` / `pixie judge` with PIXIE_URL and a PIXIE_TOKEN that is revoked when the Run
// ends. Environment values are redacted from everything the helper sends out.
func (s *Service) runProgram(ctx context.Context, sc *scan, pc PetContext, vars map[string]string, red redactor, policy runtime.Policy) outcome {
	raw, err := json.Marshal(pc)
	if err != nil {
		return outcome{err: err}
	}
	cwd, err := runCwd(sc, pc.Snapshot)
	if err != nil {
		return outcome{err: err}
	}
	if s.exec == nil {
		return outcome{err: fmt.Errorf("%w: no executor for %s Skills", runtime.ErrUnsupported, sc.kind)}
	}
	var hr *helper.Run
	if s.cfg.Helpers != nil {
		hr = s.cfg.Helpers.Open(ctx, helper.Options{Name: "pet:" + pc.Skill, Target: string(raw),
			Redact: red.clean, AskSystem: skillAskSystem})
		defer hr.Close()
	}
	req := runtime.Request{Target: string(raw), Vars: vars, Cwd: cwd, Policy: policy, Timeout: s.cfg.RunTimeout}
	var ph *petHelper
	switch sc.kind {
	case KindScript:
		req.Kind, req.Ref = runtime.KindScript, filepath.Join(sc.staged, ScriptFile)
		if hr != nil && hr.URL() != "" {
			req.HelperURL, req.HelperToken = hr.URL(), hr.Token()
		}
	case KindWASM:
		ph = &petHelper{}
		if hr != nil {
			ph.inner = hr
		}
		req.Kind, req.Ref, req.Entry = runtime.KindModule, ModuleRef(filepath.Join(sc.staged, WASMFile), sc.sums[WASMFile]), abi.EntryRun
		req.PetContext = raw
		req.MountCwd = pc.Snapshot.Cwd != ""
		req.Helper = ph
	}
	res, err := s.exec.Run(ctx, req)
	out := outcome{output: res.Stdout, stderr: res.Stderr, err: err}
	if err == nil {
		code := res.ExitCode
		out.exitCode = &code
	}
	if ph != nil {
		out.logs = ph.result()
	}
	if hr != nil {
		rep := hr.Close()
		out.calls, out.token = rep.Calls, hr.Token()
		if len(rep.Calls) > 0 {
			out.usage = &model.Usage{InputTokens: rep.Usage.InputTokens, OutputTokens: rep.Usage.OutputTokens}
		}
	}
	return out
}

// runCwd is the directory a Run works in: the snapshot's cwd, which must be a directory on this
// machine, or else an empty directory of the Run's own (not the Pet workspace, which lies in
// Pixie's home, hidden from sandboxed scripts).
func runCwd(sc *scan, snap Snapshot) (string, error) {
	if cwd := snap.Cwd; cwd != "" {
		if st, err := os.Stat(cwd); err != nil || !st.IsDir() {
			return "", errs.New(errs.Unprocessable, "the snapshot's cwd %s is not a directory on this machine", cwd)
		}
		return cwd, nil
	}
	dir := filepath.Join(sc.scratch, "cwd")
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return "", errs.Wrap(errs.Unavailable, err, "cannot create a run directory: %s", errText(err))
	}
	return dir, nil
}

// history returns the Task's Invocations before seq (at most MaxHistory, newest kept), with
// their latest results, bounded in size.
func (s *Service) history(ctx context.Context, taskID string, seq int) ([]HistoryEntry, error) {
	var out []HistoryEntry
	err := s.st.View(ctx, func(tx *store.Tx) error {
		out = out[:0]
		var ids []string
		err := taskInvC.Each(tx, taskID+"/", store.ScanOptions{}, func(k, id string) error {
			var n int
			if _, err := fmt.Sscanf(strings.TrimPrefix(k, taskID+"/"), "%d", &n); err != nil || n >= seq {
				return nil
			}
			ids = append(ids, id)
			return nil
		})
		if err != nil {
			return err
		}
		if len(ids) > s.cfg.MaxHistory {
			ids = ids[len(ids)-s.cfg.MaxHistory:]
		}
		for _, id := range ids {
			inv, err := invC.Get(tx, id)
			if err != nil {
				return err
			}
			snap, err := snapC.Get(tx, id)
			if err != nil {
				return err
			}
			last, err := runsC.Get(tx, runID(id, inv.Attempts))
			if err != nil {
				return err
			}
			last = s.settled(last)
			h := HistoryEntry{InvocationID: id, Seq: inv.Seq, Skill: inv.Skill, Title: snap.Title,
				CapturedAt: snap.CapturedAt, Status: last.Status, Output: clip.Bytes(last.Output, maxHistoryOutput)}
			if last.Error != nil {
				h.Error = last.Error.Message
			}
			out = append(out, h)
		}
		return nil
	})
	// Keep the newest entries within the total budget.
	total := 0
	for i := len(out) - 1; i >= 0; i-- {
		total += len(out[i].Output) + len(out[i].Error) + len(out[i].Title) + 64
		if total > maxHistoryTotal {
			out = out[i+1:]
			break
		}
	}
	if out == nil {
		out = []HistoryEntry{}
	}
	return out, err
}

// petHelper is a WASM Skill's runtime.Helper: pixie_ask and pixie_judge go to the run's gate
// helper (the same budget, limits and errors as gate rules; unavailable when Pet has none), and
// pixie_log lines are kept for the Run record.
type petHelper struct {
	inner runtime.Helper

	mu   sync.Mutex
	logs []string
}

var _ runtime.Helper = (*petHelper)(nil)

var errNoHelper = errs.New(errs.Unavailable, "the helper (pixie ask / pixie judge) is not available to Skills on this server")

// Ask implements runtime.Helper.
func (h *petHelper) Ask(ctx context.Context, req abi.AskRequest) (abi.AskResponse, error) {
	if h.inner == nil {
		return abi.AskResponse{}, errNoHelper
	}
	return h.inner.Ask(ctx, req)
}

// Judge implements runtime.Helper.
func (h *petHelper) Judge(ctx context.Context, req abi.JudgeRequest) (abi.JudgeResponse, error) {
	if h.inner == nil {
		return abi.JudgeResponse{}, errNoHelper
	}
	return h.inner.Judge(ctx, req)
}

// Log implements runtime.Helper.
func (h *petHelper) Log(level, message string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case len(h.logs) < maxLogLines:
		h.logs = append(h.logs, level+": "+message)
	case len(h.logs) == maxLogLines:
		h.logs = append(h.logs, "warn: further log lines were dropped")
	}
}

func (h *petHelper) result() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.logs...)
}

// lastLine returns the last non-empty line of s, clipped.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return clip.Bytes(strings.TrimSpace(lines[len(lines)-1]), 300)
}

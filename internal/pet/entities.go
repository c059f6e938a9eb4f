package pet

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/helper"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/runtime"
)

// Scope kinds of a Snapshot.
const (
	ScopeSession     = "session"
	ScopeWorkspace   = "workspace"
	ScopeIndependent = "independent"
)

// Limits of a Snapshot.
const (
	MaxIDLen        = 256       // bytes of a session or workspace id
	MaxTitleLen     = 1024      // bytes of a title
	MaxCwdLen       = 4096      // bytes of a cwd
	MaxSelectionLen = 64 << 10  // bytes of the selected text
	MaxTranscript   = 64 << 10  // bytes of the transcript excerpt
	maxClockSkew    = time.Hour // how far in the future a capture time may lie
)

// Snapshot is the source state frozen when an Invocation was confirmed, exactly as the caller
// (the browser) gave it. It is stored once and never rewritten.
type Snapshot struct {
	// Scope is "session", "workspace" or "independent". On input it may also be given as
	// "session:<id>" or "workspace:<id>", which fills the id.
	Scope string `json:"scope"`
	// SessionID is the source session (session scope only).
	SessionID string `json:"sessionId,omitempty"`
	// WorkspaceID is the source workspace: required for workspace scope, optional for session
	// scope (it selects the workspace's environment values), absent for independent.
	WorkspaceID string `json:"workspaceId,omitempty"`
	// Cwd is the source's working directory on the server's machine (absolute), if any.
	Cwd string `json:"cwd,omitempty"`
	// Title is the source's title as shown to the person.
	Title string `json:"title,omitempty"`
	// Selection is the selected text, and Transcript an excerpt of the session's transcript.
	Selection  string `json:"selection,omitempty"`
	Transcript string `json:"transcript,omitempty"`
	// CapturedAt is when the source was frozen.
	CapturedAt time.Time `json:"capturedAt"`
}

// Key returns the scope key of the Task the snapshot belongs to: "session:<id>",
// "workspace:<id>" or "independent". The snapshot must have been normalised.
func (sn Snapshot) Key() string {
	switch sn.Scope {
	case ScopeSession:
		return ScopeSession + ":" + sn.SessionID
	case ScopeWorkspace:
		return ScopeWorkspace + ":" + sn.WorkspaceID
	}
	return ScopeIndependent
}

// normalize validates sn and returns it in canonical form (scope kind split from its id, times
// in UTC).
func (sn Snapshot) normalize(now time.Time) (Snapshot, error) {
	if kind, id, ok := strings.Cut(sn.Scope, ":"); ok {
		switch kind {
		case ScopeSession:
			if sn.SessionID != "" && sn.SessionID != id {
				return sn, errs.New(errs.Invalid, "snapshot scope %q disagrees with sessionId %q", sn.Scope, sn.SessionID)
			}
			sn.SessionID = id
		case ScopeWorkspace:
			if sn.WorkspaceID != "" && sn.WorkspaceID != id {
				return sn, errs.New(errs.Invalid, "snapshot scope %q disagrees with workspaceId %q", sn.Scope, sn.WorkspaceID)
			}
			sn.WorkspaceID = id
		default:
			return sn, errs.New(errs.Invalid, "snapshot scope %q: use session:<id>, workspace:<id> or independent", sn.Scope)
		}
		sn.Scope = kind
	}
	switch sn.Scope {
	case ScopeSession:
		if sn.SessionID == "" {
			return sn, errs.New(errs.Invalid, "a session-scoped snapshot needs a sessionId")
		}
	case ScopeWorkspace:
		if sn.WorkspaceID == "" {
			return sn, errs.New(errs.Invalid, "a workspace-scoped snapshot needs a workspaceId")
		}
		if sn.SessionID != "" {
			return sn, errs.New(errs.Invalid, "a workspace-scoped snapshot has no sessionId; use the session scope")
		}
	case ScopeIndependent:
		if sn.SessionID != "" || sn.WorkspaceID != "" {
			return sn, errs.New(errs.Invalid, "an independent snapshot has no sessionId or workspaceId")
		}
	case "":
		return sn, errs.New(errs.Invalid, "the snapshot needs a scope: session, workspace or independent")
	default:
		return sn, errs.New(errs.Invalid, "unknown snapshot scope %q: use session, workspace or independent", sn.Scope)
	}
	if sn.SessionID != "" {
		if err := validID("sessionId", sn.SessionID); err != nil {
			return sn, err
		}
	}
	if sn.WorkspaceID != "" {
		if err := validID("workspaceId", sn.WorkspaceID); err != nil {
			return sn, err
		}
	}
	if sn.Cwd != "" {
		if len(sn.Cwd) > MaxCwdLen || !utf8.ValidString(sn.Cwd) || strings.ContainsRune(sn.Cwd, 0) {
			return sn, errs.New(errs.Invalid, "snapshot cwd is not a valid path of at most %d bytes", MaxCwdLen)
		}
		if !filepath.IsAbs(sn.Cwd) {
			return sn, errs.New(errs.Invalid, "snapshot cwd %q is not an absolute path", sn.Cwd)
		}
		sn.Cwd = filepath.Clean(sn.Cwd)
	}
	for _, f := range []struct {
		name string
		v    string
		max  int
	}{{"title", sn.Title, MaxTitleLen}, {"selection", sn.Selection, MaxSelectionLen}, {"transcript", sn.Transcript, MaxTranscript}} {
		if len(f.v) > f.max {
			return sn, errs.New(errs.TooLarge, "snapshot %s is %d bytes; the limit is %d", f.name, len(f.v), f.max)
		}
		if !utf8.ValidString(f.v) {
			return sn, errs.New(errs.Invalid, "snapshot %s is not valid UTF-8", f.name)
		}
	}
	if sn.CapturedAt.IsZero() {
		return sn, errs.New(errs.Invalid, "the snapshot needs capturedAt, the moment it was frozen")
	}
	if sn.CapturedAt.After(now.Add(maxClockSkew)) {
		return sn, errs.New(errs.Invalid, "snapshot capturedAt %s lies in the future", sn.CapturedAt.UTC().Format(time.RFC3339))
	}
	sn.CapturedAt = sn.CapturedAt.UTC()
	return sn, nil
}

// validID checks a session or workspace id: 1..MaxIDLen bytes of printable, non-space
// characters other than "/".
func validID(field, id string) error {
	if id == "" || len(id) > MaxIDLen || !utf8.ValidString(id) {
		return errs.New(errs.Invalid, "%s must be 1 to %d bytes of UTF-8", field, MaxIDLen)
	}
	for _, r := range id {
		if r == '/' || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return errs.New(errs.Invalid, "%s %q may not contain %q, spaces or control characters", field, id, r)
		}
	}
	return nil
}

// Status of an Invocation or a Run.
type Status string

// Statuses.
const (
	StatusRunning   Status = "running"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
)

// Task is the work thread of one source scope. It owns exactly one executor session for its
// whole lifetime.
type Task struct {
	ID string `json:"id"`
	// Scope is the source scope key: "session:<id>", "workspace:<id>" or "independent".
	Scope string `json:"scope"`
	// Epoch counts the Tasks of this scope: 1 for the first, n+1 after the n-th was archived.
	Epoch int `json:"epoch"`
	// ExecutorSession names the executor session that keeps the Task's history.
	ExecutorSession string     `json:"executorSession"`
	Archived        bool       `json:"archived"`
	ArchivedAt      *time.Time `json:"archivedAt,omitempty"`
	// Invocations is how many Invocations the Task holds.
	Invocations int       `json:"invocations"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
}

// scopeIndex is pet-task-scope/<scope>: the scope's latest Task.
type scopeIndex struct {
	TaskID string `json:"taskId"`
	Epoch  int    `json:"epoch"`
	Open   bool   `json:"open"`
}

// Invocation is one request inside a Task.
type Invocation struct {
	ID     string `json:"id"`
	TaskID string `json:"taskId"`
	// Seq is the Invocation's position in its Task, from 1.
	Seq   int    `json:"seq"`
	Skill string `json:"skill"`
	// Status is the status of the latest Run.
	Status Status `json:"status"`
	// Attempts is how many Runs the Invocation has.
	Attempts  int       `json:"attempts"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// RunError is why a Run failed: an errs code and a message free of environment values.
type RunError struct {
	Code    errs.Code `json:"code"`
	Message string    `json:"message"`
}

// Run is one execution attempt of an Invocation.
type Run struct {
	InvocationID string `json:"invocationId"`
	// N is the attempt number, from 1.
	N int `json:"n"`
	// Executor is how the Skill ran: wasm, script or instructions.
	Executor SkillKind `json:"executor"`
	// ExternalExecutor names the CLI that ran an instruction Skill ("claude" or "codex"); empty
	// when the Pixie model ran it.
	ExternalExecutor string `json:"externalExecutor,omitempty"`
	// SkillPath is the directory the Skill's link resolved to for this Run.
	SkillPath string `json:"skillPath"`
	// Fingerprint digests every file the Run executed (the private copy made when it started,
	// see Inspection.Fingerprint); a retry runs only the same content.
	Fingerprint string `json:"fingerprint,omitempty"`
	Status      Status `json:"status"`
	// ExitCode is the WASM entry point's or script's exit status (absent for instructions).
	ExitCode *int `json:"exitCode,omitempty"`
	// Output is the result: stdout, or the model's answer.
	Output string `json:"output,omitempty"`
	// Stderr is the tail of the script's stderr or the guest's log output.
	Stderr string `json:"stderr,omitempty"`
	// Logs are the guest's pixie_log lines.
	Logs []string `json:"logs,omitempty"`
	// HelperCalls are the Run's ask and judge calls: type, judge type, label, engine,
	// confidence, usage, duration and error; never the text sent.
	HelperCalls []helper.Call `json:"helperCalls,omitempty"`
	// Error is why the Run failed.
	Error *RunError `json:"error,omitempty"`
	// Transient reports a failure worth retrying (a timeout, an unavailable or failing model).
	Transient bool `json:"transient,omitempty"`
	// EnvKeys are the names (never the values) of the DSH_PET_* variables the Run received.
	EnvKeys []string `json:"envKeys,omitempty"`
	// Usage is the model's token usage: the instruction Skill's agent (every model turn), or the
	// helper calls.
	Usage *model.Usage `json:"usage,omitempty"`
	// Sandbox is the sandbox policy the Run used: the Skill's grant (or less, when SKILL.md asks
	// for less), Run 1's for a retry.
	Sandbox runtime.Policy `json:"sandbox,omitempty"`
	// Steps is the number of model turns of an instruction Skill's agent.
	Steps int `json:"steps,omitempty"`
	// ToolCalls are the agent's tool calls and their results, in order: the built-in agent's or
	// an external CLI's (at most MaxToolCalls).
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// Boot identifies the server process that ran it; a running Run of another process was
	// interrupted by a restart.
	Boot       string     `json:"boot"`
	StartedAt  time.Time  `json:"startedAt"`
	EndedAt    *time.Time `json:"endedAt,omitempty"`
	DurationMS int64      `json:"durationMs,omitempty"`
}

// ToolCall is one tool call an executor's agent made and its result, as the Run keeps it
// (inputs and outputs capped at 16 KiB, environment values redacted).
type ToolCall struct {
	// N counts the Run's tool calls from 1; Step is the model turn that made it.
	N    int    `json:"n"`
	Step int    `json:"step"`
	Name string `json:"name"`
	// Input is the call's arguments (JSON).
	Input json.RawMessage `json:"input"`
	// Output is what the tool produced, or why it did not run.
	Output string `json:"output"`
	// IsError marks a failed or refused call.
	IsError bool `json:"isError,omitempty"`
	// Gate says what a gate did (denied the call, withheld, replaced or added to the result),
	// with its notes.
	Gate       string `json:"gate,omitempty"`
	DurationMS int64  `json:"durationMs"`
}

// Collections (see the package comment for the layout).
var (
	skillsC  = store.NewCollection[Skill]("pet-skill")
	driftC   = store.NewCollection[driftMark]("pet-drift")
	tasksC   = store.NewCollection[Task]("pet-task")
	scopeC   = store.NewCollection[scopeIndex]("pet-task-scope")
	taskInvC = store.NewCollection[string]("pet-task-inv")
	invC     = store.NewCollection[Invocation]("pet-inv")
	snapC    = store.NewCollection[Snapshot]("pet-snap")
	runsC    = store.NewCollection[Run]("pet-run")
	envC     = store.NewCollection[envValue]("pet-env")
)

// seqFormat renders sequence and attempt numbers in keys so that they sort.
const seqFormat = "%06d"

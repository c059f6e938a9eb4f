// Package pet owns Pet: chores run in a separate executor against a frozen snapshot of what a
// person was looking at (spec: pet.md). It holds the four entities (Task, Invocation, Snapshot,
// Run), the Skills a user imports by absolute path, their projection into the Pet workspace,
// the environment values Skills receive as DSH_PET_* variables, the three executors (a WASM
// guest, a legacy bash script, or SKILL.md instructions for the built-in agent), the capability
// wheel with its built-in actions, and the diagnostics. HTTP lives in server/pet.go; the CLI in
// cmd/pixie/pet.go. The full description for users is docs/pet.md.
//
// # Entities
//
// A Task is the long-lived work thread of one source scope ("session:<id>", "workspace:<id>" or
// "independent"). At most one unarchived Task exists per scope: the index key
// pet-task-scope/<scope> is read and written in the same store transaction that creates a Task,
// so concurrent invocations (from any number of processes over one store) agree on one Task.
// Archiving closes a Task for good; the next invocation from that scope starts a new epoch with
// a new Task and a fresh executor session. An Invocation is one request in a Task; its Snapshot
// is written once (store Insert) and never rewritten. A Run is one attempt of an Invocation; a
// retry of a transient failure adds a Run with the same Skill, Snapshot and Task. The executor
// session of a Task is its history: every later Invocation sees the earlier ones and their
// results (as chat turns for instruction Skills, in pet_context for WASM and on stdin for
// scripts). Invocations of one scope run one at a time in this process, in order.
//
// # Store layout
//
//	pet-skill/<name>                  registered Skill: the link name → absolute path, enabled, shortcut
//	pet-drift/<name>                  sticky drift marker; cleared only by RebuildProjection
//	pet-task/<task id>                Task (ids sort by creation time)
//	pet-task-scope/<scope>            the scope's current Task id, epoch and whether it is open
//	pet-task-inv/<task id>/<seq>      the Task's Invocation ids in order (seq zero-padded)
//	pet-inv/<invocation id>           Invocation status
//	pet-snap/<invocation id>          the Invocation's Snapshot, inserted once
//	pet-run/<invocation id>/<n>       Runs of an Invocation (n zero-padded)
//	pet-env/g/<KEY>                   global environment values
//	pet-env/w/<workspace id>/<KEY>    per-workspace environment values
//
// # Trust model
//
// Pet fails closed: a Skill runs only when it is registered, enabled, its link resolves to a
// directory that passes validation at that very moment, its projection entry is intact (no
// drift since the last rebuild) and its executor is available. Every Skill runs under the
// read-only sandbox policy unless its SKILL.md asks for workspace-write (SandboxKey) and the
// person confirmed that at registration (Skill.Sandbox); a Skill that asks for more than it was
// granted fails closed. Environment values reach only the Skill's processes (bash environment,
// WASM config, the agent's shell commands); they are redacted from every output Pet records or
// returns and never enter a prompt.
//
// # Instruction Skills
//
// A Skill with neither skill.wasm nor run.sh runs on the built-in agent (internal/agent):
// SKILL.md's body is the system prompt, the Task's history the earlier turns, the Snapshot the
// user message, and the model works through the tools list, read, search and shell over the
// snapshot's cwd, at the Skill's policy, within Config.Agent's limits. Each tool call passes
// through the gates of Config.Agent.Preset (Config.Agent.Gates) and is kept in the Run record
// (Run.ToolCalls).
//
// # Helper
//
// Script and WASM Skills get the helper gate rules get, opened per Run through
// Config.Helpers (internal/helper, the Service gate runs use too): `pixie ask` / `pixie judge` for scripts (PIXIE_URL and a
// PIXIE_TOKEN revoked when the Run ends, served by the server's helper routes), the pixie_ask
// and pixie_judge host functions for WASM guests; 20 calls of at most 256 KB each within the
// Run's time limit. Environment values are redacted from what the helper sends to the model or
// the decision engine, and each call is kept in the Run record (type, label, engine,
// confidence, usage; never its text).
package pet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pixie-dev/pixie/internal/agent"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/helper"
	"github.com/pixie-dev/pixie/internal/keylock"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/scratch"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/runtime"
)

// Defaults of Config.
const (
	DefaultMaxSkillFiles    = 200
	DefaultMaxSkillFileSize = 1 << 20
	DefaultMaxSkillSize     = 8 << 20
	DefaultMaxSkillModule   = 16 << 20
	DefaultRunTimeout       = 60 * time.Second
	DefaultMaxHistory       = 20
)

// ProjectionDir is the Pet workspace's skills folder, relative to the workspace. Enabled Skills
// appear there as symlinks named after the Skill.
const ProjectionDir = ".pixie/skills"

// Config configures a Service. Store is required; every other zero field takes its default.
type Config struct {
	// Store holds the Tasks, Invocations, Skills' records and the Wheel.
	Store *store.Store
	// Exec runs script and WASM Skills (normally a runtime.Dispatcher holding the bash and WASM
	// executors); nil leaves both unavailable.
	Exec runtime.Executor
	// Model is the Pixie model for instruction Skills; nil means none is configured.
	Model model.Model
	// Home is Pixie's home directory, used only to place the default Workspace; empty means
	// $PIXIE_HOME, else ~/.pixie.
	Home string
	// Workspace is the Pet workspace (absolute); empty means <Home>/pet/workspace. Enabled Skills
	// are projected into <Workspace>/.pixie/skills.
	Workspace string
	// MaxSkillFiles caps the files of one Skill (directories are capped at the same number);
	// zero means 200.
	MaxSkillFiles int
	// MaxSkillFileSize caps each file of a Skill, in bytes; zero means 1 MiB.
	MaxSkillFileSize int64
	// MaxSkillSize caps a Skill's files together, in bytes; zero means 8 MiB.
	MaxSkillSize int64
	// MaxSkillModuleSize caps a Skill's skill.wasm, which is exempt from the two limits above (a
	// guest built with standard Go is a few MiB); zero means 16 MiB, the module registry's cap.
	MaxSkillModuleSize int64
	// RunTimeout bounds one Run (executor, model and helper calls together); zero means 60s.
	RunTimeout time.Duration
	// Agent configures the built-in agent instruction Skills run on.
	Agent AgentConfig
	// MaxHistory is how many earlier Invocations of its Task a Run sees; zero means 20.
	MaxHistory int
	// External configures the external executors of instruction Skills (Claude Code, Codex):
	// where the CLIs are, the model they talk to, the preset of their hooks. Its zero value
	// finds the CLIs on PATH and leaves them unavailable until ServerURL is set.
	External ExternalConfig
	// Helpers opens the helper of script and WASM Runs (`pixie ask` / `pixie judge`, the
	// pixie_ask / pixie_judge host functions): normally the Service the gate service uses, so
	// Skills get exactly what gate rules get. Nil means Skills have no helper (calls answer
	// unavailable, scripts get no PIXIE_URL).
	Helpers *helper.Service
	// Alive reports whether the replica with a store instance id still runs (internal/cluster's
	// Node.Alive), over a store other replicas share: a Run left running by a live replica is
	// shown running, not interrupted. Nil means every other process is gone.
	Alive func(ctx context.Context, instance string) (bool, error)
	// Logger receives warnings (drift found, injected variables skipped); nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() (Config, error) {
	if c.MaxSkillFiles < 0 || c.MaxSkillFileSize < 0 || c.MaxSkillSize < 0 || c.MaxSkillModuleSize < 0 || c.RunTimeout < 0 || c.MaxHistory < 0 {
		return c, errs.New(errs.Invalid, "pet: limits and timeouts must not be negative")
	}
	if c.MaxSkillFiles == 0 {
		c.MaxSkillFiles = DefaultMaxSkillFiles
	}
	if c.MaxSkillFileSize == 0 {
		c.MaxSkillFileSize = DefaultMaxSkillFileSize
	}
	if c.MaxSkillSize == 0 {
		c.MaxSkillSize = DefaultMaxSkillSize
	}
	if c.MaxSkillModuleSize == 0 {
		c.MaxSkillModuleSize = DefaultMaxSkillModule
	}
	if c.RunTimeout == 0 {
		c.RunTimeout = DefaultRunTimeout
	}
	if c.MaxHistory == 0 {
		c.MaxHistory = DefaultMaxHistory
	}
	if c.Agent.MaxSteps < 0 || c.Agent.MaxTokens < 0 || c.Agent.ShellTimeout < 0 {
		return c, errs.New(errs.Invalid, "pet: the agent's limits must not be negative")
	}
	if c.Agent.MaxSteps == 0 {
		c.Agent.MaxSteps = agent.DefaultMaxSteps
	}
	if c.Agent.MaxTokens == 0 {
		c.Agent.MaxTokens = agent.DefaultMaxTokens
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Workspace == "" {
		home := c.Home
		if home == "" {
			home = os.Getenv("PIXIE_HOME")
		}
		if home == "" {
			uh, err := os.UserHomeDir()
			if err != nil {
				return c, errs.Wrap(errs.Invalid, err, "pet: no home directory for the default workspace; set the workspace")
			}
			home = filepath.Join(uh, ".pixie")
		}
		c.Workspace = filepath.Join(home, "pet", "workspace")
	}
	if len(c.Agent.Hidden) == 0 && c.Home != "" {
		c.Agent.Hidden = []string{c.Home}
	}
	if !filepath.IsAbs(c.Workspace) {
		return c, errs.New(errs.Invalid, "pet: the workspace %q is not an absolute path", c.Workspace)
	}
	c.Workspace = filepath.Clean(c.Workspace)
	return c, nil
}

// AgentConfig configures the built-in agent (internal/agent) that instruction Skills run on:
// SKILL.md's body as the system prompt, the tools list, read, search and shell over the
// snapshot's cwd, at the Skill's sandbox policy.
type AgentConfig struct {
	// MaxSteps caps the model turns of one Run; zero means agent.DefaultMaxSteps (20).
	MaxSteps int
	// MaxTokens caps the tokens of one Run (input and output of every model turn, summed);
	// zero means agent.DefaultMaxTokens (200000).
	MaxTokens int
	// ShellTimeout bounds one shell command, within the Run's time limit; zero means
	// agent.DefaultShellTimeout (60s).
	ShellTimeout time.Duration
	// Gates checks every tool call of the agent and its result (tool-before, tool-after),
	// with the gates of Preset; nil means no gates.
	Gates agent.Gates
	// Preset is the preset whose gates apply to the agent's tool calls.
	Preset string
	// Hidden are directories the agent's file tools never show, even inside the snapshot's cwd
	// (the Pixie home); empty means Home.
	Hidden []string
}

// Service is Pet. It is safe for concurrent use.
type Service struct {
	st    *store.Store
	exec  runtime.Executor
	model model.Model
	cfg   Config
	log   *slog.Logger
	// boot identifies this process: a Run left running by another process was interrupted.
	boot string

	// skillMu serialises changes to Skills together with their projection entries.
	skillMu sync.Mutex
	// scopes serialises the Invocations of one scope (the Task's executor session).
	scopes keylock.Mutex

	builtinMu sync.RWMutex
	builtins  []BuiltinAction

	// ext runs instruction Skills on external CLIs; hooks holds the hook credentials of their
	// Runs.
	ext   *external
	hooks hookCreds
}

// New returns the Pet service over cfg.Store.
func New(_ context.Context, cfg Config) (*Service, error) {
	st, exec, m := cfg.Store, cfg.Exec, cfg.Model
	if st == nil {
		return nil, errs.New(errs.Invalid, "pet: a store is required")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	// Run directories a killed server left behind (their lock is free) go at start.
	scratch.Clean("", petScratchPrefix, nil)
	boot := randHex(8)
	if st.Shared() {
		boot = st.Instance() // the replica's id, which Config.Alive knows
	}
	return &Service{st: st, exec: exec, model: m, cfg: cfg, log: cfg.Logger, boot: boot, ext: &external{cfg: cfg.External}}, nil
}

// Close releases nothing (a Run holds what it uses only while it runs, and the executors belong
// to the caller); it is there so that every component closes alike.
func (s *Service) Close(context.Context) error { return nil }

// Paths are the Pet directories.
type Paths struct {
	Workspace string `json:"workspace"`
	Skills    string `json:"skills"`
}

// Paths returns the Pet workspace and its skills folder.
func (s *Service) Paths() Paths {
	return Paths{Workspace: s.cfg.Workspace, Skills: s.projectionDir()}
}

func (s *Service) projectionDir() string {
	return filepath.Join(s.cfg.Workspace, filepath.FromSlash(ProjectionDir))
}

func (s *Service) now() time.Time { return s.cfg.Now().UTC() }

// newID returns an id that sorts by creation time: prefix, 16 hex digits of Unix nanoseconds,
// 6 random hex digits.
func (s *Service) newID(prefix string) string {
	return fmt.Sprintf("%s%016x%s", prefix, s.cfg.Now().UnixNano(), randHex(3))
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

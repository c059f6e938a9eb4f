package pet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/sandbox"
)

// Executors of instruction Skills (Skill.Executor): the person's choice, stored by Pet with the
// Skill, never read from SKILL.md.
const (
	// ExecutorBuiltin runs the Skill on the Pixie model (the default).
	ExecutorBuiltin = "builtin"
	// ExecutorClaude runs the Skill headless in Claude Code (claude -p).
	ExecutorClaude = "claude"
	// ExecutorCodex runs the Skill headless in Codex (codex exec).
	ExecutorCodex = "codex"
)

// Executors lists the executors of instruction Skills.
var Executors = []string{ExecutorBuiltin, ExecutorClaude, ExecutorCodex}

// checkExecutor validates an executor setting ("" is the default, builtin).
func checkExecutor(e string) (string, error) {
	switch e {
	case "", ExecutorBuiltin:
		return ExecutorBuiltin, nil
	case ExecutorClaude, ExecutorCodex:
		return e, nil
	}
	return "", errs.New(errs.Invalid, "unknown executor %q: use %s", e, strings.Join(Executors, ", "))
}

// executorOf is a stored Skill's executor.
func executorOf(sk Skill) string {
	if sk.Executor == "" {
		return ExecutorBuiltin
	}
	return sk.Executor
}

// CLIConfig configures one external CLI. The zero value finds the CLI on PATH and lets it use
// its own login.
type CLIConfig struct {
	// Command is the CLI: a path, or a name looked up in PATH; empty means "claude" or "codex".
	Command string
	// BaseURL is the model API the CLI talks to: Claude Code's ANTHROPIC_BASE_URL (an
	// Anthropic Messages API, without /v1), Codex's model provider base_url (an OpenAI Responses
	// API, with /v1). Empty means the CLI's default.
	BaseURL string
	// APIKey is the key the CLI sends (ANTHROPIC_API_KEY; Codex's provider key). Empty means
	// the CLI's own login: the login file of the server user's configuration is linked into the
	// Run's private configuration (Pet itself never reads it).
	APIKey string
	// Model is the model the CLI asks for; empty means the CLI's default.
	Model string
}

// ExternalConfig configures the external executors. Its zero value leaves them unavailable
// until ServerURL answers, and otherwise finds the CLIs on PATH.
type ExternalConfig struct {
	Claude CLIConfig
	Codex  CLIConfig
	// Preset is the preset whose gates the CLIs' tool calls pass (pet.agent.preset, the preset
	// of Pet's own tool calls); empty means the hook adapter's default preset.
	Preset string
	// ServerURL returns the URL of this server that the CLIs' hooks call (the URL scripts get
	// as PIXIE_URL). Nil, or an empty answer, leaves the external executors unavailable: a CLI
	// never runs without Pixie's hooks.
	ServerURL func() string
	// Sandbox is the command line that starts the sandbox verb; empty means this binary
	// (os.Executable) followed by sandbox.Verb.
	Sandbox []string
	// Pixie is the pixie binary the hooks run (`pixie hook claude|codex`); empty means this
	// binary.
	Pixie string
	// Hidden are directories the CLIs and everything they start never see (the Pixie home,
	// which holds the admin token, the credentials and the store).
	Hidden []string
	// Path is PATH for the CLIs; empty means the server's own PATH.
	Path string
}

// Limits of what a CLI streams.
const (
	maxLine   = 4 << 20  // one line of its stdout or session file (one event)
	maxStream = 64 << 20 // all of its stdout (past it the run is stopped), or of its session file
)

// external is the state of the external executors: the resolved binaries and the machine's
// isolation, found once.
type external struct {
	cfg ExternalConfig

	once    sync.Once
	sandbox []string
	pixie   string
	iso     sandbox.Isolation
	err     error
}

func (x *external) init() {
	x.once.Do(func() {
		self := ""
		if len(x.cfg.Sandbox) == 0 || x.cfg.Pixie == "" {
			exe, err := os.Executable()
			if err == nil {
				exe, err = filepath.EvalSymlinks(exe)
			}
			if err != nil {
				x.err = fmt.Errorf("cannot locate this binary: %w", err)
				return
			}
			self = exe
		}
		x.sandbox = append([]string(nil), x.cfg.Sandbox...)
		if len(x.sandbox) == 0 {
			x.sandbox = []string{self, sandbox.Verb}
		}
		x.pixie = x.cfg.Pixie
		if x.pixie == "" {
			x.pixie = self
		}
		x.iso = sandbox.Detect(x.sandbox)
	})
}

// cli returns the configuration of an external executor.
func (x *external) cli(name string) CLIConfig {
	if name == ExecutorCodex {
		return x.cfg.Codex
	}
	return x.cfg.Claude
}

// command resolves an external executor's CLI.
func (x *external) command(name string) (string, error) {
	c := x.cli(name).Command
	if c == "" {
		c = name
	}
	p, err := exec.LookPath(c)
	if err != nil {
		return "", fmt.Errorf("the %s command %q is not installed here (set pet.%s.command to its path)", name, c, name)
	}
	if p, err = filepath.Abs(p); err != nil {
		return "", err
	}
	return p, nil
}

// available reports whether Skills can run on the external executor name under policy.
func (s *Service) externalAvailable(ctx context.Context, name string, policy runtime.Policy) (bool, string) {
	x := s.ext
	if _, err := x.command(name); err != nil {
		return false, err.Error()
	}
	if x.cfg.ServerURL == nil || x.cfg.ServerURL() == "" {
		return false, "the server's own URL, which Pixie's hooks call, is not known yet"
	}
	x.init()
	if x.err != nil {
		return false, x.err.Error()
	}
	switch name {
	case ExecutorClaude:
		// Claude Code has no OS sandbox of its own here: it runs under Pixie's, at the Skill's
		// policy, or not at all.
		if policy != runtime.PolicyFull {
			if err := sandbox.Probe(); err != nil {
				return false, "Claude Code runs under Pixie's sandbox, which cannot be enforced here: " + msgOf(err)
			}
		}
	case ExecutorCodex:
		// Codex confines its commands with its own sandbox (bubblewrap), which cannot start under
		// Landlock; the Pixie home is hidden from all of it by the run's mount namespace.
		if !x.iso.Namespaces {
			return false, "Codex runs in a private mount namespace that hides the Pixie home, and " + x.iso.Reason
		}
	}
	return true, ""
}

// skillPolicy is the sandbox policy a Skill's availability is judged at: the one its
// registration granted (a Run uses what its staged copy asks for, never more).
func (s *Service) skillPolicy(sk Skill) runtime.Policy {
	return sk.granted()
}

// skillExecutorAvailable reports whether sk (of kind) can run on its executor.
func (s *Service) skillExecutorAvailable(ctx context.Context, sk Skill, kind SkillKind) (bool, string) {
	ex := executorOf(sk)
	if ex == ExecutorBuiltin {
		return s.executorAvailable(ctx, kind)
	}
	if kind != KindInstructions {
		return false, fmt.Sprintf("the executor %s runs instruction Skills, and this Skill is now a %s Skill (set its executor to builtin)", ex, kind)
	}
	return s.externalAvailable(ctx, ex, s.skillPolicy(sk))
}

// ExternalAvailability reports, for Diagnostics, whether each external executor can run
// read-only Skills here.
func (s *Service) externalAvailability(ctx context.Context) map[string]Availability {
	out := map[string]Availability{}
	for _, name := range []string{ExecutorClaude, ExecutorCodex} {
		ok, reason := s.externalAvailable(ctx, name, runtime.PolicyReadOnly)
		out[name] = Availability{Available: ok, Reason: reason}
	}
	return out
}

// externalRun is one Run of a Skill on an external CLI: its private directories, its hook
// credential and what its stream has shown so far.
type externalRun struct {
	s      *Service
	name   string // ExecutorClaude or ExecutorCodex
	cli    CLIConfig
	bin    string
	policy runtime.Policy
	cwd    string
	// state is the Run's private, writable directory (the CLI's HOME, TMPDIR and
	// configuration); conf lies outside it and is read-only to the CLI.
	state, conf string
	cred        *hookCred
	red         redactor

	calls   []ToolCall
	byID    map[string]int // tool_use_id → index in calls
	started map[string]time.Time
	dropped int
	steps   map[string]int // the model turn's id → step
	output  string
	usage   *model.Usage
	failure string // the CLI's own error, from its stream
}

// runExternal runs an instruction Skill headless on its external CLI, in the snapshot's cwd
// (or the Run's empty directory), under Pixie's sandbox at the Skill's policy, with Pixie's
// hooks calling this server with a credential of the Run's own.
func (s *Service) runExternal(ctx context.Context, sc *scan, pc PetContext, vars map[string]string, red redactor, policy runtime.Policy) outcome {
	name := sc.executor
	if policy == "" {
		policy = runtime.PolicyReadOnly
	}
	if ok, reason := s.externalAvailable(ctx, name, policy); !ok {
		return outcome{err: errs.Wrap(errs.Unavailable, runtime.ErrUnsupported, "the %s executor is unavailable: %s", name, reason)}
	}
	x := s.ext
	bin, _ := x.command(name)
	cwd := pc.Snapshot.Cwd
	if cwd != "" {
		if st, err := os.Stat(cwd); err != nil || !st.IsDir() {
			return outcome{err: errs.New(errs.Unprocessable, "the snapshot's cwd %s is not a directory on this machine", cwd)}
		}
	} else {
		cwd = filepath.Join(sc.scratch, "cwd")
		if err := os.Mkdir(cwd, 0o700); err != nil {
			return outcome{err: errs.Wrap(errs.Unavailable, err, "cannot create a run directory: %s", errText(err))}
		}
	}
	r := &externalRun{s: s, name: name, cli: x.cli(name), bin: bin, policy: policy, cwd: cwd,
		state: filepath.Join(sc.scratch, "cli"), conf: filepath.Join(sc.scratch, "conf"),
		byID: map[string]int{}, started: map[string]time.Time{}, steps: map[string]int{}}
	for _, d := range []string{r.state, r.conf, filepath.Join(r.state, "home"), filepath.Join(r.state, "tmp")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return outcome{err: errs.Wrap(errs.Unavailable, err, "cannot create a run directory: %s", errText(err))}
		}
	}
	cred, revoke := s.hooks.issue(x.cfg.Preset)
	defer revoke()
	r.cred = cred
	r.red = red.with("PIXIE_TOKEN", cred.token)
	if r.cli.APIKey != "" {
		r.red = r.red.with("API_KEY", r.cli.APIKey)
	}
	out := outcome{token: cred.token}
	var p proc
	var err error
	switch name {
	case ExecutorClaude:
		p, err = r.claude(sc, pc)
	default:
		p, err = r.codex(ctx, sc, pc)
	}
	if err != nil {
		out.err = err
		return out
	}
	p.env = append(p.env, r.baseEnv(vars)...)
	p.dir, p.iso = cwd, x.iso
	res := p.run(ctx)
	if name == ExecutorCodex {
		r.readRollout()
	}
	r.finishCalls()
	out.stderr, out.output, out.usage = res.stderr, r.output, r.usage
	out.toolCalls, out.droppedCalls = r.calls, r.dropped
	code := res.exitCode
	switch {
	case res.err != nil:
		out.err = res.err
	case r.failure != "":
		out.err = errs.New(errs.Upstream, "%s failed: %s", cliName(name), r.failure)
	case code != 0:
		out.exitCode = &code
		msg := fmt.Sprintf("%s exited with status %d", cliName(name), code)
		if line := lastLine(red.clean(res.stderr)); line != "" {
			msg += ": " + line
		}
		out.err = errs.New(errs.Unprocessable, "%s", msg)
	default:
		out.exitCode = &code
	}
	return out
}

func cliName(name string) string {
	if name == ExecutorCodex {
		return "Codex"
	}
	return "Claude Code"
}

// inherited are the variables of the server's environment a CLI gets: none carries a secret.
var inherited = []string{"USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ"}

// baseEnv is what every CLI's environment holds besides its own settings: PATH, a private HOME
// and TMPDIR, the hook credential and the Skill's DSH_PET_* values. Nothing else of the server's
// environment reaches the CLI (no admin token, no provider key of the server's).
func (r *externalRun) baseEnv(vars map[string]string) []string {
	path := r.s.ext.cfg.Path
	if path == "" {
		path = os.Getenv("PATH")
	}
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	env := []string{"PATH=" + path, "HOME=" + filepath.Join(r.state, "home"), "TMPDIR=" + filepath.Join(r.state, "tmp"),
		"TERM=dumb", "NO_COLOR=1", "PIXIE_TOKEN=" + r.cred.token}
	for _, k := range inherited {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+vars[k])
	}
	return env
}

// sandboxArgs is the sandbox verb's command line for the CLI: Landlock at the Skill's policy
// (Claude Code), or the full policy with the hidden directories masked (Codex, whose own
// sandbox confines its commands). The Run's state directory is writable, the hook adapter
// readable wherever it lies.
func (r *externalRun) sandboxArgs(o sandbox.Options, program string, args ...string) []string {
	x := r.s.ext
	o.Cwd = r.cwd
	o.Hidden = x.cfg.Hidden
	o.Readable = append(o.Readable, x.pixie)
	o.Namespaces = x.iso.Namespaces
	o.StatusFD = 3
	return append(append([]string(nil), x.sandbox...), o.Args(program, args...)...)
}

// hookCommand is the command hook both CLIs run: Pixie's adapter for the host, with the
// server's URL, failing closed (a step Pixie cannot check is blocked), the credential in
// PIXIE_TOKEN. The preset is the credential's: the server ignores any other.
func (r *externalRun) hookCommand(host string) string {
	preset := r.s.ext.cfg.Preset
	cmd := shellQuote(r.s.ext.pixie) + " hook " + host + " --url " + shellQuote(r.s.ext.cfg.ServerURL()) + " --fail-closed --timeout 85s"
	if preset != "" {
		cmd += " --preset " + shellQuote(preset)
	}
	return cmd
}

// hookEvents are the events whose hooks the CLIs get, and whether they take a tool matcher.
var hookEvents = []struct {
	name string
	tool bool
}{{"UserPromptSubmit", false}, {"PreToolUse", true}, {"PostToolUse", true}, {"Stop", false}, {"SubagentStop", false}}

// hooksObject is the "hooks" object of Claude Code's settings and Codex's hooks.json.
func (r *externalRun) hooksObject(host string, events []string) map[string]any {
	out := map[string]any{}
	for _, ev := range hookEvents {
		if events != nil && !contains(events, ev.name) {
			continue
		}
		g := map[string]any{"hooks": []any{map[string]any{"type": "command", "command": r.hookCommand(host), "timeout": 90}}}
		if ev.tool {
			g["matcher"] = "*"
		}
		out[ev.name] = []any{g}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// prompt is the text after the Skill's invocation: the Invocation, its Snapshot and the Task's
// history (environment values are never in it; the history was redacted).
func prompt(pc PetContext) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Pet invocation #%d of this Skill (task %s, epoch %d, run %d).\n", pc.Seq, pc.TaskID, pc.Epoch, pc.Run)
	snap, _ := json.MarshalIndent(pc.Snapshot, "", "  ")
	fmt.Fprintf(&b, "The snapshot of the source, frozen when the person invoked the Skill (JSON):\n%s\n", snap)
	if len(pc.History) > 0 {
		hist, _ := json.MarshalIndent(pc.History, "", "  ")
		fmt.Fprintf(&b, "Earlier invocations of this task and their results, oldest first (JSON):\n%s\n", hist)
	}
	return b.String()
}

// installSkill makes the Run's staged copy of the Skill a Skill of the CLI's private
// configuration, where the CLI looks for Skills: <dir>/<name> is a link to the copy, which
// lies outside the writable state (the CLI cannot change its own instructions).
func installSkill(dir, name, staged string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Symlink(staged, filepath.Join(dir, name))
}

// linkLogin links the login file of the server user's own CLI configuration into the Run's
// private one, when the CLI has no key configured: the CLI reads it as it would in the user's
// terminal; Pet never opens it. A missing file links nothing (the CLI then says it is not
// logged in).
func linkLogin(from, to string) {
	if st, err := os.Stat(from); err != nil || !st.Mode().IsRegular() {
		return
	}
	_ = os.Symlink(from, to)
}

// userConfigDir is a CLI's configuration folder for the server's user: $<env> when set, else
// ~/<dot>.
func userConfigDir(env, dot string) string {
	if d := os.Getenv(env); d != "" {
		return d
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(h, dot)
}

// addCall records a tool call the model asked for.
func (r *externalRun) addCall(id, name string, input []byte, step int, at time.Time) {
	if len(r.calls) >= MaxToolCalls {
		r.dropped++
		return
	}
	c := ToolCall{N: len(r.calls) + 1, Step: step, Name: name, Input: recordInput(input, r.red)}
	if id != "" {
		r.byID[id] = len(r.calls)
		r.started[id] = at
	}
	r.calls = append(r.calls, c)
}

// setResult records a tool call's result.
func (r *externalRun) setResult(id, output string, isError bool, at time.Time) {
	i, ok := r.byID[id]
	if !ok {
		return
	}
	c := &r.calls[i]
	c.Output, c.IsError = recordOutput(output, r.red), isError
	if t, ok := r.started[id]; ok && !at.Before(t) {
		c.DurationMS = at.Sub(t).Milliseconds()
	}
}

// stepOf numbers the model turns by their id, from 1.
func (r *externalRun) stepOf(id string) int {
	if n, ok := r.steps[id]; ok {
		return n
	}
	n := len(r.steps) + 1
	r.steps[id] = n
	return n
}

// finishCalls adds what the gates did to each call (from the hook calls of the Run).
func (r *externalRun) finishCalls() {
	for id, i := range r.byID {
		if g := r.cred.gateOf(id); g.text != "" {
			r.calls[i].Gate = r.red.clean(g.text)
			r.calls[i].IsError = r.calls[i].IsError || g.stopped
		}
	}
}

// errNoRollout is reported when Codex left no session file to read the tool calls from.
var errNoRollout = errors.New("no session file")

// findOne returns the one file under dir whose name matches pattern.
func findOne(dir, pattern string) (string, error) {
	var found []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if ok, _ := filepath.Match(pattern, d.Name()); ok {
				found = append(found, p)
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if len(found) != 1 {
		return "", errNoRollout
	}
	return found[0], nil
}

// shellQuote quotes s for a POSIX shell (the hook command is run by one).
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == ':' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

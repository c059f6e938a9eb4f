// Package bash is the executor for legacy hook scripts (runtime.KindScript): it runs
// `bash <script>` in the session's working directory under the session's sandbox policy, with
// the run contract's target on stdin, the PIXIE_* variables in a clean environment, and the
// `pixie` helper first on PATH, and answers with the exit code and the capped stdout.
//
// Every run goes through runtime/sandbox: the executor starts the sandbox verb (in the small
// pixie-sandbox program beside the pixie binary, else in the pixie binary itself), which
// contains the run's processes (PID and mount namespaces where the machine allows it, a child
// subreaper elsewhere), confines them with Landlock under the read-only and workspace-write
// policies (with the ruleset the executor builds from the walk it keeps, sandbox.ReadRules;
// failing closed with runtime.ErrUnsupported where that cannot be enforced), starts bash and
// stays as the run's init. docs/sandbox.md describes the policies, the containment and the
// environment a script sees.
//
// At the time limit, on cancellation, or as soon as stdout passes its cap, the run is stopped:
// every process it started is killed, setsid, double-forked and daemonised ones included; when
// the script ends, whatever it left running is killed too; and when the server dies, SIGKILL
// included, the verb's parent-death signal ends the run the same way.
package bash

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/scratch"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/sandbox"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// Defaults.
const (
	// DefaultTimeout bounds a run whose Request.Timeout is zero.
	DefaultTimeout = 60 * time.Second
	// DefaultMaxStderr is how much stderr is kept for the run record.
	DefaultMaxStderr = 16 * 1024
	// waitDelay bounds how long a finished run waits for its output pipes to close, in case a
	// process that left the group (setsid) still holds them.
	waitDelay = 500 * time.Millisecond
	// defaultPath is PATH (after the helper directory) when the server has none.
	defaultPath = "/usr/local/bin:/usr/bin:/bin"
)

// Config configures an Executor. The zero value works.
type Config struct {
	// Bash is the bash binary: a path, or a name looked up in PATH. Empty means "bash".
	Bash string
	// Sandbox is the command line that starts the sandbox verb; the sandbox arguments and the
	// bash command line are appended to it. Empty means the sandbox init program beside this
	// binary (sandbox.InitName, when sandbox.FindInit accepts it), else this binary
	// (os.Executable) followed by sandbox.Verb, which cmd/pixie dispatches to sandbox.Main: the
	// same code in a binary that takes longer to start (Executor.Sandbox says which and why).
	// The command must run this version's verb: it is handed options (such as the ruleset
	// descriptor) that an older one does not know.
	Sandbox []string
	// PixieBinDir is a directory holding an executable named pixie (the helper), put first on
	// the script's PATH. Empty means the executor's private directory (see TempDir), which then
	// holds a symbolic link named pixie to this binary.
	PixieBinDir string
	// Path is the rest of the script's PATH, after PixieBinDir. Empty means the server's own
	// PATH (directory names are not secrets; tools such as jq and git are found where the
	// user installed them), or "/usr/local/bin:/usr/bin:/bin" when that is empty too.
	Path string
	// Hidden are directories a sandboxed script may neither read nor write, through any of
	// their aliases (the Pixie home, which holds the admin token, the credentials, the store and
	// the blobs). They do not apply to the full policy.
	Hidden []string
	// TempDir is where the executor makes its private directory, pixie-bin-<random> (mode 0700,
	// locked while the executor lives, removed by Close, and removed by the next New if a
	// killed server left it behind), which holds each run's private temporary directory (the
	// script's TMPDIR). Empty means os.TempDir().
	TempDir string
	// MaxOutput caps stdout in bytes; a script that writes more is killed and the run fails
	// with runtime.ErrOutputTooLarge. Zero means abi.MaxOutputSize (256 KB).
	MaxOutput int
	// MaxStderr caps the stderr kept for the record; the rest is dropped. Zero means
	// DefaultMaxStderr.
	MaxStderr int
	// KillGrace is how long the process group gets between SIGTERM and SIGKILL when a run is
	// stopped. Zero means SIGKILL at once.
	KillGrace time.Duration
	// MinLandlockABI raises the Landlock ABI version the sandbox requires above
	// sandbox.MinABI. Zero means sandbox.MinABI.
	MinLandlockABI int
}

// Executor runs hook scripts. It is safe for concurrent use.
type Executor struct {
	bash     string
	sandbox  []string
	slow     string // why the sandbox is this binary rather than its init program
	scratch  *scratch.Dir
	binDir   string
	iso      sandbox.Isolation
	rules    *sandbox.ReadRules // the confined runs' rulesets, built here (Options.RulesetFD)
	readable []string           // the helper and its target, readable even inside Hidden
	path     string
	baseEnv  []string
	hidden   []string
	tempDir  string
	maxOut   int
	maxErr   int
	grace    time.Duration
	minABI   int
}

var _ runtime.Executor = (*Executor)(nil)

// inherited are the only variables copied from the server's environment: none of them carries
// a secret, and scripts expect them.
var inherited = []string{"HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ"}

// reserved variables are set by the executor and may not come from Request.Vars.
var reserved = map[string]bool{"PATH": true, "TMPDIR": true, abi.VarURL: true, abi.VarToken: true}

var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// New returns an Executor for cfg. It fails with an error wrapping runtime.ErrUnsupported when
// no bash can be found, so the binary can leave script rules unregistered.
func New(_ context.Context, cfg Config) (*Executor, error) {
	if err := supported(); err != nil {
		return nil, err
	}
	name := cfg.Bash
	if name == "" {
		name = "bash"
	}
	bash, err := exec.LookPath(name)
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, runtime.ErrUnsupported, "%s: no bash executor is available: %v", runtime.ErrUnsupported, err)
	}
	if bash, err = filepath.Abs(bash); err != nil {
		return nil, fmt.Errorf("bash: %w", err)
	}
	e := &Executor{
		bash:    bash,
		path:    cfg.Path,
		tempDir: cfg.TempDir,
		maxOut:  cfg.MaxOutput,
		maxErr:  cfg.MaxStderr,
		grace:   cfg.KillGrace,
		minABI:  cfg.MinLandlockABI,
	}
	if e.maxOut < 0 || e.maxErr < 0 || e.grace < 0 {
		return nil, errs.New(errs.Invalid, "bash executor: negative limit")
	}
	if e.maxOut == 0 {
		e.maxOut = abi.MaxOutputSize
	}
	if e.maxErr == 0 {
		e.maxErr = DefaultMaxStderr
	}
	if e.path == "" {
		e.path = os.Getenv("PATH")
	}
	if e.path == "" {
		e.path = defaultPath
	}
	if e.tempDir == "" {
		e.tempDir = os.TempDir()
	}
	for _, h := range cfg.Hidden {
		if !filepath.IsAbs(h) {
			return nil, errs.New(errs.Invalid, "bash executor: hidden directory %q is not absolute", h)
		}
		e.hidden = append(e.hidden, filepath.Clean(h))
	}
	for _, k := range inherited {
		if v, ok := os.LookupEnv(k); ok {
			e.baseEnv = append(e.baseEnv, k+"="+v)
		}
	}

	var self string
	if len(cfg.Sandbox) == 0 || cfg.PixieBinDir == "" {
		if self, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("bash executor: locating this binary: %w", err)
		}
		if self, err = filepath.EvalSymlinks(self); err != nil {
			return nil, fmt.Errorf("bash executor: locating this binary: %w", err)
		}
	}
	if len(cfg.Sandbox) == 0 {
		if e.sandbox, err = findInit(self); err != nil {
			e.sandbox, e.slow = []string{self, sandbox.Verb}, err.Error()
		}
	} else {
		e.sandbox = append([]string(nil), cfg.Sandbox...)
		if e.sandbox[0], err = exec.LookPath(e.sandbox[0]); err != nil {
			return nil, errs.Wrap(errs.Invalid, err, "bash executor: sandbox command: %v", err)
		}
	}

	// Only directories whose owner provably died (their lock is free) are removed: one without a
	// lock file may belong to a live process of another kind or version, and is left alone.
	if e.scratch, err = scratch.Open(e.tempDir, scratchPrefix, nil); err != nil {
		return nil, fmt.Errorf("bash executor: private directory: %w", err)
	}
	if cfg.PixieBinDir == "" {
		if err := os.Symlink(self, filepath.Join(e.scratch.Path(), "pixie")); err != nil {
			e.Close(context.Background())
			return nil, fmt.Errorf("bash executor: helper link: %w", err)
		}
		e.binDir = e.scratch.Path()
	} else {
		if !filepath.IsAbs(cfg.PixieBinDir) {
			e.Close(context.Background())
			return nil, errs.New(errs.Invalid, "bash executor: helper directory %q is not absolute", cfg.PixieBinDir)
		}
		e.binDir = filepath.Clean(cfg.PixieBinDir)
	}
	helper := filepath.Join(e.binDir, "pixie")
	target, err := filepath.EvalSymlinks(helper)
	if err == nil {
		var st os.FileInfo
		if st, err = os.Stat(target); err == nil && (st.IsDir() || st.Mode()&0o111 == 0) {
			err = errors.New("not an executable file")
		}
	}
	if err != nil {
		e.Close(context.Background())
		return nil, errs.Wrap(errs.Invalid, err, "bash executor: helper %s: %v", helper, err)
	}
	e.readable = []string{helper, target}
	e.iso = detect(e.sandbox)
	e.rules = sandbox.NewReadRules(e.hidden, e.iso.Namespaces)
	return e, nil
}

// scratchPrefix names the executor's private directory.
const scratchPrefix = "pixie-bin-"

// Isolation reports how this executor contains the processes of a run (sandbox.Detect).
func (e *Executor) Isolation() sandbox.Isolation { return e.iso }

// Sandbox returns the command line that starts each run's sandbox and, when it is this binary
// rather than the sandbox init program beside it (so each run takes about 10 ms more CPU), why.
func (e *Executor) Sandbox() (command []string, slow string) {
	return append([]string(nil), e.sandbox...), e.slow
}

// inits caches sandbox.FindInit per binary: it costs a start of the init program.
var inits sync.Map // string → initFound

type initFound struct {
	command []string
	err     error
}

func findInit(self string) ([]string, error) {
	if v, ok := inits.Load(self); ok {
		f := v.(initFound)
		return f.command, f.err
	}
	command, err := sandbox.FindInit(self)
	inits.Store(self, initFound{command, err})
	return command, err
}

// detected caches sandbox.Detect per sandbox command: it is a fact of the machine, and costs a
// start of the binary.
var detected sync.Map // string → sandbox.Isolation

func detect(command []string) sandbox.Isolation {
	key := strings.Join(command, "\x00")
	if v, ok := detected.Load(key); ok {
		return v.(sandbox.Isolation)
	}
	iso := sandbox.Detect(command)
	detected.Store(key, iso)
	return iso
}

// Close removes the executor's private directory.
func (e *Executor) Close(context.Context) error {
	if e.rules != nil {
		_ = e.rules.Close()
	}
	if e.scratch != nil {
		return e.scratch.Close()
	}
	return nil
}

// Run implements runtime.Executor. A script that exits, with any status, is a Result; the
// exit code is for the gate to interpret. Errors (all coded, see internal/errs) wrap
// runtime.ErrPolicyRequired, ErrNotFound, ErrUnsupported, ErrTimeout, ErrOutputTooLarge, or
// ErrTrap (the script was killed by a signal it did not get from us), or report an invalid
// request or a cancelled context. On error the Result still carries the stderr and duration
// for the record, with ExitCode -1 and never the stdout.
func (e *Executor) Run(ctx context.Context, req runtime.Request) (runtime.Result, error) {
	if err := e.check(&req); err != nil {
		return failed, err
	}
	timeout := req.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	tmp, err := os.MkdirTemp(e.scratch.Path(), "run-")
	if err != nil {
		return failed, errs.Wrap(errs.Internal, err, "script temporary directory: %v", err)
	}
	defer os.RemoveAll(tmp)

	o := sandbox.Options{
		Policy:     req.Policy,
		Cwd:        req.Cwd,
		Writable:   []string{tmp},
		Readable:   append([]string{req.Ref}, e.readable...),
		Hidden:     e.hidden,
		MinABI:     e.minABI,
		Namespaces: e.iso.Namespaces,
		StatusFD:   3,
	}
	var extra []*os.File
	if req.Policy != runtime.PolicyFull {
		// The ruleset from the walk this executor keeps (sandbox.ReadRules), so that the verb
		// does not walk the file system again; if it cannot be built here, the verb builds it
		// and says what is wrong.
		if f, flags, err := e.rules.Ruleset(o.Writable, o.Readable, e.minABI); err == nil {
			defer f.Close()
			extra = append(extra, f)
			o.RulesetFD, o.RulesetFlags = 4, flags
		}
	}
	argv := append(append([]string(nil), e.sandbox...), o.Args(e.bash, req.Ref)...)
	return e.run(ctx, argv, e.env(req, tmp), req, timeout, extra)
}

// check validates req in place (cleaning its paths).
func (e *Executor) check(req *runtime.Request) error {
	if req.Kind != runtime.KindScript && req.Kind != "" {
		return errs.New(errs.Invalid, "the bash executor runs %s rules, not %s", runtime.KindScript, req.Kind)
	}
	if req.Cwd == "" || req.Policy == "" {
		return errs.Wrap(errs.Invalid, runtime.ErrPolicyRequired, "%s", runtime.ErrPolicyRequired)
	}
	if !req.Policy.Valid() {
		return errs.New(errs.Invalid, "unknown sandbox policy %q (want %s, %s or %s)", req.Policy, runtime.PolicyReadOnly, runtime.PolicyWorkspaceWrite, runtime.PolicyFull)
	}
	if !filepath.IsAbs(req.Cwd) {
		return errs.New(errs.Invalid, "session cwd %q is not an absolute path", req.Cwd)
	}
	req.Cwd = filepath.Clean(req.Cwd)
	if st, err := os.Stat(req.Cwd); err != nil || !st.IsDir() {
		return errs.New(errs.Invalid, "session cwd %s is not a directory", req.Cwd)
	}
	if req.Timeout < 0 {
		return errs.New(errs.Invalid, "negative time limit %s", req.Timeout)
	}
	if !filepath.IsAbs(req.Ref) {
		return errs.New(errs.Invalid, "script path %q is not absolute", req.Ref)
	}
	req.Ref = filepath.Clean(req.Ref)
	st, err := os.Stat(req.Ref)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return errs.Wrap(errs.NotFound, runtime.ErrNotFound, "script %s does not exist", req.Ref)
	case err != nil:
		return errs.Wrap(errs.Invalid, err, "script %s: %v", req.Ref, err)
	case !st.Mode().IsRegular():
		return errs.New(errs.Invalid, "script %s is not a regular file", req.Ref)
	}
	for k, v := range req.Vars {
		if !varName.MatchString(k) {
			return errs.New(errs.Invalid, "variable name %q is not valid", k)
		}
		if reserved[k] {
			return errs.New(errs.Invalid, "variable %s is set by the executor", k)
		}
		if strings.ContainsRune(v, 0) {
			return errs.New(errs.Invalid, "variable %s holds a NUL byte", k)
		}
	}
	if strings.ContainsRune(req.HelperURL, 0) || strings.ContainsRune(req.HelperToken, 0) {
		return errs.New(errs.Invalid, "helper URL or token holds a NUL byte")
	}
	return nil
}

// env is the script's whole environment: nothing of the server's but the inherited names.
func (e *Executor) env(req runtime.Request, tmp string) []string {
	env := append([]string{"PATH=" + e.binDir + string(os.PathListSeparator) + e.path, "TMPDIR=" + tmp}, e.baseEnv...)
	keys := make([]string, 0, len(req.Vars))
	for k := range req.Vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+req.Vars[k])
	}
	if req.HelperURL != "" {
		env = append(env, abi.VarURL+"="+req.HelperURL)
	}
	if req.HelperToken != "" {
		env = append(env, abi.VarToken+"="+req.HelperToken)
	}
	return env
}

// failed is the Result returned with errors that happen before the script runs.
var failed = runtime.Result{ExitCode: -1}

// trimBoundaryNewlines removes leading and trailing line breaks ("\n" or "\r\n") and nothing
// else.
func trimBoundaryNewlines(s string) string {
	for {
		if t, ok := strings.CutPrefix(s, "\n"); ok {
			s = t
		} else if t, ok := strings.CutPrefix(s, "\r\n"); ok {
			s = t
		} else {
			break
		}
	}
	for {
		t, ok := strings.CutSuffix(s, "\n")
		if !ok {
			return s
		}
		s = strings.TrimSuffix(t, "\r")
	}
}

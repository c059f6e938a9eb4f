package wasm

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero/sys"

	"github.com/pixie-dev/pixie/hostfuncs"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// Source resolves module references and loads module bodies; *modules.Registry implements it.
type Source interface {
	// Resolve returns the sha256 of the module ref names (a name or a sha256), or an
	// errs.NotFound error.
	Resolve(ctx context.Context, ref string) (string, error)
	// Load returns the body of the module with sha256 sha.
	Load(ctx context.Context, sha string) ([]byte, error)
}

// Executor runs KindModule rules. It is safe for concurrent use.
type Executor struct {
	e   *engine
	src Source
	// base is the context of background work (compiling, refilling pools); Close cancels it.
	base   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	mods   map[string]*module
	lru    *list.List // of *module, most recent first
	closed bool

	// dirs remembers the cwds recently found to be directories (mountDir).
	dirs dirCache
	// budget is the memory budget of every linear memory and snapshot (budget.go).
	budget *memBudget
	// untracked turns write tracking off (tests of the reset that copies everything back).
	untracked bool
	// adm bounds the runs executing at once (admission.go).
	adm *admission
}

var _ runtime.Executor = (*Executor)(nil)

// New returns an executor reading modules from cfg.Source.
func New(ctx context.Context, cfg Config) (*Executor, error) {
	src := cfg.Source
	if src == nil {
		return nil, errors.New("wasm: a module source is required")
	}
	e, err := newEngine(cfg)
	if err != nil {
		return nil, err
	}
	lim := cfg.Limits
	if lim == nil {
		lim = NewLimits(cfg)
	}
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return &Executor{e: e, src: src, base: base, cancel: cancel, mods: map[string]*module{}, lru: list.New(),
		budget: lim.budget, adm: lim.adm}, nil
}

// Close stops background work and releases every compiled module and instance.
func (x *Executor) Close(ctx context.Context) error {
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return nil
	}
	x.closed = true
	mods := x.mods
	x.mods = map[string]*module{}
	x.lru.Init()
	x.mu.Unlock()
	x.cancel()
	for _, m := range mods {
		m.evict()
	}
	x.wg.Wait()
	return nil
}

// Warm compiles the module ref names and fills its instance pool, waiting until the pool is
// full or ctx ends. The server may call it for the modules that saved gates use.
func (x *Executor) Warm(ctx context.Context, ref string) error {
	sha, err := x.resolve(ctx, ref)
	if err != nil {
		return err
	}
	m, err := x.module(ctx, sha)
	if err != nil {
		return err
	}
	defer m.release()
	for {
		if len(m.idle) >= min(x.e.cfg.PoolSize, cap(m.idle)) {
			return nil
		}
		// Only a pool short of instances wakes the worker: a wake left pending on a full pool
		// would top it up after the next run takes one, racing that run's own instance back.
		m.kick()
		if err := m.lastInitErr(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

func (x *Executor) resolve(ctx context.Context, ref string) (string, error) {
	if ref == "" {
		return "", fmt.Errorf("%w: the rule names no module", runtime.ErrNotFound)
	}
	sha, err := x.src.Resolve(ctx, ref)
	if err != nil {
		if errs.Is(err, errs.NotFound) {
			return "", fmt.Errorf("%w: %w", runtime.ErrNotFound, err)
		}
		return "", fmt.Errorf("wasm: resolve module %q: %w", ref, err)
	}
	return sha, nil
}

// Run implements runtime.Executor.
func (x *Executor) Run(ctx context.Context, req runtime.Request) (runtime.Result, error) {
	start := time.Now()
	if req.Kind != runtime.KindModule {
		return runtime.Result{}, fmt.Errorf("%w: the WASM executor runs modules, not %s rules", runtime.ErrUnsupported, req.Kind)
	}
	entry := req.Entry
	if entry == "" {
		entry = abi.EntryGate
	}
	if len(req.Target) > x.e.cfg.MaxInput {
		return runtime.Result{}, errs.New(errs.TooLarge, "the target is %d bytes; a module's input limit is %d", len(req.Target), x.e.cfg.MaxInput)
	}
	mount := ""
	if req.MountCwd {
		var err error
		if mount, err = x.mountDir(req); err != nil {
			return runtime.Result{}, err
		}
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	sha, err := x.resolve(ctx, req.Ref)
	if err != nil {
		return runtime.Result{}, err
	}
	m, err := x.module(ctx, sha)
	if err != nil {
		return runtime.Result{}, timeoutOr(ctx, err)
	}
	t, err := x.adm.acquire(ctx, m.health.unhealthy())
	if err != nil {
		m.release()
		return runtime.Result{}, timeoutOr(ctx, err)
	}
	inst, err := m.take(ctx)
	if err != nil {
		t.release()
		m.release()
		return runtime.Result{}, timeoutOr(ctx, err)
	}
	inst.ticket = t
	t.health = &m.health
	// After the run the slot is given back; then (after the answer when the caller defers
	// work: req.After) a healthy instance is reset and goes back to the pool, any other is
	// closed (pool.go). The module is held until then.
	healthy := false
	defer func() {
		t.finish()
		inst.ticket = nil
		if !healthy {
			m.health.fault()
		}
		runtime.Defer(req.After, func() {
			m.recycle(inst, healthy)
			m.release()
		})
	}()
	if mount != "" {
		if err := inst.mount.bind(mount, x.e.cfg.Hidden); err != nil {
			return runtime.Result{}, err
		}
	}
	if !m.exports(inst, entry) {
		healthy = true
		return runtime.Result{}, fmt.Errorf("%w: module %s does not export %q", runtime.ErrNotFound, req.Ref, entry)
	}

	var helper hostfuncs.Helper
	if req.Helper != nil {
		helper = req.Helper
	}
	if helper != nil {
		helper = &slotHelper{h: helper, t: t}
	}
	run := hostfuncs.NewRun(helper, req.PetContext, hostfuncs.Limits{MaxHostCalls: x.e.cfg.MaxHostCalls})
	run.SetContext(req.Target, req.Vars)
	inst.p.Config = req.Vars // read-only to Extism; the reset clears it
	var (
		rc      uint32
		out     []byte
		callErr error
	)
	call := func(ctx context.Context) {
		t.ctx = ctx
		t.start = time.Now()
		rc, out, callErr = inst.call(hostfuncs.WithRun(ctx, run), entry, []byte(req.Target))
	}
	if t.bg {
		onIdleThread(ctx, call) // a faulting module's run: on an idle thread (lower.go)
	} else {
		call(ctx)
	}
	res := runtime.Result{ExitCode: int(int32(rc)), Stderr: inst.out.String(), Duration: time.Since(start)}
	if callErr != nil {
		var ge *guestError
		healthy = errors.As(callErr, &ge) // an error the guest reported: a result, not a fault
		if !healthy && inst.budgetRefused() {
			return res, fmt.Errorf("%w: the guest ran out of memory: %w", runtime.ErrTrap, budgetError(x.budget, 0))
		}
		return x.failed(ctx, res, callErr, timeout)
	}
	if len(out) > x.e.cfg.MaxOutput {
		return res, fmt.Errorf("%w: %d bytes; the cap is %d", runtime.ErrOutputTooLarge, len(out), x.e.cfg.MaxOutput)
	}
	healthy = true
	res.Stdout = strings.Trim(string(out), "\r\n")
	return res, nil
}

// failed classifies a failed call: a timeout, a guest that exited (Go panics and
// out-of-memory), a trap, or an error the guest reported itself (sdk.Fail), which is a normal
// result with a non-zero exit code and the message in Stderr.
func (x *Executor) failed(ctx context.Context, res runtime.Result, err error, timeout time.Duration) (runtime.Result, error) {
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		switch exit.ExitCode() {
		case sys.ExitCodeDeadlineExceeded:
			return res, fmt.Errorf("%w after %s", runtime.ErrTimeout, timeout)
		case sys.ExitCodeContextCanceled:
			return res, fmt.Errorf("%w: the run was cancelled: %w", runtime.ErrTimeout, context.Canceled)
		}
		return res, fmt.Errorf("%w: the guest exited with status %d%s", runtime.ErrTrap, exit.ExitCode(), firstLine(res.Stderr))
	}
	if cause, ok := isInterrupt(err); ok || ctx.Err() != nil {
		if cause == nil {
			cause = ctx.Err()
		}
		if errors.Is(cause, context.Canceled) {
			return res, fmt.Errorf("%w: the run was cancelled: %w", runtime.ErrTimeout, context.Canceled)
		}
		return res, fmt.Errorf("%w after %s", runtime.ErrTimeout, timeout)
	}
	var ge *guestError
	if errors.As(err, &ge) {
		if res.ExitCode == abi.ExitContinue || res.ExitCode == abi.ExitSkip || res.ExitCode == abi.ExitConclude {
			res.ExitCode = 1
		}
		if res.Stderr != "" && !strings.HasSuffix(res.Stderr, "\n") {
			res.Stderr += "\n"
		}
		res.Stderr += ge.msg
		return res, nil
	}
	return res, fmt.Errorf("%w: %s%s", runtime.ErrTrap, strings.TrimPrefix(firstLine(err.Error()), ": "), firstLine(res.Stderr))
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return ": " + s
}

// timeoutOr wraps err as a timeout when ctx's deadline passed.
func timeoutOr(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", runtime.ErrTimeout, err)
	}
	return err
}

// mountDir checks that a cwd mount may be granted: a known sandbox policy and an existing
// absolute directory. Every policy lets a session read its cwd, so each grants the read-only
// mount.
func (x *Executor) mountDir(req runtime.Request) (string, error) {
	if !req.Policy.Valid() || req.Cwd == "" {
		return "", runtime.ErrPolicyRequired
	}
	if !filepath.IsAbs(req.Cwd) {
		return "", fmt.Errorf("%w: cwd %q is not absolute", runtime.ErrPolicyRequired, req.Cwd)
	}
	dir := filepath.Clean(req.Cwd)
	if !x.dirs.isDir(dir) {
		return "", errs.New(errs.Invalid, "the session cwd %s is not a directory", req.Cwd)
	}
	return dir, nil
}

// dirCheckTTL is how long a cwd found to be a directory is trusted without looking again.
// A session runs many gates in one cwd, and the stat costs tens of µs on a run's path; a
// cwd removed meanwhile makes the guest's file operations fail (ENOENT) instead.
const dirCheckTTL = time.Second

// dirCache remembers, for dirCheckTTL, the paths found to be directories. Failures are not
// remembered: a cwd created a moment later works at once. The zero value is ready to use.
type dirCache struct {
	mu   sync.Mutex
	seen map[string]time.Time // path → when it was found to be a directory
	// now and stat are time.Now and os.Stat; tests replace them.
	now  func() time.Time
	stat func(string) (os.FileInfo, error)
}

// maxDirCache bounds the cache; it is emptied when full.
const maxDirCache = 1024

func (c *dirCache) isDir(path string) bool {
	now, stat := time.Now, os.Stat
	if c.now != nil {
		now, stat = c.now, c.stat
	}
	t := now()
	c.mu.Lock()
	at, ok := c.seen[path]
	c.mu.Unlock()
	if ok && t.Sub(at) < dirCheckTTL && t.Sub(at) >= 0 {
		return true
	}
	st, err := stat(path)
	if err != nil || !st.IsDir() {
		c.mu.Lock()
		delete(c.seen, path)
		c.mu.Unlock()
		return false
	}
	c.mu.Lock()
	if c.seen == nil || len(c.seen) >= maxDirCache {
		c.seen = make(map[string]time.Time)
	}
	c.seen[path] = t
	c.mu.Unlock()
	return true
}

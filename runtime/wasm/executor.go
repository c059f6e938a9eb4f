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
	"sync/atomic"
	"time"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/pixie-dev/pixie/hostfuncs"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/later"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/wasm/internal/extismx"
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
}

var _ runtime.Executor = (*Executor)(nil)

// New returns an executor reading modules from src.
func New(ctx context.Context, cfg Config, src Source) (*Executor, error) {
	if src == nil {
		return nil, errors.New("wasm: a module source is required")
	}
	e, err := newEngine(cfg)
	if err != nil {
		return nil, err
	}
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return &Executor{e: e, src: src, base: base, cancel: cancel, mods: map[string]*module{}, lru: list.New()}, nil
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
	m.kick()
	for {
		if len(m.pool) >= cap(m.pool) {
			return nil
		}
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
	defer m.release()

	inst, err := m.take(ctx)
	if err != nil {
		return runtime.Result{}, timeoutOr(ctx, err)
	}
	// Single use: whatever happens, this instance is closed after the call, by the module's
	// worker, which then tops the pool up (not before the call, so as not to compete with it,
	// and after the answer when the caller defers work: internal/later).
	defer m.discard(ctx, inst)
	if mount != "" {
		if err := inst.mount.bind(mount, x.e.cfg.Hidden); err != nil {
			return runtime.Result{}, err
		}
	}
	if !m.exports(inst, entry) {
		return runtime.Result{}, fmt.Errorf("%w: module %s does not export %q", runtime.ErrNotFound, req.Ref, entry)
	}

	var helper hostfuncs.Helper
	if req.Helper != nil {
		helper = req.Helper
	}
	run := hostfuncs.NewRun(helper, req.PetContext, hostfuncs.Limits{MaxHostCalls: x.e.cfg.MaxHostCalls})
	run.SetContext(req.Target, req.Vars)
	inst.p.Config = req.Vars // read-only to Extism, and the instance is gone after this run
	rc, out, callErr := inst.call(hostfuncs.WithRun(ctx, run), entry, []byte(req.Target))
	res := runtime.Result{ExitCode: int(int32(rc)), Stderr: inst.out.String(), Duration: time.Since(start)}
	if callErr != nil {
		return x.failed(ctx, inst, res, callErr, timeout)
	}
	if len(out) > x.e.cfg.MaxOutput {
		return res, fmt.Errorf("%w: %d bytes; the cap is %d", runtime.ErrOutputTooLarge, len(out), x.e.cfg.MaxOutput)
	}
	res.Stdout = strings.Trim(string(out), "\r\n")
	return res, nil
}

// failed classifies a failed call: a timeout, a guest that exited (Go panics and
// out-of-memory), a trap, or an error the guest reported itself (sdk.Fail), which is a normal
// result with a non-zero exit code and the message in Stderr.
func (x *Executor) failed(ctx context.Context, inst *instance, res runtime.Result, err error, timeout time.Duration) (runtime.Result, error) {
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
	if msg := inst.p.GetErrorWithContext(context.WithoutCancel(ctx)); msg != "" && msg == err.Error() {
		if res.ExitCode == abi.ExitContinue || res.ExitCode == abi.ExitSkip || res.ExitCode == abi.ExitConclude {
			res.ExitCode = 1
		}
		if res.Stderr != "" && !strings.HasSuffix(res.Stderr, "\n") {
			res.Stderr += "\n"
		}
		res.Stderr += msg
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

// discard hands a used instance to the module's worker, which closes it (unmapping its
// memory, which takes as long as the rule's call) and then refills the pool, off the run's path.
// The instance is closed here when the worker is far behind.
func (m *module) discard(ctx context.Context, inst *instance) {
	select {
	case m.trash <- inst:
	default:
		inst.close()
	}
	later.Do(ctx, m.kick) // waking the worker wakes a CPU
}

// module returns the compiled module sha, compiling it on first use; the caller must release
// it.
func (x *Executor) module(ctx context.Context, sha string) (*module, error) {
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return nil, errs.New(errs.Unavailable, "the WASM executor is closed")
	}
	m, ok := x.mods[sha]
	if ok {
		x.lru.MoveToFront(m.elem)
		m.acquire()
		x.mu.Unlock()
	} else {
		m = &module{x: x, sha: sha, ready: make(chan struct{}), pool: make(chan *instance, x.e.cfg.PoolSize), trash: make(chan *instance, maxTrash), kickc: make(chan struct{}, 1), done: make(chan struct{})}
		m.ctx, m.cancel = context.WithCancel(x.base)
		m.elem = x.lru.PushFront(m)
		x.mods[sha] = m
		m.acquire()
		evict := x.trimLocked()
		x.mu.Unlock()
		for _, o := range evict {
			o.evict()
		}
		x.wg.Add(1)
		go func() {
			defer x.wg.Done()
			m.compile()
		}()
	}
	select {
	case <-m.ready:
	case <-ctx.Done():
		m.release()
		return nil, fmt.Errorf("wasm: compiling module %s: %w", sha[:12], ctx.Err())
	}
	if m.err != nil {
		m.release()
		x.forget(m)
		return nil, m.err
	}
	return m, nil
}

// trimLocked removes the least recently used modules past MaxModules and returns them.
func (x *Executor) trimLocked() []*module {
	var out []*module
	for x.lru.Len() > x.e.cfg.MaxModules {
		m := x.lru.Remove(x.lru.Back()).(*module)
		delete(x.mods, m.sha)
		out = append(out, m)
	}
	return out
}

func (x *Executor) forget(m *module) {
	x.mu.Lock()
	if x.mods[m.sha] == m {
		delete(x.mods, m.sha)
		x.lru.Remove(m.elem)
	}
	x.mu.Unlock()
	m.evict()
}

// module is one compiled module and its pool.
type module struct {
	x     *Executor
	sha   string
	elem  *list.Element
	ready chan struct{} // closed when compiled (or failed)
	err   error
	cp    *extism.CompiledPlugin
	cache wazero.CompilationCache // this module's: closing it frees the compiled code

	pool  chan *instance
	trash chan *instance // used instances waiting to be closed
	kickc chan struct{}
	done  chan struct{} // closed on eviction
	// ctx is the context of the module's background work, cancelled on eviction.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	active  int
	evicted bool
	initErr error
	// made counts the instances created (for tests).
	made atomic.Int64
	// entries caches which entry points the module exports (asking an instance costs an
	// allocation of a call stack).
	entries sync.Map
}

// exports reports whether the module exports the function entry.
func (m *module) exports(inst *instance, entry string) bool {
	if ok, found := m.entries.Load(entry); found {
		return ok.(bool)
	}
	ok := inst.p.FunctionExists(entry)
	m.entries.Store(entry, ok)
	return ok
}

func (m *module) acquire() {
	m.mu.Lock()
	m.active++
	m.mu.Unlock()
}

// tryAcquire is acquire unless the module was evicted.
func (m *module) tryAcquire() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.evicted {
		return false
	}
	m.active++
	return true
}

// release ends one use; the last use of an evicted module closes it.
func (m *module) release() {
	m.mu.Lock()
	m.active--
	closeNow := m.evicted && m.active == 0
	m.mu.Unlock()
	if closeNow {
		m.closeCompiled()
	}
}

func (m *module) evict() {
	m.mu.Lock()
	if m.evicted {
		m.mu.Unlock()
		return
	}
	m.evicted = true
	closeNow := m.active == 0
	close(m.done)
	m.cancel() // interrupts a guest the worker is preparing
	m.mu.Unlock()
	if closeNow {
		m.closeCompiled()
	}
}

func (m *module) closeCompiled() {
	<-m.ready
	for {
		select {
		case inst := <-m.pool:
			inst.close()
			continue
		case inst := <-m.trash:
			inst.close()
			continue
		default:
		}
		break
	}
	if m.cp != nil {
		_ = m.cp.Close(context.Background())
		_ = m.cache.Close(context.Background())
	}
}

func (m *module) compile() {
	defer close(m.ready)
	ctx := m.x.base
	wasm, err := m.x.src.Load(ctx, m.sha)
	if err != nil {
		m.err = fmt.Errorf("wasm: load module %s: %w", m.sha[:12], err)
		return
	}
	cache, err := m.x.e.newCache()
	if err != nil {
		m.err = err
		return
	}
	prep, err := m.x.e.prepare(wasm)
	if err != nil {
		_ = cache.Close(ctx)
		m.err = fmt.Errorf("%w: module %s cannot be run with a time limit: %v", runtime.ErrTrap, m.sha[:12], err)
		return
	}
	cp, err := m.x.e.compile(ctx, cache, prep)
	if err != nil {
		_ = cache.Close(ctx)
		m.err = fmt.Errorf("%w: module %s does not compile: %v", runtime.ErrTrap, m.sha[:12], err)
		return
	}
	m.cp, m.cache = cp, cache
	m.x.wg.Add(1)
	go func() {
		defer m.x.wg.Done()
		m.refill()
	}()
	m.kick()
}

// kick asks the module's worker to close used instances and top the pool up.
func (m *module) kick() {
	select {
	case m.kickc <- struct{}{}:
	default:
	}
}

func (m *module) lastInitErr() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.initErr
}

// refill is the module's worker until the module is evicted: on each kick it closes the used
// instances, then fills the pool. An instance that fails to start stops the refill until the
// next kick, and the error is kept for Warm.
func (m *module) refill() {
	for {
		select {
		case <-m.done:
			return
		case <-m.kickc:
		}
		// While the pool still holds an instance, the run that kicked finishes its answer
		// first: making an instance keeps a CPU busy for milliseconds (and its guest code
		// cannot be preempted), which on a small machine would hold the answer back.
		if len(m.pool) > 0 {
			select {
			case <-m.done:
				return
			case <-time.After(refillDelay):
			}
		}
		for drained := false; !drained; {
			select {
			case inst := <-m.trash:
				inst.close()
			default:
				drained = true
			}
		}
		for len(m.pool) < cap(m.pool) {
			// The worker holds the module like a run does: an eviction while it prepares an
			// instance interrupts the guest (the context) but closes the compiled module only
			// when the worker lets go, never under running guest code (whose memory closing
			// would unmap).
			if !m.tryAcquire() {
				return
			}
			ctx, cancel := context.WithTimeout(m.ctx, DefaultInitTimeout)
			inst, err := m.newInstance(ctx)
			cancel()
			m.mu.Lock()
			m.initErr = err
			m.mu.Unlock()
			if err == nil {
				select {
				case m.pool <- inst:
				default:
					inst.close()
				}
			}
			m.release() // the last use of an evicted module closes it, and the pool with it
			if err != nil {
				break
			}
		}
	}
}

// take returns a pooled instance, or a new one when the pool is empty. The caller kicks the
// refill when it is done with the instance.
func (m *module) take(ctx context.Context) (*instance, error) {
	select {
	case inst := <-m.pool:
		return inst, nil
	default:
	}
	return m.newInstance(ctx)
}

// instance is one single-use plug-in instance.
type instance struct {
	instanceRun
	p     *extism.Plugin
	out   *capBuffer
	mount *lateMount
	// mods are the instance's guest and kernel modules, registered with the engine's checks.
	mods   []api.Module
	checks *checks
}

// call calls the guest's function entry with input, interruptible through ctx (interrupt.go).
func (i *instance) call(ctx context.Context, entry string, input []byte) (uint32, []byte, error) {
	i.run.Store(&runState{ctx: ctx})
	defer i.run.Store(nil)
	return i.p.CallWithContext(ctx, entry, input)
}

// newInstance instantiates the module with an unbound mount at MountPath, and pre-initialises
// the guest runtime through abi.EntryInit when the module exports it.
func (m *module) newInstance(ctx context.Context) (*instance, error) {
	m.made.Add(1)
	out := &capBuffer{max: maxStderr}
	mount := &lateMount{}
	p, err := m.cp.Instance(withMemory(ctx), extism.PluginInstanceConfig{ModuleConfig: moduleConfig(out, mount)})
	if err != nil {
		return nil, fmt.Errorf("%w: instantiate module %s: %v", runtime.ErrTrap, m.sha[:12], err)
	}
	inst := &instance{p: p, out: out, mount: mount, checks: &m.x.e.checks}
	guest, err := extismx.MainModule(p)
	if err == nil {
		var k api.Module
		if k, err = extismx.KernelModule(p); err == nil {
			inst.mods = []api.Module{guest, k}
			inst.checks.add(inst, inst.mods...)
		}
	}
	if err != nil {
		inst.close()
		return nil, fmt.Errorf("%w: instantiate module %s: %v", runtime.ErrTrap, m.sha[:12], err)
	}
	if p.FunctionExists(abi.EntryInit) {
		if _, _, err := inst.call(ctx, abi.EntryInit, nil); err != nil {
			inst.close()
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%w: initialising module %s", runtime.ErrTimeout, m.sha[:12])
			}
			return nil, fmt.Errorf("%w: initialise module %s: %v%s", runtime.ErrTrap, m.sha[:12], err, firstLine(out.String()))
		}
	}
	return inst, nil
}

func (i *instance) close() {
	_ = i.p.Close(context.Background())
	if i.checks != nil {
		i.checks.remove(i.mods...)
	}
}

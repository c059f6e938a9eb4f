package wasm

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/wasm/internal/instrument"
)

// module is one compiled module, its snapshot and its pool of instances (pool.go).
type module struct {
	x     *Executor
	sha   string
	elem  *list.Element
	ready chan struct{} // closed when compiled (or failed)
	err   error
	cp    *extism.CompiledPlugin
	cache wazero.CompilationCache // this module's: closing it frees the compiled code
	info  *instrument.Result      // what the rewrite says of the module

	// reuse is whether instances are reset to the snapshot and reused (reset.go); decided when
	// the first instance is made. Otherwise every instance serves one run.
	reuse atomic.Bool
	// snap is the snapshot every reused instance starts each run from; set once, by the first
	// instance, under snapMu.
	snapMu   sync.Mutex
	snap     atomic.Pointer[snapshot]
	snapDone bool
	// why says why instances are not reused (for tests and /v1/info).
	why atomic.Pointer[string]

	idle  chan *instance // ready instances
	kickc chan struct{}
	done  chan struct{} // closed on eviction
	// ctx is the context of the module's background work, cancelled on eviction.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	active  int
	evicted bool
	initErr error
	// made counts the instances created, cloned the ones made from the snapshot, resets the
	// resets (for tests).
	made, cloned, resets atomic.Int64
	// entries caches which entry points the module exports.
	entries sync.Map
	// health is the module's recent faults (admission.go).
	health health
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
		m = &module{x: x, sha: sha, ready: make(chan struct{}), idle: make(chan *instance, x.idleCap()),
			kickc: make(chan struct{}, 1), done: make(chan struct{})}
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

// exports reports whether the module exports the function entry.
func (m *module) exports(inst *instance, entry string) bool {
	if ok, found := m.entries.Load(entry); found {
		return ok.(bool)
	}
	ok := inst.guest.ExportedFunction(entry) != nil
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

func (m *module) isEvicted() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.evicted
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
		case inst := <-m.idle:
			inst.close()
			continue
		default:
		}
		break
	}
	if s := m.snap.Load(); s != nil {
		s.release(m.x.budget)
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
	// The rewritten bytes are compiled; keeping them would cost their size (3.6 MB for a Go
	// guest) for every module held.
	prep.info.Wasm = nil
	m.cp, m.cache, m.info = cp, cache, prep.info
	m.x.wg.Add(1)
	go func() {
		defer m.x.wg.Done()
		m.refill()
	}()
	m.kick()
}

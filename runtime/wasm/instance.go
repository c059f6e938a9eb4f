package wasm

import (
	"context"
	"errors"
	"fmt"
	"unsafe"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/wasm/internal/extismx"
	"github.com/pixie-dev/pixie/runtime/wasm/internal/instrument"
	"github.com/pixie-dev/pixie/runtime/wasm/internal/wazerox"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// instance is one plug-in instance: Extism's plug-in (its kernel and host functions, its
// Go-side state) around the guest module, with the handles Pixie calls through.
//
// Pixie drives a run's calls itself instead of through Extism's Plugin.CallWithContext, which
// looks up seven exported functions per call (each lookup builds a wazero call engine) and
// calls the kernel with context.Background(): the kernel's functions are looked up once per
// instance, every call gets the run's context, and the host functions get a memory that calls
// the kernel the same way. It is still Extism's kernel (instrumented) and Extism's host
// functions; the call sequence is CallWithContext's (reset, input, the entry point, the error,
// the output).
type instance struct {
	instanceRun
	m      *module
	p      *extism.Plugin
	guest  api.Module
	kernel api.Module
	out    *capBuffer
	mount  *lateMount
	checks *checks

	// kmem is the kernel's memory (Extism memory blocks live there).
	kmem api.Memory
	// k are the kernel's functions.
	k struct{ reset, alloc, inputSet, errorGet, length, outputOffset, outputLength api.Function }
	// kfwd are the kernel's functions the guest calls through Extism's env module
	// (extismx.Forwarded), looked up at first use (kernelFunc).
	kfwd [len(extismx.Forwarded)]api.Function
	// entries are the guest's functions looked up so far.
	entries map[string]api.Function
	// stack is for calls Pixie makes around the guest's call; hstack for those host functions
	// make during it.
	stack, hstack [2]uint64

	// For the reset (reset.go): the guest's and the kernel's linear memories and mutable
	// globals (in the order of the snapshot's values), and the descriptor table.
	gmem, kmemory *mmapMemory
	globals       []api.MutableGlobal
	fds           *wazerox.FDs
	fdSnap        *wazerox.FDSnapshot
	// snap is the snapshot the instance is reset to (adopt); ownSnap: its own, released with it.
	snap    *snapshot
	ownSnap bool
	cloned  bool
	// copied is how many bytes the last reset copied back (for benchmarks).
	copied int
	// ticket is the run's admission (admission.go), seen by the checks.
	ticket *ticket
}

// budgetRefused reports whether one of the instance's memories was refused growth by the budget.
func (i *instance) budgetRefused() bool {
	return (i.gmem != nil && i.gmem.refused) || (i.kmemory != nil && i.kmemory.refused)
}

// newInstance makes an instance ready to run: instantiated with an unbound mount at
// MountPath, and then either cloned from the module's snapshot or initialised (the guest
// runtime's start, then abi.EntryInit when the module exports it). The first instance of a
// module whose instances can be reused takes the snapshot.
func (m *module) newInstance(ctx context.Context) (*instance, error) {
	m.made.Add(1)
	snap := m.snap.Load()
	alloc := &memAllocator{budget: m.x.budget, untracked: m.x.untracked, lazy: snap != nil && snap.cloneable}
	out := &capBuffer{max: maxStderr}
	mount := &lateMount{}
	p, err := m.cp.Instance(withMemory(ctx, alloc), extism.PluginInstanceConfig{ModuleConfig: moduleConfig(out, mount)})
	if err != nil {
		if alloc.refused() {
			return nil, budgetError(m.x.budget, 0)
		}
		if _, ok := isInterrupt(err); ok || ctx.Err() != nil {
			return nil, fmt.Errorf("%w: instantiating module %s", runtime.ErrTimeout, m.sha[:12])
		}
		return nil, fmt.Errorf("%w: instantiate module %s: %v", runtime.ErrTrap, m.sha[:12], err)
	}
	inst := &instance{m: m, p: p, out: out, mount: mount, checks: &m.x.e.checks, entries: map[string]api.Function{}}
	switch {
	case alloc.refused():
		inst.close()
		return nil, budgetError(m.x.budget, 0)
	case alloc.failed():
		inst.close()
		return nil, fmt.Errorf("%w: instantiate module %s: a linear memory cannot be mapped", runtime.ErrTrap, m.sha[:12])
	}
	if err := inst.bind(alloc); err != nil {
		inst.close()
		return nil, fmt.Errorf("%w: instantiate module %s: %v", runtime.ErrTrap, m.sha[:12], err)
	}
	if snap != nil && snap.cloneable {
		err = inst.clone(snap)
		m.cloned.Add(1)
		for _, mem := range []*mmapMemory{inst.gmem, inst.kmemory} {
			if mem != nil {
				mem.lazy = false // a run's growth is made resident as it happens
			}
		}
	} else {
		err = m.initialise(ctx, inst)
	}
	if err != nil {
		inst.close()
		if alloc.refused() {
			return nil, budgetError(m.x.budget, 0)
		}
		return nil, err
	}
	if m.reuse.Load() {
		if err := inst.adopt(); err != nil {
			inst.close()
			return nil, fmt.Errorf("%w: prepare an instance of module %s: %v", runtime.ErrTrap, m.sha[:12], err)
		}
		inst.fdSnap = inst.fds.Snapshot()
		inst.protect()
	}
	return inst, nil
}

// adopt sets the snapshot inst is reset to. An instance made from the module's snapshot (or
// the one that took it) uses it; one initialised by itself (it raced the first instance) is
// first made the snapshot's copy when the module can be cloned, and keeps a snapshot of its
// own otherwise: a reset puts back only the pages a run wrote, so an instance must be byte for
// byte its snapshot when tracking starts.
func (i *instance) adopt() error {
	s := i.m.snap.Load()
	switch {
	case i.snap != nil:
		return nil
	case i.cloned:
		i.snap = s
		return nil
	case s.cloneable:
		i.snap = s
		return i.clone(s)
	}
	own, err := i.takeSnapshot(i.m.x.budget)
	if err != nil {
		return err
	}
	i.snap, i.ownSnap = own, true
	return nil
}

// initialise runs the guest's initialisation in inst and, for the module's first instance,
// decides whether instances are reused and takes the snapshot.
func (m *module) initialise(ctx context.Context, inst *instance) error {
	var before *wazerox.FDSnapshot
	if inst.fds != nil {
		before = inst.fds.Snapshot()
	}
	if err := inst.initialise(ctx); err != nil {
		if _, ok := isInterrupt(err); ok || ctx.Err() != nil {
			return fmt.Errorf("%w: initialising module %s", runtime.ErrTimeout, m.sha[:12])
		}
		return fmt.Errorf("%w: initialise module %s: %v%s", runtime.ErrTrap, m.sha[:12], err, firstLine(inst.out.String()))
	}
	m.snapMu.Lock()
	defer m.snapMu.Unlock()
	if m.snapDone {
		return nil
	}
	m.snapDone = true
	why := m.resettable(inst)
	if why != "" {
		m.why.Store(&why)
		return nil
	}
	s, err := inst.takeSnapshot(m.x.budget)
	if err == nil && !inst.refGlobalsNull(s) {
		s.release(m.x.budget)
		s, err = nil, errors.New("a mutable reference global holds a reference after initialisation")
	}
	if err != nil {
		why = err.Error()
		m.why.Store(&why)
		return nil
	}
	// A clone is instantiated and given the snapshot's memory and globals; that is the same as
	// initialising it only if initialisation left the descriptor table as instantiation made it.
	s.cloneable = inst.fds.Same(before)
	inst.snap = s
	m.snap.Store(s)
	m.reuse.Store(true)
	return nil
}

// refGlobalsNull reports whether every mutable reference global is null in s (the only
// reference a reset may put back: a reference of one instance means nothing in another).
func (i *instance) refGlobalsNull(s *snapshot) bool {
	for k, g := range i.m.info.Globals {
		if g.IsRef() && s.globals[k] != 0 {
			return false
		}
	}
	k, _ := kernel()
	base := len(i.m.info.Globals) + 2 // the two fuel globals
	for j, g := range k.Globals {
		if g.IsRef() && s.globals[base+j] != 0 {
			return false
		}
	}
	return true
}

// resettable says why inst's module cannot be reset to a snapshot ("" when it can).
func (m *module) resettable(inst *instance) string {
	switch {
	case !m.info.Resettable:
		return m.info.NotResettable
	case m.x.e.cfg.PoolSize == 0: // Config.PoolSize < 0
		return "the pool is disabled"
	case inst.fds == nil:
		return "its WASI state cannot be reached"
	case inst.gmem == nil && inst.guest.Memory() != nil, inst.kmemory == nil:
		return "its memories are not Pixie's"
	}
	return ""
}

// bind finds what the instance's runs need in the plug-in alloc made.
func (i *instance) bind(alloc *memAllocator) error {
	var err error
	if i.guest, err = extismx.MainModule(i.p); err != nil {
		return err
	}
	if i.kernel, err = extismx.KernelModule(i.p); err != nil {
		return err
	}
	i.checks.add(i, i.guest, i.kernel)
	i.kmem = i.kernel.Memory()
	for name, f := range map[string]*api.Function{"reset": &i.k.reset, "alloc": &i.k.alloc, "input_set": &i.k.inputSet,
		"error_get": &i.k.errorGet, "length": &i.k.length, "output_offset": &i.k.outputOffset, "output_length": &i.k.outputLength} {
		if *f = i.kernel.ExportedFunction(name); *f == nil {
			return fmt.Errorf("the Extism kernel does not export %s", name)
		}
	}
	for _, mem := range alloc.mems {
		switch {
		case sameMemory(mem, i.kmem):
			i.kmemory = mem
		case i.guest.Memory() != nil && sameMemory(mem, i.guest.Memory()):
			i.gmem = mem
		}
	}
	for _, g := range i.m.info.Globals {
		mg, ok := i.guest.ExportedGlobal(g.Export).(api.MutableGlobal)
		if !ok {
			return fmt.Errorf("the guest does not export its global %d", g.Index)
		}
		i.globals = append(i.globals, mg)
	}
	for _, mod := range []api.Module{i.guest, i.kernel} {
		fuel, ok := mod.ExportedGlobal(instrument.FuelExport).(api.MutableGlobal)
		if !ok {
			return errors.New("a module is not instrumented")
		}
		i.globals = append(i.globals, fuel)
	}
	k, _ := kernel()
	for _, g := range k.Globals {
		mg, ok := i.kernel.ExportedGlobal(g.Export).(api.MutableGlobal)
		if !ok {
			return fmt.Errorf("the kernel does not export its global %d", g.Index)
		}
		i.globals = append(i.globals, mg)
	}
	if fds, err := wazerox.FDTable(i.guest); err == nil {
		i.fds = fds
	}
	return nil
}

// sameMemory reports whether m is the linear memory behind mem.
func sameMemory(m *mmapMemory, mem api.Memory) bool {
	if m.buf == nil || mem == nil || mem.Size() == 0 {
		return false
	}
	b, ok := mem.Read(0, 1)
	return ok && unsafe.SliceData(b) == unsafe.SliceData(m.buf)
}

// initialise runs the guest runtime's initialisation as Extism does for a WASI plug-in (a
// reactor's _initialize, else a command's __wasm_call_ctors; a Haskell guest's hs_init after
// _initialize), then abi.EntryInit when the guest exports it.
func (i *instance) initialise(ctx context.Context) error {
	c := i.callContext(ctx)
	noParams := func(name string) api.Function {
		f := i.guest.ExportedFunction(name)
		if f == nil || len(f.Definition().ParamTypes()) != 0 {
			return nil
		}
		return f
	}
	i.run.Store(&runState{ctx: ctx})
	defer i.run.Store(nil)
	if hs := i.guest.ExportedFunction("hs_init"); hs != nil {
		if f := noParams("_initialize"); f != nil {
			if _, err := f.Call(c); err != nil {
				return err
			}
		}
		if _, err := hs.Call(c, 0, 0); err != nil {
			return err
		}
	} else if f := noParams("_initialize"); f != nil {
		if _, err := f.Call(c); err != nil {
			return err
		}
	} else if f := noParams("__wasm_call_ctors"); f != nil {
		if _, err := f.Call(c); err != nil {
			return err
		}
	}
	if i.guest.ExportedFunction(abi.EntryInit) != nil {
		if _, _, err := i.call(ctx, abi.EntryInit, nil); err != nil {
			return err
		}
	}
	return nil
}

// Context keys Extism's host functions read.
var (
	keyPlugin any = extism.PluginCtxKey("plugin")
	keyKernel any = extism.PluginCtxKey("extism")
	keyInput  any = extism.InputOffsetKey("inputOffset")
)

// callCtx is the context of every call into an instance: the run's context, with the values
// Extism's host functions look up (one allocation instead of three context.WithValue).
type callCtx struct {
	context.Context
	inst  *instance
	input uint64
}

func (c *callCtx) Value(key any) any {
	switch key {
	case keyPlugin:
		return c.inst.p
	case keyKernel:
		return c.inst.kernel
	case keyInput:
		return c.input
	}
	return c.Context.Value(key)
}

func (i *instance) callContext(ctx context.Context) *callCtx { return &callCtx{Context: ctx, inst: i} }

// kernelFunc serves the env module's forwards (extismx.ReplaceEnv): during a call Pixie makes
// into an instance, the kernel's function Forwarded[k], found once per instance. Elsewhere (an
// instance's start while it is made) it returns nil, and the forward looks the function up.
func kernelFunc(ctx context.Context, k int) api.Function {
	c, ok := ctx.(*callCtx)
	if !ok {
		return nil
	}
	i := c.inst
	f := i.kfwd[k]
	if f == nil {
		f = i.kernel.ExportedFunction(extismx.Forwarded[k])
		i.kfwd[k] = f
	}
	return f
}

// guestError is an error the guest reported itself (Extism's error_set, the SDK's Fail): a
// result, not a fault.
type guestError struct{ msg string }

func (e *guestError) Error() string { return e.msg }

// kcall calls a kernel function with the arguments in stack, returning its first result.
func kcall(ctx context.Context, f api.Function, stack []uint64) (uint64, error) {
	if err := f.CallWithStack(ctx, stack); err != nil || len(stack) == 0 {
		return 0, err
	}
	return stack[0], nil
}

// call calls the guest's function entry with input, interruptible through ctx (interrupt.go),
// as Extism's Plugin.CallWithContext does. A trap, an interruption or an exit is an error; an
// error the guest set is a *guestError, with the exit code and no output.
func (i *instance) call(ctx context.Context, entry string, input []byte) (uint32, []byte, error) {
	i.run.Store(&runState{ctx: ctx, ticket: i.ticket})
	defer i.run.Store(nil)
	c := i.callContext(ctx)
	st := i.stack[:]
	if _, err := kcall(c, i.k.reset, st[:0:2]); err != nil {
		return 1, nil, err
	}
	st[0] = uint64(len(input))
	ptr, err := kcall(c, i.k.alloc, st)
	if err != nil {
		return 1, nil, err
	}
	if !i.kmem.Write(uint32(ptr), input) {
		return 1, nil, errors.New("the input does not fit in the kernel's memory")
	}
	st[0], st[1] = ptr, uint64(len(input))
	if _, err := kcall(c, i.k.inputSet, st); err != nil {
		return 1, nil, err
	}
	c.input = ptr
	f := i.entries[entry]
	if f == nil {
		if f = i.guest.ExportedFunction(entry); f == nil {
			return 1, nil, fmt.Errorf("unknown function: %s", entry)
		}
		i.entries[entry] = f
	}
	if n := len(f.Definition().ResultTypes()); n > 1 {
		return 1, nil, fmt.Errorf("function %s has %d results, expected 0 or 1", entry, n)
	}
	st[0], st[1] = 0, 0
	err = f.CallWithStack(c, st)
	var rc uint32
	if exit, ok := err.(*sys.ExitError); ok {
		// The guest exited (WASI proc_exit): its module is closed, even with status 0.
		return exit.ExitCode(), nil, err
	}
	if len(f.Definition().ResultTypes()) == 1 {
		rc = api.DecodeU32(st[0])
	} else if err != nil {
		rc = 1
	}
	if err != nil {
		return rc, nil, err
	}
	if msg, err := i.errorMessage(c); err != nil {
		return rc, nil, err
	} else if msg != "" {
		return rc, nil, &guestError{msg: msg}
	}
	off, err := kcall(c, i.k.outputOffset, st[:1])
	if err != nil {
		return rc, nil, err
	}
	n, err := kcall(c, i.k.outputLength, st[:1])
	if err != nil {
		return rc, nil, err
	}
	b, ok := i.kmem.Read(uint32(off), uint32(n))
	if !ok {
		return rc, nil, errors.New("the output block is out of the kernel's memory")
	}
	return rc, append([]byte(nil), b...), nil
}

// errorMessage is the error the guest set in this call ("" for none).
func (i *instance) errorMessage(ctx context.Context) (string, error) {
	st := i.stack[:]
	off, err := kcall(ctx, i.k.errorGet, st[:1])
	if err != nil || off == 0 {
		return "", err
	}
	st[0] = off
	n, err := kcall(ctx, i.k.length, st[:1])
	if err != nil {
		return "", err
	}
	b, ok := i.kmem.Read(uint32(off), uint32(n))
	if !ok {
		return "", errors.New("the error block is out of the kernel's memory")
	}
	return string(b), nil
}

// kernelMemory is the instance's Extism memory as host functions (hostfuncs.Memory) use it:
// the kernel's functions called with the call's context.
type kernelMemory struct{ c *callCtx }

func (m kernelMemory) Length(offset uint64) (uint64, error) {
	i := m.c.inst
	i.hstack[0] = offset
	return kcall(m.c, i.k.length, i.hstack[:1])
}

func (m kernelMemory) ReadBytes(offset uint64) ([]byte, error) {
	n, err := m.Length(offset)
	if err != nil {
		return nil, err
	}
	b, ok := m.c.inst.kmem.Read(uint32(offset), uint32(n))
	if !ok {
		return nil, errors.New("invalid memory block")
	}
	return append([]byte(nil), b...), nil
}

func (m kernelMemory) WriteBytes(b []byte) (uint64, error) {
	i := m.c.inst
	i.hstack[0] = uint64(len(b))
	off, err := kcall(m.c, i.k.alloc, i.hstack[:1])
	if err != nil {
		return 0, err
	}
	if !i.kmem.Write(uint32(off), b) {
		return 0, errors.New("failed to write to memory")
	}
	return off, nil
}

// close closes the plug-in (and with it its memories) and unregisters its modules.
func (i *instance) close() {
	if i.ownSnap {
		i.snap.release(i.m.x.budget)
	}
	_ = i.p.Close(context.Background())
	if i.guest != nil {
		i.checks.remove(i.guest, i.kernel)
	}
}

package wasm

import (
	"errors"
	"fmt"

	"github.com/pixie-dev/pixie/runtime/wasm/internal/wazerox"
)

// Isolation without an instance per run.
//
// Every run starts from its module's pristine state after initialisation, and nothing of an
// earlier run is visible to it, yet a run does not pay for instantiating the module and
// initialising its runtime (about 5 ms of CPU for a Go guest): an instance is reset to a
// snapshot after each run and reused.
//
// The snapshot is taken once per module, from its first instance right after initialisation
// (instance.initialise): the guest's and the Extism kernel's linear memories (their bytes and
// sizes) and their mutable globals (the rewrite exports every one, internal/instrument). Each
// instance also remembers its own WASI descriptor table as it was then. After a run, reset puts
// back:
//
//   - linear memory: the pages the run wrote (the kernel tracks them: memory_linux.go), or all
//     of the snapshot where writes are not tracked, and the memory's size (pages past the
//     snapshot are released, and wazero is told the old size: internal/wazerox);
//   - mutable globals, through their exports: the guest's (the Go runtime's stack pointer and
//     the like), the kernel's, and both fuel counters;
//   - the WASI descriptor table: every file the run opened is closed, what it closed or
//     renumbered comes back, and the preopened /work directory is unbound (lateMount) and its
//     lazily opened root dropped (internal/wazerox);
//   - Extism's Go-side state of the plug-in: its variables (var_set), HTTP status, config;
//   - the captured stdout and stderr.
//
// The Go heap of a Go guest, its goroutines and timers, a C guest's malloc arena: all of it
// lives in linear memory and globals, so it comes back with them. Tables and segments cannot
// be restored through wazero's API; a module that can change them (table.set, table.grow, …,
// data.drop: the rewrite reports it) is run on fresh instances instead, one per run, as is a
// module with a mutable v128 or reference global. An instance that trapped, timed out, exited,
// or broke a limit (output, host calls) is never reused: it is closed.
//
// New instances of a module come from the snapshot too: instantiated, then given the
// snapshot's memory and globals (clone), which is a copy instead of the guest runtime's start;
// a module whose initialisation changed the descriptor table is initialised instead.

// snapshot is a module's state after initialisation.
type snapshot struct {
	guest, kernel *image   // linear memories (guest is nil for a guest without memory)
	globals       []uint64 // in instance.globals' order
	cloneable     bool
	// charged is what the memory budget was charged for the snapshot's bytes.
	charged int
}

// release gives the snapshot's bytes back to the budget.
func (s *snapshot) release(b *memBudget) {
	if b != nil && s.charged > 0 {
		b.give(s.charged)
		s.charged = 0
	}
}

// takeSnapshot copies inst's state.
func (i *instance) takeSnapshot(b *memBudget) (*snapshot, error) {
	s := &snapshot{}
	if i.gmem != nil {
		s.guest = newImage(i.gmem.buf[:i.gmem.len])
	}
	s.kernel = newImage(i.kmemory.buf[:i.kmemory.len])
	for _, g := range i.globals {
		s.globals = append(s.globals, g.Get())
	}
	if b != nil {
		s.charged = s.guest.kept() + s.kernel.kept()
		if !b.take(s.charged) {
			s.charged = 0
			return nil, errors.New("the memory budget has no room for its snapshot")
		}
	}
	return s, nil
}

// clone gives a freshly instantiated inst the snapshot's memories and globals. Its memories
// are still lazy (newInstance): the snapshot's zero pages stay untouched.
func (i *instance) clone(s *snapshot) error {
	i.cloned = true
	for _, mm := range []struct {
		mem  *mmapMemory
		snap *image
		api  interface {
			Size() uint32
			Grow(uint32) (uint32, bool)
		}
	}{{i.gmem, s.guest, i.guest.Memory()}, {i.kmemory, s.kernel, i.kmem}} {
		if mm.mem == nil {
			continue
		}
		dirty := mm.mem.len // what instantiation wrote lies in the memory's initial size
		if size := mm.api.Size(); uint32(mm.snap.len()) > size {
			if _, ok := mm.api.Grow((uint32(mm.snap.len()) - size) / 65536); !ok {
				return fmt.Errorf("the memory cannot grow to the snapshot's %d bytes", mm.snap.len())
			}
		}
		mm.snap.fill(mm.mem.buf, dirty)
	}
	for k, g := range i.globals {
		g.Set(s.globals[k])
	}
	return nil
}

// protect starts tracking the instance's writes.
func (i *instance) protect() {
	if i.gmem != nil {
		i.gmem.protect()
	}
	i.kmemory.protect()
}

// reset puts inst back in its module's snapshot state (see the top of this file).
func (i *instance) reset() error {
	s := i.snap
	if s == nil || i.fdSnap == nil {
		return errors.New("no snapshot")
	}
	i.copied = 0
	if i.gmem != nil {
		i.copied += i.gmem.restore(s.guest)
		if err := wazerox.SetMemoryLen(i.guest.Memory(), uint32(s.guest.len())); err != nil {
			return err
		}
	}
	i.copied += i.kmemory.restore(s.kernel)
	if err := wazerox.SetMemoryLen(i.kmem, uint32(s.kernel.len())); err != nil {
		return err
	}
	for k, g := range i.globals {
		g.Set(s.globals[k])
	}
	i.mount.unbind()
	i.fds.Restore(i.fdSnap)
	clear(i.p.Var)
	i.p.LastStatusCode = 0
	if i.p.LastResponseHeaders != nil {
		clear(i.p.LastResponseHeaders)
	}
	i.p.Config = nil
	i.out.reset()
	return nil
}

// unbind closes what bind opened and leaves the mount empty again (see mount.go); a reset
// calls it before restoring the descriptor table, which closes the root the run opened (whose
// Close releases the mount again: a no-op by then).
func (m *lateMount) unbind() {
	m.release()
	m.work = nil
	m.fs.Store(nil)
}

// Package wasm is the WebAssembly executor of the run contract: it runs rule modules with
// extism/go-sdk on wazero, and validates modules for the registry (runtime/modules).
//
// Decisions (docs/abi.md has the guest-facing side):
//
//   - Compile once. Each module (by sha256) is compiled once into an extism CompiledPlugin in
//     its own wazero runtime, through a wazero compilation cache of its own that writes to (and
//     reads from) Config.CacheDir, so a restart, and the first run after an upload (which the
//     Validator compiled), read machine code from disk instead of compiling it. A cache per
//     module, not one shared: a wazero cache keeps everything it compiled in memory until it is
//     closed, so closing a module's cache with the module is what frees its compiled code (about
//     15 MiB for a Go guest). At most Config.MaxModules compiled modules are kept, least
//     recently used first out.
//   - Instances reset and reused, pre-initialised. Each module keeps a pool of Config.PoolSize
//     ready instances (pool.go), made in the background from a snapshot of the module's state
//     right after initialisation (a memory copy instead of the guest runtime's start). After
//     each healthy run the instance is reset to that snapshot (the pages the run wrote, the
//     globals, the descriptor table, Extism's Go-side state: reset.go) and goes back to the
//     pool, so nothing of one run is visible to the next and a run pays neither instantiation
//     nor initialisation. An instance that trapped, timed out, exited or broke a limit is
//     closed, never reused. docs/runtime.md has the design and its measurements.
//   - Admission control (admission.go). At most Config.MaxConcurrent runs execute guest code at
//     once; a run waits at most Config.QueueTimeout for a slot, and at most Config.MaxQueued
//     wait; every linear memory and snapshot is charged to Config.MemoryBudget. Past a bound a
//     run fails at once with ErrBusy. Runs of modules that fault or run long move to a
//     background class that never takes the last slot and yields to healthy runs at its
//     checks.
//   - Memory. A guest's linear memory is an anonymous mapping of its maximum size (memory_unix.go)
//     instead of wazero's Go slice, which copies the whole memory each time a Go guest grows its
//     heap and leaves the copies to the garbage collector: growing populates the new pages, and
//     closing an instance unmaps its memory at once.
//   - Limits. Memory is capped at Config.MemoryPages (wazero's memory limit, so a memory bomb
//     fails to grow and the guest dies); the run's context carries its time limit, which no
//     guest code can dodge: every module, the guest and Extism's kernel alike, is rewritten
//     (internal/instrument) to spend fuel at every function entry, loop header and bulk memory
//     instruction and to call into Go (interrupt.go) at least once per millisecond or so of
//     code, where the run is ended once its context is done and where the garbage collector
//     can stop the goroutine; input, output and host calls are capped. A module is accepted
//     only if it compiles as uploaded and once rewritten.
//     A trap, a timeout or a guest that exits (a Go panic or out-of-memory exits with status 2)
//     is an error wrapping runtime.ErrTrap or runtime.ErrTimeout, and the instance is gone.
//   - Sandbox. WASI without network (extism's http_request is denied: no allowed hosts) and
//     without a filesystem, except a read-only mount of the session's cwd at MountPath when the
//     request asks for it and carries a sandbox policy. Every instance is created with an empty
//     mount at MountPath (and PWD there), which such a run binds to the cwd just before its
//     call, so mounted runs take pooled instances too; unbound, the mount has no files.
//     Clocks are real; randomness comes from crypto/rand; guest stdout and stderr are kept
//     (capped) as Result.Stderr.
package wasm

import (
	goruntime "runtime"
	"time"

	"github.com/pixie-dev/pixie/hostfuncs"
	"github.com/pixie-dev/pixie/runtime/modules"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// MountPath is where the session's cwd appears inside a guest, read-only; PWD is set to it.
const MountPath = "/work"

// Defaults of Config.
const (
	DefaultMemoryPages = 512 // 32 MiB: a Go guest starts at about 40 pages and grows 64 at a time
	DefaultMaxInput    = 1 << 20
	DefaultMaxOutput   = abi.MaxOutputSize
	DefaultPoolSize    = 2
	DefaultMaxModules  = 16 // each costs ~15 MiB of compiled code plus its pool: see docs/guests.md
	// DefaultMemoryBudget caps the linear memory of every instance and snapshot together.
	DefaultMemoryBudget = 1 << 30
	// DefaultMaxQueued and DefaultQueueTimeout bound the runs waiting for a slot (admission.go).
	DefaultMaxQueued    = 64
	DefaultQueueTimeout = time.Second
	DefaultTimeout      = 60 * time.Second
	// DefaultInitTimeout bounds pre-initialising one instance in the background.
	DefaultInitTimeout = 10 * time.Second
	maxStderr          = 64 << 10
	// refillDelay is how long a module's worker waits after a run before it closes the used
	// instance and refills the pool, while the pool still holds a ready instance.
	refillDelay = 5 * time.Millisecond
)

// Config configures the executor and the validator. The zero value works.
type Config struct {
	// CacheDir holds wazero's compilation cache; empty keeps compiled code in memory only.
	CacheDir string
	// MaxModuleSize caps a module's size in bytes; zero means modules.DefaultMaxSize (16 MiB).
	MaxModuleSize int64
	// MemoryPages caps a guest's linear memory, in 64 KiB pages; zero means DefaultMemoryPages.
	MemoryPages uint32
	// MaxInput caps the target (plug-in input) in bytes; zero means DefaultMaxInput (1 MiB).
	MaxInput int
	// MaxOutput caps the output in bytes; zero means DefaultMaxOutput (256 KiB).
	MaxOutput int
	// PoolSize is how many pre-initialised instances each module keeps ready; zero means
	// DefaultPoolSize, a negative value disables the pool.
	PoolSize int
	// MaxHostCalls caps the pixie_* host calls of one run; zero means
	// hostfuncs.DefaultMaxHostCalls.
	MaxHostCalls int
	// MaxModules caps the compiled modules kept in memory; zero means DefaultMaxModules.
	MaxModules int
	// MaxConcurrent caps the guest runs executing at once; zero means the number of CPUs.
	MaxConcurrent int
	// MaxQueued caps the runs waiting for a slot; zero means DefaultMaxQueued.
	MaxQueued int
	// QueueTimeout caps how long a run waits for a slot; zero means DefaultQueueTimeout.
	QueueTimeout time.Duration
	// MemoryBudget caps, in bytes, the linear memory of every instance (running or pooled) and
	// every snapshot together; zero means DefaultMemoryBudget.
	MemoryBudget int64
	// Limits, when set, is admission control shared with other executors (NewLimits), used
	// instead of MaxConcurrent, MaxQueued, QueueTimeout and MemoryBudget.
	Limits *Limits
	// Hidden are directories the cwd mount never shows, through any of their aliases (the
	// Pixie home): a cwd inside one is not mounted, and one inside the cwd is left out.
	Hidden []string
	// Source is where the executor reads modules (New requires one; NewValidator ignores it).
	Source Source
}

func (c Config) withDefaults() Config {
	if c.MaxModuleSize <= 0 {
		c.MaxModuleSize = modules.DefaultMaxSize
	}
	if c.MemoryPages == 0 {
		c.MemoryPages = DefaultMemoryPages
	}
	if c.MemoryPages > 65536 {
		c.MemoryPages = 65536
	}
	if c.MaxInput <= 0 {
		c.MaxInput = DefaultMaxInput
	}
	if c.MaxOutput <= 0 {
		c.MaxOutput = DefaultMaxOutput
	}
	if c.PoolSize == 0 {
		c.PoolSize = DefaultPoolSize
	} else if c.PoolSize < 0 {
		c.PoolSize = 0
	}
	if c.MaxHostCalls <= 0 {
		c.MaxHostCalls = hostfuncs.DefaultMaxHostCalls
	}
	if c.MaxModules <= 0 {
		c.MaxModules = DefaultMaxModules
	}
	if c.MaxConcurrent <= 0 {
		c.MaxConcurrent = goruntime.NumCPU()
	}
	if c.MemoryBudget <= 0 {
		c.MemoryBudget = DefaultMemoryBudget
	}
	if c.MaxQueued <= 0 {
		c.MaxQueued = DefaultMaxQueued
	}
	if c.QueueTimeout <= 0 {
		c.QueueTimeout = DefaultQueueTimeout
	}
	return c
}

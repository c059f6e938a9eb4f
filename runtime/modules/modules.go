// Package modules owns the WASM module registry: uploaded modules stored content-addressed
// (sha256) as files beside the store, with their metadata in the store, validated before they
// are accepted, listed, shown and deleted. It imports no WASM engine (the server uses it); the
// engine plugs in as a Validator (runtime/wasm) and reads modules back through Load.
//
// Layout: the bytes of a module live at <dir>/<sha256>.wasm (written to a temporary file and
// renamed, so a reader never sees half a module); the store holds
//
//	module/<sha256>      Blob: size, exports, imports, first upload time
//	module-name/<name>   Module: the name's current sha256 and upload time
//
// written in one transaction. Several names may share one blob; a blob goes when its last name
// does. A name is kebab-case ([a-z0-9] words joined by "-", at most 64 bytes), and pushing an
// existing name replaces its module.
//
// Resolve, on every rule run, answers from memory after the first lookup of a reference; every
// change made through the registry clears that memory when it commits.
//
// # Shared stores
//
// Over a store other processes share (PostgreSQL, N replicas), any replica must run any module,
// so the bodies live in the store itself, content-addressed beside their metadata:
//
//	module-body/<sha256>  the module's bytes (raw, not JSON)
//
// written and deleted in the same transaction as module/<sha256>, so a body and its metadata
// move together without files. Every change also notifies "modules", and each replica's Resolve
// memory is cleared when it hears it (or when notifications may have been lost). The compile
// cache (runtime/wasm) stays local to each replica: it is keyed by sha256, so it is never stale.
package modules

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// DefaultMaxSize is the default cap on a module's size (16 MiB).
const DefaultMaxSize = 16 << 20

// Info is what validation learned about a module.
type Info struct {
	// Exports are the exported function names, sorted.
	Exports []string `json:"exports"`
	// Imports are the imported functions as "<module>.<name>", sorted.
	Imports []string `json:"imports"`
}

// Validator checks a module before it is accepted: it compiles, exports entry as a function
// taking nothing and returning i32, and imports only what the host provides. Its error carries
// the reason and an errs code (errs.Unprocessable for a bad module).
type Validator interface {
	Validate(ctx context.Context, wasm []byte, entry string) (Info, error)
}

// Module is one named module.
type Module struct {
	Name       string    `json:"name"`
	SHA256     string    `json:"sha256"`
	Size       int64     `json:"size"`
	Exports    []string  `json:"exports"`
	Imports    []string  `json:"imports,omitempty"`
	UploadedAt time.Time `json:"uploadedAt"`
}

// Blob is the stored metadata of one module body.
type Blob struct {
	SHA256    string    `json:"sha256"`
	Size      int64     `json:"size"`
	Exports   []string  `json:"exports"`
	Imports   []string  `json:"imports,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

type nameRec struct {
	SHA256     string    `json:"sha256"`
	UploadedAt time.Time `json:"uploadedAt"`
}

var (
	blobs = store.NewCollection[Blob]("module")
	names = store.NewCollection[nameRec]("module-name")
)

// bodyKey is where a shared store keeps a module's bytes.
func bodyKey(sha string) string { return "module-body/" + sha }

// topic is the notification every change sends over a shared store.
const topic = "modules"

// Config configures a Registry. Store, Dir and Validator are required; the zero value of
// every other field works.
type Config struct {
	// Store keeps the modules' metadata (and, when shared, their bodies).
	Store *store.Store
	// Dir keeps the module bodies on a local store (created 0700 if missing).
	Dir string
	// Validator checks uploads.
	Validator Validator
	// MaxSize caps a module's size in bytes; zero means DefaultMaxSize.
	MaxSize int64
	// Now returns the time; nil means time.Now.
	Now func() time.Time
}

// Registry is the module registry. It is safe for concurrent use.
type Registry struct {
	st  *store.Store
	dir string
	v   Validator
	max int64
	now func() time.Time
	// mu serialises changes so that a blob file and its metadata move together.
	mu sync.Mutex

	// resolved caches Resolve: reference → sha256. gen counts invalidations, so that a lookup
	// that raced with a change does not store what it read before the change.
	cacheMu  sync.Mutex
	resolved map[string]string
	gen      uint64

	// shared keeps bodies in the store (module-body/<sha>) instead of files.
	shared    bool
	unlisten  func()
	closeOnce sync.Once
}

// New returns a registry storing module bodies in cfg.Dir and metadata in cfg.Store,
// validating uploads with cfg.Validator.
func New(_ context.Context, opts Config) (*Registry, error) {
	st, dir, v := opts.Store, opts.Dir, opts.Validator
	if st == nil || v == nil || dir == "" {
		return nil, errors.New("modules: store, validator and directory are required")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("modules: create %s: %w", dir, err)
	}
	if opts.MaxSize <= 0 {
		opts.MaxSize = DefaultMaxSize
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	r := &Registry{st: st, dir: dir, v: v, max: opts.MaxSize, now: opts.Now, resolved: map[string]string{}, shared: st.Shared()}
	if r.shared {
		// Another replica's change, or notifications lost: forget what Resolve remembers.
		r.unlisten = st.Listen(topic, func(store.Note) { r.invalidate() })
	}
	return r, nil
}

// Close stops listening for other replicas' changes. It may be called more than once.
func (r *Registry) Close(context.Context) error {
	r.closeOnce.Do(func() {
		if r.unlisten != nil {
			r.unlisten()
		}
	})
	return nil
}

// MaxSize is the size cap in bytes.
func (r *Registry) MaxSize() int64 { return r.max }

var nameRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// ValidName checks a module name.
func ValidName(name string) error {
	if len(name) == 0 || len(name) > 64 || !nameRE.MatchString(name) {
		return errs.New(errs.Invalid, "module name %q must be kebab-case ([a-z0-9] words joined by single hyphens), at most 64 bytes", name)
	}
	return nil
}

var shaRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

func (r *Registry) path(sha string) string { return filepath.Join(r.dir, sha+".wasm") }

// Put validates wasm and stores it under name, replacing what name held before. entry is the
// entry point the module must export ("" means abi.EntryGate; Pet skills use abi.EntryRun).
// A bad name is errs.Invalid, a module over the cap errs.TooLarge, a module that fails
// validation errs.Unprocessable with the reason; on any error nothing is stored.
func (r *Registry) Put(ctx context.Context, name string, wasm []byte, entry string) (Module, error) {
	if err := ValidName(name); err != nil {
		return Module{}, err
	}
	if entry == "" {
		entry = abi.EntryGate
	}
	if int64(len(wasm)) > r.max {
		return Module{}, errs.New(errs.TooLarge, "module is %d bytes; the limit is %d", len(wasm), r.max)
	}
	if len(wasm) == 0 {
		return Module{}, errs.New(errs.Unprocessable, "module is empty")
	}
	info, err := r.v.Validate(ctx, wasm, entry)
	if err != nil {
		if errs.CodeOf(err) == errs.Internal {
			return Module{}, errs.Wrap(errs.Unprocessable, err, "module refused: %v", err)
		}
		return Module{}, err
	}
	sum := sha256.Sum256(wasm)
	sha := hex.EncodeToString(sum[:])
	now := r.now().UTC()

	r.mu.Lock()
	defer r.mu.Unlock()
	created := false
	if !r.shared {
		var err error
		created, err = r.writeBlob(sha, wasm)
		if err != nil {
			return Module{}, errs.Wrap(errs.Internal, err, "store module")
		}
	}
	var oldSHA string
	err = r.st.Update(ctx, func(tx *store.Tx) error {
		oldSHA = ""
		if has, err := blobs.Has(tx, sha); err != nil {
			return err
		} else if !has {
			if err := blobs.Put(tx, sha, Blob{SHA256: sha, Size: int64(len(wasm)), Exports: info.Exports, Imports: info.Imports, CreatedAt: now}); err != nil {
				return err
			}
			if r.shared {
				if err := tx.SetRaw(bodyKey(sha), wasm, 0); err != nil {
					return err
				}
			}
		}
		if err := r.notify(tx); err != nil {
			return err
		}
		old, err := names.Get(tx, name)
		switch {
		case err == nil:
			oldSHA = old.SHA256
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		if err := names.Put(tx, name, nameRec{SHA256: sha, UploadedAt: now}); err != nil {
			return err
		}
		tx.AfterCommit(r.invalidate)
		if oldSHA != "" && oldSHA != sha {
			return r.dropIfUnused(tx, oldSHA, name)
		}
		return nil
	})
	if err != nil {
		if created {
			_ = os.Remove(r.path(sha))
		}
		return Module{}, errs.Wrap(errs.Internal, err, "store module metadata")
	}
	return Module{Name: name, SHA256: sha, Size: int64(len(wasm)), Exports: info.Exports, Imports: info.Imports, UploadedAt: now}, nil
}

// dropIfUnused deletes the blob sha when no name but except refers to it; the file goes after
// the commit.
func (r *Registry) dropIfUnused(tx *store.Tx, sha, except string) error {
	used := false
	err := names.Each(tx, "", store.ScanOptions{}, func(id string, v nameRec) error {
		if id != except && v.SHA256 == sha {
			used = true
			return store.ErrStop
		}
		return nil
	})
	if err != nil || used {
		return err
	}
	if err := blobs.Delete(tx, sha); err != nil {
		return err
	}
	if r.shared {
		return tx.DeleteRaw(bodyKey(sha))
	}
	tx.AfterCommit(func() { _ = os.Remove(r.path(sha)) })
	return nil
}

// notify tells the other replicas (over a shared store) that the registry changed.
func (r *Registry) notify(tx *store.Tx) error {
	if !r.shared {
		return nil
	}
	return tx.Notify(topic, "")
}

// writeBlob writes the body of sha unless an intact copy is there, reporting whether it wrote.
func (r *Registry) writeBlob(sha string, wasm []byte) (bool, error) {
	p := r.path(sha)
	if st, err := os.Stat(p); err == nil && st.Size() == int64(len(wasm)) {
		return false, nil
	}
	f, err := os.CreateTemp(r.dir, ".upload-*.tmp")
	if err != nil {
		return false, err
	}
	tmp := f.Name()
	_, err = f.Write(wasm)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return false, err
	}
	return true, nil
}

// Get returns the module named ref, or, when ref is a sha256, that module body under its
// first name (or no name if only a blob is left).
func (r *Registry) Get(ctx context.Context, ref string) (Module, error) {
	var m Module
	err := r.st.View(ctx, func(tx *store.Tx) error {
		var err error
		m, err = get(tx, ref)
		return err
	})
	return m, err
}

func get(tx *store.Tx, ref string) (Module, error) {
	if shaRE.MatchString(ref) {
		b, err := blobs.Get(tx, ref)
		if errors.Is(err, store.ErrNotFound) {
			return Module{}, errs.New(errs.NotFound, "no module with sha256 %s", ref)
		} else if err != nil {
			return Module{}, err
		}
		m := Module{SHA256: b.SHA256, Size: b.Size, Exports: b.Exports, Imports: b.Imports, UploadedAt: b.CreatedAt}
		err = names.Each(tx, "", store.ScanOptions{}, func(id string, v nameRec) error {
			if v.SHA256 == ref {
				m.Name, m.UploadedAt = id, v.UploadedAt
				return store.ErrStop
			}
			return nil
		})
		return m, err
	}
	if err := ValidName(ref); err != nil {
		return Module{}, err
	}
	n, err := names.Get(tx, ref)
	if errors.Is(err, store.ErrNotFound) {
		return Module{}, errs.New(errs.NotFound, "no module named %q", ref)
	} else if err != nil {
		return Module{}, err
	}
	b, err := blobs.Get(tx, n.SHA256)
	if err != nil {
		return Module{}, fmt.Errorf("modules: %s names missing blob %s: %w", ref, n.SHA256, err)
	}
	return Module{Name: ref, SHA256: n.SHA256, Size: b.Size, Exports: b.Exports, Imports: b.Imports, UploadedAt: n.UploadedAt}, nil
}

// Resolve returns the sha256 of the module ref names (a name or a sha256).
func (r *Registry) Resolve(ctx context.Context, ref string) (string, error) {
	r.cacheMu.Lock()
	sha, ok := r.resolved[ref]
	gen := r.gen
	r.cacheMu.Unlock()
	if ok {
		return sha, nil
	}
	m, err := r.Get(ctx, ref)
	if err != nil {
		return "", err
	}
	r.cacheMu.Lock()
	if r.gen == gen {
		r.resolved[ref] = m.SHA256
	}
	r.cacheMu.Unlock()
	return m.SHA256, nil
}

// invalidate forgets every resolved reference; changes call it after they commit.
func (r *Registry) invalidate() {
	r.cacheMu.Lock()
	r.gen++
	clear(r.resolved)
	r.cacheMu.Unlock()
}

// ModuleExists reports whether a module is called name (the gate's check of module rules).
func (r *Registry) ModuleExists(ctx context.Context, name string) (bool, error) {
	var ok bool
	err := r.st.View(ctx, func(tx *store.Tx) error {
		var err error
		ok, err = r.ModuleExistsTx(ctx, tx, name)
		return err
	})
	return ok, err
}

// ModuleExistsTx is ModuleExists inside the caller's transaction: a save that checks its
// module rules this way conflicts with a concurrent Delete of one of them (both read what the
// other writes), and the store retries it.
func (r *Registry) ModuleExistsTx(_ context.Context, tx *store.Tx, name string) (bool, error) {
	if ValidName(name) != nil {
		return false, nil
	}
	return names.Has(tx, name)
}

// Load returns the body of the module with sha256 sha, checking its hash.
func (r *Registry) Load(ctx context.Context, sha string) ([]byte, error) {
	if !shaRE.MatchString(sha) {
		return nil, errs.New(errs.Invalid, "%q is not a sha256", sha)
	}
	var b []byte
	var err error
	if r.shared {
		err = r.st.View(ctx, func(tx *store.Tx) error {
			b, err = tx.GetRaw(bodyKey(sha))
			return err
		})
		if errors.Is(err, store.ErrNotFound) {
			err = os.ErrNotExist
		}
	} else {
		b, err = os.ReadFile(r.path(sha))
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil, errs.New(errs.NotFound, "no module with sha256 %s", sha)
	} else if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "read module")
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != sha {
		return nil, errs.New(errs.Internal, "module %s is corrupt in storage", sha)
	}
	return b, nil
}

// List returns every named module, by name.
func (r *Registry) List(ctx context.Context) ([]Module, error) {
	var out []Module
	err := r.st.View(ctx, func(tx *store.Tx) error {
		out = out[:0]
		ns, err := names.List(tx, "", store.ScanOptions{})
		if err != nil {
			return err
		}
		for _, n := range ns {
			b, err := blobs.Get(tx, n.Value.SHA256)
			if err != nil {
				return fmt.Errorf("modules: %s names missing blob %s: %w", n.ID, n.Value.SHA256, err)
			}
			out = append(out, Module{Name: n.ID, SHA256: b.SHA256, Size: b.Size, Exports: b.Exports, Imports: b.Imports, UploadedAt: n.Value.UploadedAt})
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

// InUse reports whether a saved definition uses the module called name. Delete calls it inside
// its own transaction and passes that transaction: a check that reads the definitions through
// tx makes the delete conflict with a save that changes them meanwhile, and the store then
// retries the delete (and the check), so a module is never deleted from under a gate saved
// concurrently. (The save side reads the module through ModuleExistsTx for the same reason.)
type InUse func(ctx context.Context, tx *store.Tx, name string) (bool, error)

// Delete removes the module called name. It is refused with errs.Conflict while inUse says a
// saved definition uses it (inUse may be nil). The body goes when no other name shares it.
func (r *Registry) Delete(ctx context.Context, name string, inUse InUse) error {
	if err := ValidName(name); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st.Update(ctx, func(tx *store.Tx) error {
		n, err := names.Get(tx, name)
		if errors.Is(err, store.ErrNotFound) {
			return errs.New(errs.NotFound, "no module named %q", name)
		} else if err != nil {
			return err
		}
		if inUse != nil {
			used, err := inUse(ctx, tx, name)
			if err != nil {
				return fmt.Errorf("modules: check use of %s: %w", name, err)
			}
			if used {
				return errs.New(errs.Conflict, "module %q is used by a saved gate; detach it first", name)
			}
		}
		if err := names.Delete(tx, name); err != nil {
			return err
		}
		if err := r.notify(tx); err != nil {
			return err
		}
		tx.AfterCommit(r.invalidate)
		return r.dropIfUnused(tx, n.SHA256, name)
	})
}

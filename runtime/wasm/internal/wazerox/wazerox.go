// Package wazerox is the one place where Pixie reaches into wazero's unexported state, to reset
// a module instance to a snapshot (runtime/wasm reuses instances instead of making one per
// run). Each reach is pinned by a test beside it (wazerox_test.go) against wazero v1.12.0, so
// that an upgrade that moves a field fails those tests instead of silently leaving state from
// one run to the next.
//
// What wazero's API does not offer, and a reset needs:
//
//   - Shrinking a memory back to its size in the snapshot (memory can only grow through the
//     API). SetMemoryLen sets the memory instance's Buffer (an exported field of an internal
//     type) one page short and grows it by one page through the API, so that wazero itself
//     updates the length its compiled code reads.
//   - The WASI descriptor table of a module instance (its sys.Context's FSContext): FDTable
//     snapshots it and restores it, closing every file the run opened, putting back what it
//     closed or renumbered, and re-arming the preopened directories' lazy roots.
package wazerox

import (
	"errors"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/tetratelabs/wazero/api"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// ErrUnreachable is returned when wazero's internals are not as this package expects.
var ErrUnreachable = errors.New("wazerox: wazero internals are not as expected")

const pageSize = 65536

// SetMemoryLen sets mem's length to n bytes: a multiple of the page size, at least one page and
// at most its capacity. The memory's allocator must hand back the same buffer when it is grown
// to n (runtime/wasm's does).
func SetMemoryLen(mem api.Memory, n uint32) error {
	rv := reflect.ValueOf(mem)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("%w: memory is a %T", ErrUnreachable, mem)
	}
	f := rv.Elem().FieldByName("Buffer")
	if !f.IsValid() || f.Type() != reflect.TypeFor[[]byte]() || !f.CanSet() {
		return fmt.Errorf("%w: %T has no settable Buffer []byte", ErrUnreachable, mem)
	}
	cur := f.Len()
	if int(n) == cur {
		return nil
	}
	if n%pageSize != 0 || n < pageSize || int(n) > f.Cap() {
		return fmt.Errorf("wazerox: cannot set a memory of %d bytes (capacity %d) to %d", cur, f.Cap(), n)
	}
	f.SetLen(int(n) - pageSize)
	if _, ok := mem.Grow(1); !ok || mem.Size() != n {
		f.SetLen(cur)
		return fmt.Errorf("wazerox: growing the memory back to %d bytes failed", n)
	}
	return nil
}

// fsTable returns the masks and items of mod's descriptor table, settable.
func fsTable(mod api.Module) (masks *[]uint64, items reflect.Value, err error) {
	rv := reflect.ValueOf(mod)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return nil, reflect.Value{}, fmt.Errorf("%w: module is a %T", ErrUnreachable, mod)
	}
	sys := rv.Elem().FieldByName("Sys")
	if !sys.IsValid() || sys.Kind() != reflect.Pointer || sys.IsNil() {
		return nil, reflect.Value{}, fmt.Errorf("%w: the module has no Sys context", ErrUnreachable)
	}
	fsc := sys.Elem().FieldByName("fsc")
	if !fsc.IsValid() || fsc.Kind() != reflect.Struct {
		return nil, reflect.Value{}, fmt.Errorf("%w: the Sys context has no fsc", ErrUnreachable)
	}
	of := fsc.FieldByName("openedFiles")
	if !of.IsValid() || of.Kind() != reflect.Struct {
		return nil, reflect.Value{}, fmt.Errorf("%w: the FS context has no openedFiles", ErrUnreachable)
	}
	of = reflect.NewAt(of.Type(), unsafe.Pointer(of.UnsafeAddr())).Elem()
	m, it := of.FieldByName("masks"), of.FieldByName("items")
	if !m.IsValid() || m.Type() != reflect.TypeFor[[]uint64]() || !it.IsValid() || it.Kind() != reflect.Slice ||
		it.Type().Elem().Kind() != reflect.Pointer || it.Type().Elem().Elem().Kind() != reflect.Struct {
		return nil, reflect.Value{}, fmt.Errorf("%w: the descriptor table is not masks []uint64 and items []*FileEntry", ErrUnreachable)
	}
	fe := it.Type().Elem().Elem()
	for _, name := range []string{"Name", "IsPreopen", "FS", "File"} {
		if _, ok := fe.FieldByName(name); !ok {
			return nil, reflect.Value{}, fmt.Errorf("%w: FileEntry has no %s", ErrUnreachable, name)
		}
	}
	if ft, _ := fe.FieldByName("File"); ft.Type != reflect.TypeFor[experimentalsys.File]() {
		return nil, reflect.Value{}, fmt.Errorf("%w: FileEntry.File is not a sys.File", ErrUnreachable)
	}
	masks = (*[]uint64)(unsafe.Pointer(m.UnsafeAddr()))
	items = reflect.NewAt(it.Type(), unsafe.Pointer(it.UnsafeAddr())).Elem()
	return masks, items, nil
}

// FDs is the WASI descriptor table of one module instance.
type FDs struct {
	masks *[]uint64
	items reflect.Value // []*FileEntry, settable
}

// FDTable returns mod's descriptor table.
func FDTable(mod api.Module) (*FDs, error) {
	masks, items, err := fsTable(mod)
	if err != nil {
		return nil, err
	}
	return &FDs{masks: masks, items: items}, nil
}

// FDSnapshot is a descriptor table as it was.
type FDSnapshot struct {
	masks []uint64
	items []unsafe.Pointer // the *FileEntry at each index (nil: none)
	// values are copies of the entries (by index), with a preopen's lazily opened root cleared
	// and its directory-listing cache dropped.
	values map[int]reflect.Value
	// lazyDir is wazero's internal/sys.lazyDir, the type of a preopen's root (nil: none).
	lazyDir reflect.Type
}

// entries calls f for each descriptor in the table.
func (t *FDs) entries(f func(i int, e reflect.Value)) {
	masks := *t.masks
	for w, mask := range masks {
		for b := 0; b < 64 && mask != 0; b++ {
			if mask&(1<<b) == 0 {
				continue
			}
			mask &^= 1 << b
			i := w*64 + b
			if i < t.items.Len() {
				if e := t.items.Index(i); !e.IsNil() {
					f(i, e)
				}
			}
		}
	}
}

// Snapshot returns the table as it is now.
func (t *FDs) Snapshot() *FDSnapshot {
	s := &FDSnapshot{masks: append([]uint64(nil), *t.masks...), values: map[int]reflect.Value{}}
	s.items = make([]unsafe.Pointer, t.items.Len())
	for i := range s.items {
		s.items[i] = t.items.Index(i).UnsafePointer()
	}
	t.entries(func(i int, e reflect.Value) {
		v := reflect.New(e.Type().Elem()).Elem()
		v.Set(e.Elem())
		if dc := v.FieldByName("direntCache"); dc.IsValid() {
			reflect.NewAt(dc.Type(), unsafe.Pointer(dc.UnsafeAddr())).Elem().SetZero()
		}
		file := v.FieldByName("File")
		if lazy := file.Elem(); lazy.IsValid() && lazy.Kind() == reflect.Pointer && lazy.Type().Elem().Name() == "lazyDir" {
			s.lazyDir = lazy.Type().Elem()
			fresh := reflect.New(s.lazyDir)
			fresh.Elem().Set(lazy.Elem())
			if f := fresh.Elem().FieldByName("f"); f.IsValid() {
				reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().SetZero()
			}
			file.Set(fresh)
		}
		s.values[i] = v
	})
	return s
}

// Restore puts the table back as it was in s: every file opened since is closed, every entry
// of s is restored (a file of s closed or renumbered since comes back, a preopen's lazily opened
// root is closed and cleared), and the table is s's again. It returns how many files it closed.
func (t *FDs) Restore(s *FDSnapshot) int {
	closed := 0
	known := make(map[unsafe.Pointer]bool, len(s.values))
	for i := range s.values {
		known[s.items[i]] = true
	}
	t.entries(func(_ int, e reflect.Value) {
		if !known[e.UnsafePointer()] {
			if f, ok := e.Elem().FieldByName("File").Interface().(experimentalsys.File); ok && f != nil {
				_ = f.Close()
				closed++
			}
		}
	})
	for i, v := range s.values {
		e := reflect.NewAt(v.Type(), s.items[i]).Elem()
		// A lazy root opened during the run is closed before the entry gets its fresh one.
		if file := e.FieldByName("File"); file.Elem().IsValid() && file.Elem().Kind() == reflect.Pointer &&
			file.Elem().Type().Elem() == s.lazyDir {
			if f := file.Elem().Elem().FieldByName("f"); f.IsValid() && !f.IsNil() {
				_ = file.Interface().(experimentalsys.File).Close()
				closed++
			}
		}
		fresh := reflect.New(v.Type()).Elem()
		fresh.Set(v)
		if file := fresh.FieldByName("File"); file.Elem().IsValid() && file.Elem().Kind() == reflect.Pointer &&
			file.Elem().Type().Elem() == s.lazyDir {
			nl := reflect.New(s.lazyDir)
			nl.Elem().Set(file.Elem().Elem())
			file.Set(nl)
		}
		e.Set(fresh)
	}
	*t.masks = append((*t.masks)[:0], s.masks...)
	items := reflect.MakeSlice(t.items.Type(), len(s.items), len(s.items))
	for i, p := range s.items {
		if p != nil {
			items.Index(i).Set(reflect.NewAt(t.items.Type().Elem().Elem(), p))
		}
	}
	t.items.Set(items)
	return closed
}

// Same reports whether the table holds the same descriptors as s (the same numbers; what they
// refer to is not compared).
func (t *FDs) Same(s *FDSnapshot) bool {
	m := *t.masks
	n := max(len(m), len(s.masks))
	for i := range n {
		var a, b uint64
		if i < len(m) {
			a = m[i]
		}
		if i < len(s.masks) {
			b = s.masks[i]
		}
		if a != b {
			return false
		}
	}
	return true
}

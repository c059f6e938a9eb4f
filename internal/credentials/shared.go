package credentials

import (
	"context"
	"errors"
	"sort"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
)

// Secrets is a store of named secrets: File, or Shared.
type Secrets interface {
	Get(ctx context.Context, name string) (value string, ok bool, err error)
	Names(ctx context.Context) ([]string, error)
	Set(ctx context.Context, name, value string) error
	Delete(ctx context.Context, name string) error
}

var (
	_ Secrets = (*File)(nil)
	_ Secrets = (*Shared)(nil)
)

// Shared keeps the credentials in a store other replicas share (cred/<name>), so that a key
// saved through one replica's API is used by all. Values are never logged and no error message
// contains one. The store's access control protects them (they are not encrypted: whoever
// reads the database also reads the admin token).
type Shared struct {
	st *store.Store
}

var creds = store.NewCollection[string]("cred")

// For returns the credentials of home over st: the home's file, or, when st is shared by
// several replicas, the store. The first replica to start on a shared store without
// credentials copies its home's file into it, so a server moved from Badger to PostgreSQL keeps
// its keys.
func For(ctx context.Context, st *store.Store, home string) (Secrets, error) {
	f := Open(home)
	if !st.Shared() {
		return f, nil
	}
	s := &Shared{st: st}
	names, err := f.Names(ctx)
	if err != nil || len(names) == 0 {
		return s, nil // an unreadable or empty file has nothing to bring
	}
	vals := map[string]string{}
	for _, n := range names {
		if v, ok, err := f.Get(ctx, n); err == nil && ok {
			vals[n] = v
		}
	}
	err = st.Update(ctx, func(tx *store.Tx) error {
		empty := true
		if err := creds.Each(tx, "", store.ScanOptions{Limit: 1}, func(string, string) error {
			empty = false
			return store.ErrStop
		}); err != nil {
			return err
		}
		if !empty {
			return nil
		}
		for n, v := range vals {
			if err := creds.Put(tx, n, v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "the credentials could not be copied into the store")
	}
	return s, nil
}

// Get returns name's value; ok is false when it is not stored.
func (s *Shared) Get(ctx context.Context, name string) (string, bool, error) {
	if err := checkName(name); err != nil {
		return "", false, err
	}
	var v string
	err := s.st.View(ctx, func(tx *store.Tx) (err error) {
		v, err = creds.Get(tx, name)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, errs.Wrap(errs.Internal, err, "the credentials cannot be read")
	}
	return v, true, nil
}

// Names lists the stored names, sorted.
func (s *Shared) Names(ctx context.Context) ([]string, error) {
	var out []string
	err := s.st.View(ctx, func(tx *store.Tx) error {
		return creds.Each(tx, "", store.ScanOptions{}, func(id string, _ string) error {
			out = append(out, id)
			return nil
		})
	})
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "the credentials cannot be read")
	}
	sort.Strings(out)
	return out, nil
}

// Set stores value under name.
func (s *Shared) Set(ctx context.Context, name, value string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if value == "" {
		return errs.New(errs.Invalid, "credential %s: the value is empty", name)
	}
	if len(value) > MaxValueSize {
		return errs.New(errs.TooLarge, "credential %s: the value is over %d bytes", name, MaxValueSize)
	}
	if err := s.st.Update(ctx, func(tx *store.Tx) error { return creds.Put(tx, name, value) }); err != nil {
		return errs.Wrap(errs.Internal, err, "the credentials cannot be written")
	}
	return nil
}

// Delete removes name; removing a name that is not stored is not an error.
func (s *Shared) Delete(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := s.st.Update(ctx, func(tx *store.Tx) error { return creds.Delete(tx, name) }); err != nil {
		return errs.Wrap(errs.Internal, err, "the credentials cannot be written")
	}
	return nil
}

// String describes the store without its contents.
func (s *Shared) String() string { return "credentials(store)" }

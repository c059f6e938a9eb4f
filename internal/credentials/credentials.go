// Package credentials owns the home's credentials file, <home>/credentials.json: named secrets
// (the Jev API key TYPESAFE_API_KEY, the Lark app secret, …) kept out of pixie.yaml and out of
// the store. The file is written with mode 0600, atomically (a temporary file in the same
// directory, synced, then renamed), so a crash never leaves it half-written. Values are never
// logged and no error message contains one.
//
// File satisfies the Secrets interfaces of internal/judge and internal/channel/lark
// (Get/Set/Delete with a context).
package credentials

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"

	"github.com/pixie-dev/pixie/internal/errs"
)

// FileName is the credentials file inside the home.
const FileName = "credentials.json"

// MaxValueSize caps one secret's value in bytes.
const MaxValueSize = 64 << 10

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// fileFormat is the JSON layout of the file.
type fileFormat struct {
	Version int               `json:"version"`
	Secrets map[string]string `json:"secrets"`
}

// File is the credentials file of one home. It is safe for concurrent use within a process;
// writes from several processes at once are not coordinated (the last rename wins).
type File struct {
	path string
	mu   sync.Mutex
}

// Open returns the credentials file of home. Nothing is read or created until it is used.
func Open(home string) *File {
	return &File{path: filepath.Join(home, FileName)}
}

// Path is the file's path.
func (f *File) Path() string { return f.path }

// Get returns name's value; ok is false when it is not stored (or the file does not exist).
func (f *File) Get(_ context.Context, name string) (value string, ok bool, err error) {
	if err := checkName(name); err != nil {
		return "", false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.read()
	if err != nil {
		return "", false, err
	}
	value, ok = m[name]
	return value, ok, nil
}

// Names lists the stored names, sorted (never the values).
func (f *File) Names(_ context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.read()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// Set stores value under name, creating the home (0700) and the file (0600) if needed.
func (f *File) Set(_ context.Context, name, value string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if value == "" {
		return errs.New(errs.Invalid, "credential %s: the value is empty", name)
	}
	if len(value) > MaxValueSize {
		return errs.New(errs.TooLarge, "credential %s: the value is over %d bytes", name, MaxValueSize)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.read()
	if err != nil {
		return err
	}
	m[name] = value
	return f.write(m)
}

// Delete removes name; removing a name that is not stored is not an error.
func (f *File) Delete(_ context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.read()
	if err != nil {
		return err
	}
	if _, ok := m[name]; !ok {
		return nil
	}
	delete(m, name)
	return f.write(m)
}

func checkName(name string) error {
	if !nameRE.MatchString(name) {
		return errs.New(errs.Invalid, "credential name %q: use 1-128 letters, digits, '.', '_' or '-'", name)
	}
	return nil
}

// read loads the file; a missing file is an empty set.
func (f *File) read() (map[string]string, error) {
	raw, err := os.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "the credentials file %s cannot be read", f.path)
	}
	var ff fileFormat
	if err := json.Unmarshal(raw, &ff); err != nil {
		// The decoder's message may quote part of the file: keep it out of the message and
		// the cause.
		return nil, errs.New(errs.Internal, "the credentials file %s is not valid JSON; fix or remove it", f.path)
	}
	if ff.Secrets == nil {
		ff.Secrets = map[string]string{}
	}
	return ff.Secrets, nil
}

// write replaces the file atomically: temporary file (0600) in the same directory, fsync,
// rename, fsync of the directory.
func (f *File) write(m map[string]string) (err error) {
	dir := filepath.Dir(f.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return errs.Wrap(errs.Internal, err, "cannot create %s", dir)
	}
	raw, err := json.MarshalIndent(fileFormat{Version: 1, Secrets: m}, "", "  ")
	if err != nil {
		return errs.Wrap(errs.Internal, err, "cannot encode the credentials")
	}
	tmp, err := os.CreateTemp(dir, ".credentials-*.tmp")
	if err != nil {
		return errs.Wrap(errs.Internal, err, "cannot write the credentials file in %s", dir)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		return errs.Wrap(errs.Internal, err, "cannot write the credentials file")
	}
	if _, err := tmp.Write(append(raw, '\n')); err != nil {
		return errs.Wrap(errs.Internal, err, "cannot write the credentials file")
	}
	if err := tmp.Sync(); err != nil {
		return errs.Wrap(errs.Internal, err, "cannot write the credentials file")
	}
	if err := tmp.Close(); err != nil {
		return errs.Wrap(errs.Internal, err, "cannot write the credentials file")
	}
	if err := os.Rename(tmp.Name(), f.path); err != nil {
		return errs.Wrap(errs.Internal, err, "cannot replace %s", f.path)
	}
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// String describes the file without its contents.
func (f *File) String() string { return fmt.Sprintf("credentials(%s)", f.path) }

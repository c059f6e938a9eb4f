package judge

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/pixie-dev/pixie/internal/errs"
)

// JevKeyName is the name of the Jev API key: the environment variable, the .env entry and the
// credentials entry.
const JevKeyName = "TYPESAFE_API_KEY"

// MaxKeyLength caps a saved Jev key.
const MaxKeyLength = 512

// Key sources reported by KeyStatus.Source.
const (
	KeySourceEnv         = "env"
	KeySourceDotenv      = "dotenv"
	KeySourceCredentials = "credentials"
)

// Secrets is a store of named secrets: internal/credentials' File (the home's
// credentials.json) in production. Get reports ok=false for a missing name.
type Secrets interface {
	Get(ctx context.Context, name string) (value string, ok bool, err error)
	Set(ctx context.Context, name, value string) error
	Delete(ctx context.Context, name string) error
}

// KeyStoreOptions configures a KeyStore. The zero value reads only the process environment.
type KeyStoreOptions struct {
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
	// DotenvDirs are the directories whose .env file is read, in order (typically the working
	// directory, then the home).
	DotenvDirs []string
	// Secrets is where a key saved through the API lives; nil means keys cannot be saved.
	Secrets Secrets
}

// KeyStatus describes the Jev key without revealing it.
type KeyStatus struct {
	// Configured is true when a non-empty key was found.
	Configured bool `json:"configured"`
	// Source is "env", "dotenv", "credentials" or "" (none).
	Source string `json:"source"`
	// ReadOnly is true when the key comes from the environment or a .env file: it cannot be
	// changed or removed through the API.
	ReadOnly bool `json:"readOnly"`
}

// KeyStore finds the Jev API key. TYPESAFE_API_KEY from the environment, else from a .env
// file (DotenvDirs in order), wins and is read-only; else the key saved in the credentials
// file is used. The files are read on every lookup, so edits apply without a restart. No
// method returns the key except Key, which only the Jev client calls.
type KeyStore struct {
	opts KeyStoreOptions
}

// NewKeyStore returns a KeyStore.
func NewKeyStore(opts KeyStoreOptions) *KeyStore {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	return &KeyStore{opts: opts}
}

// Key returns the key and where it came from; key is "" when none is configured.
func (k *KeyStore) Key(ctx context.Context) (key string, st KeyStatus, err error) {
	if k == nil {
		return "", KeyStatus{}, nil
	}
	if v := strings.TrimSpace(k.opts.Getenv(JevKeyName)); v != "" {
		return v, KeyStatus{Configured: true, Source: KeySourceEnv, ReadOnly: true}, nil
	}
	for _, dir := range k.opts.DotenvDirs {
		if dir == "" {
			continue
		}
		v, err := dotenvValue(filepath.Join(dir, ".env"), JevKeyName)
		if err != nil {
			return "", KeyStatus{}, err
		}
		if v != "" {
			return v, KeyStatus{Configured: true, Source: KeySourceDotenv, ReadOnly: true}, nil
		}
	}
	if k.opts.Secrets == nil {
		return "", KeyStatus{}, nil
	}
	v, ok, err := k.opts.Secrets.Get(ctx, JevKeyName)
	if err != nil {
		return "", KeyStatus{}, errs.Wrap(errs.CodeOf(err), err, "the Jev API key cannot be read from the credentials: %v", err)
	}
	if ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v), KeyStatus{Configured: true, Source: KeySourceCredentials}, nil
	}
	return "", KeyStatus{}, nil
}

// Status reports whether a key is configured and where from, never the key.
func (k *KeyStore) Status(ctx context.Context) (KeyStatus, error) {
	_, st, err := k.Key(ctx)
	return st, err
}

// SetKey saves key in the credentials file. It fails with errs.Conflict when the key comes
// from the environment or a .env file (change it there), errs.Invalid for an empty or
// malformed key, and errs.Unavailable when there is no credentials store. The key is never
// echoed back, not even in an error.
func (k *KeyStore) SetKey(ctx context.Context, key string) (KeyStatus, error) {
	key = strings.TrimSpace(key)
	switch {
	case key == "":
		return KeyStatus{}, errs.New(errs.Invalid, "the Jev API key is empty")
	case len(key) > MaxKeyLength:
		return KeyStatus{}, errs.New(errs.Invalid, "the Jev API key is longer than %d bytes", MaxKeyLength)
	case strings.IndexFunc(key, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return KeyStatus{}, errs.New(errs.Invalid, "the Jev API key contains spaces or control characters")
	}
	if err := k.writable(ctx); err != nil {
		return KeyStatus{}, err
	}
	if err := k.opts.Secrets.Set(ctx, JevKeyName, key); err != nil {
		return KeyStatus{}, errs.Wrap(errs.Internal, err, "the Jev API key could not be saved")
	}
	return KeyStatus{Configured: true, Source: KeySourceCredentials}, nil
}

// DeleteKey removes the saved key, with the same read-only rule as SetKey.
func (k *KeyStore) DeleteKey(ctx context.Context) error {
	if err := k.writable(ctx); err != nil {
		return err
	}
	if err := k.opts.Secrets.Delete(ctx, JevKeyName); err != nil {
		return errs.Wrap(errs.Internal, err, "the Jev API key could not be removed")
	}
	return nil
}

func (k *KeyStore) writable(ctx context.Context) error {
	if k == nil || k.opts.Secrets == nil {
		return errs.New(errs.Unavailable, "there is no credentials file to save the Jev API key in")
	}
	st, err := k.Status(ctx)
	if st.ReadOnly {
		where := "the environment"
		if st.Source == KeySourceDotenv {
			where = "a .env file"
		}
		return errs.New(errs.Conflict, "TYPESAFE_API_KEY comes from %s and cannot be changed here; change or remove it there", where)
	}
	return err
}

// dotenvValue reads name from a .env file: KEY=VALUE lines, optional "export ", single or
// double quotes, # comments (after whitespace, for unquoted values). A missing file is "".
func dotenvValue(path, name string) (string, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return "", nil
	}
	if err != nil {
		return "", errs.Wrap(errs.Internal, err, "%s cannot be read", path)
	}
	value := ""
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		line = strings.TrimSpace(strings.TrimPrefix(line, "export "))
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) != name {
			continue
		}
		v = strings.TrimSpace(v)
		switch {
		case len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && strings.IndexByte(v[1:], v[0]) >= 0:
			v = v[1 : 1+strings.IndexByte(v[1:], v[0])]
		default:
			if i := strings.Index(v, " #"); i >= 0 {
				v = v[:i]
			}
			if i := strings.Index(v, "\t#"); i >= 0 {
				v = v[:i]
			}
		}
		value = strings.TrimSpace(v) // the last assignment wins, as in shells
	}
	return value, nil
}

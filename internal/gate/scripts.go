package gate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
)

// Script is one selectable script.
type Script struct {
	// Name is the file name; HookName the name tasks use ({{hooks.<hookName>.text}}).
	Name     string    `json:"name"`
	HookName string    `json:"hookName"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
	// Link is true when the entry is a symbolic link to a file inside the folder.
	Link bool `json:"link,omitempty"`
}

// ScriptListing is the script folder and its selectable scripts.
type ScriptListing struct {
	// Folder is the folder in use; Default the folder an empty setting restores; Custom
	// whether Folder was set through the API.
	Folder  string `json:"folder"`
	Default string `json:"default"`
	Custom  bool   `json:"custom"`
	// Exists is false when the folder does not exist (it is not created for you).
	Exists  bool     `json:"exists"`
	Scripts []Script `json:"scripts"`
	// Error explains why the folder could not be read, if it could not.
	Error    string    `json:"error,omitempty"`
	ListedAt time.Time `json:"listedAt"`
}

// defaultScriptDir is the folder an empty setting restores.
func (s *Service) defaultScriptDir() string {
	if s.cfg.ScriptDir != "" {
		if p, err := expandFolder(s.cfg.ScriptDir); err == nil {
			return p
		}
	}
	return filepath.Join(s.cfg.Home, "commands")
}

// expandFolder checks a folder setting (absolute or ~/…) and returns it absolute and clean.
func expandFolder(p string) (string, error) {
	p = strings.TrimSpace(p)
	switch {
	case p == "~" || strings.HasPrefix(p, "~/"):
		home, err := os.UserHomeDir()
		if err != nil {
			return "", errs.Wrap(errs.Invalid, err, "cannot expand ~: the home directory is unknown")
		}
		p = filepath.Join(home, strings.TrimPrefix(p[1:], "/"))
	case filepath.IsAbs(p):
	default:
		return "", errs.New(errs.Invalid, "the script folder must be an absolute path or start with ~/")
	}
	if strings.ContainsRune(p, 0) {
		return "", errs.New(errs.Invalid, "the script folder contains a NUL byte")
	}
	return filepath.Clean(p), nil
}

// ScriptFolder returns the folder in use and whether it was set through the API.
func (s *Service) ScriptFolder(ctx context.Context) (folder string, custom bool, err error) {
	var v string
	err = s.store.View(ctx, func(tx *store.Tx) error {
		var err error
		v, err = configCol.Get(tx, cfgScriptDir)
		return err
	})
	if errors.Is(err, store.ErrNotFound) || (err == nil && v == "") {
		return s.defaultScriptDir(), false, nil
	}
	if err != nil {
		return "", false, errs.Wrap(errs.Internal, err, "cannot read the script folder setting")
	}
	return v, true, nil
}

// SetScriptFolder sets the script folder (absolute or ~/…); empty restores the default. The
// folder is not created. It returns the fresh listing.
func (s *Service) SetScriptFolder(ctx context.Context, folder string) (ScriptListing, error) {
	folder = strings.TrimSpace(folder)
	var abs string
	if folder != "" {
		var err error
		if abs, err = expandFolder(folder); err != nil {
			return ScriptListing{}, err
		}
	}
	err := s.store.Update(ctx, func(tx *store.Tx) error {
		if err := s.notify(tx, noteScripts); err != nil {
			return err
		}
		if abs == "" {
			return configCol.Delete(tx, cfgScriptDir)
		}
		return configCol.Put(tx, cfgScriptDir, abs)
	})
	if err != nil {
		return ScriptListing{}, errs.Wrap(errs.Internal, err, "cannot save the script folder")
	}
	return s.RefreshScripts(ctx)
}

// Scripts returns the last listing of the script folder, listing it if it never was.
func (s *Service) Scripts(ctx context.Context) (ScriptListing, error) {
	s.mu.Lock()
	l := s.listing
	s.mu.Unlock()
	if l != nil {
		return *l, nil
	}
	return s.RefreshScripts(ctx)
}

// RefreshScripts lists the script folder again.
func (s *Service) RefreshScripts(ctx context.Context) (ScriptListing, error) {
	folder, custom, err := s.ScriptFolder(ctx)
	if err != nil {
		return ScriptListing{}, err
	}
	l := ScriptListing{Folder: folder, Default: s.defaultScriptDir(), Custom: custom, Scripts: []Script{}, ListedAt: s.cfg.Now().UTC()}
	scripts, exists, err := listScripts(folder)
	l.Exists = exists
	if err != nil {
		l.Error = err.Error()
	} else {
		l.Scripts = scripts
	}
	s.mu.Lock()
	s.listing = &l
	s.mu.Unlock()
	return l, nil
}

// scriptNames lists the script folder now (for save-time checks).
func (s *Service) scriptNames(ctx context.Context) (map[string]bool, error) {
	folder, _, err := s.ScriptFolder(ctx)
	if err != nil {
		return nil, err
	}
	scripts, _, err := listScripts(folder)
	if err != nil {
		return nil, err
	}
	m := make(map[string]bool, len(scripts))
	for _, sc := range scripts {
		m[sc.Name] = true
	}
	return m, nil
}

// validScriptName reports whether name can name a file directly inside the folder.
func validScriptName(name string) bool {
	return name != "" && name != "." && !strings.Contains(name, "..") &&
		!strings.ContainsAny(name, "/\\\x00")
}

// listScripts returns the executable regular files directly inside folder, and symbolic
// links to such files inside folder. A missing folder is not an error.
func listScripts(folder string) ([]Script, bool, error) {
	entries, err := os.ReadDir(folder)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, fmt.Errorf("read %s: %w", folder, err)
	}
	root, err := filepath.EvalSymlinks(folder)
	if err != nil {
		return nil, true, fmt.Errorf("resolve %s: %w", folder, err)
	}
	out := []Script{}
	for _, e := range entries {
		sc, ok := inspectScript(folder, root, e.Name())
		if ok {
			out = append(out, sc)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, true, nil
}

// inspectScript checks one entry of the folder. root is the folder with its own links
// resolved.
func inspectScript(folder, root, name string) (Script, bool) {
	if !validScriptName(name) {
		return Script{}, false
	}
	p := filepath.Join(folder, name)
	lfi, err := os.Lstat(p)
	if err != nil {
		return Script{}, false
	}
	link := lfi.Mode()&fs.ModeSymlink != 0
	fi := lfi
	if link {
		target, err := filepath.EvalSymlinks(p)
		if err != nil || filepath.Dir(target) != root {
			// Dangling, or pointing outside the folder (or into a subfolder).
			return Script{}, false
		}
		if fi, err = os.Stat(target); err != nil {
			return Script{}, false
		}
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return Script{}, false
	}
	r := Rule{Name: name}
	return Script{Name: name, HookName: r.HookName(), Size: fi.Size(), Modified: fi.ModTime().UTC(), Link: link}, true
}

// resolveScript returns the absolute path of a selectable script, checked now.
func (s *Service) resolveScript(ctx context.Context, name string) (string, error) {
	folder, _, err := s.ScriptFolder(ctx)
	if err != nil {
		return "", err
	}
	root, err := filepath.EvalSymlinks(folder)
	if err != nil {
		return "", fmt.Errorf("the script folder %s cannot be read: %w", folder, err)
	}
	if _, ok := inspectScript(folder, root, name); !ok {
		return "", fmt.Errorf("the script %q is not an executable file in the script folder %s", name, folder)
	}
	return filepath.Join(folder, name), nil
}

package pet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"path/filepath"
	"strings"
	"sync"

	"github.com/pixie-dev/pixie/internal/errs"
)

// DefaultMaxModuleFile caps a skill.wasm read by ModuleFiles (the per-file Skill limit applies
// first; this is the executor's own bound).
const DefaultMaxModuleFile = 16 << 20

// ModuleFiles lets the WASM executor (runtime/wasm) run a Skill's skill.wasm by its absolute
// path: it implements the executor's module source (Resolve a reference to a sha256, Load the
// body of a sha256). A reference must be an absolute path to a file named skill.wasm; it is read
// without following a symlink, hashed, and remembered by hash, so an edited file is a new module
// and a file that changed between Resolve and Load is refused. Wire one into a WASM executor of
// its own and give that executor to Pet as its runtime.KindModule executor.
type ModuleFiles struct {
	// MaxSize caps a module file in bytes; zero means DefaultMaxModuleFile.
	MaxSize int64

	mu    sync.Mutex
	paths map[string]string // sha256 → path
}

// refPin separates a path from the sha256 its content must have (ModuleRef).
const refPin = "@sha256:"

// ModuleRef is the reference of the skill.wasm at path whose content must hash to sum: Resolve
// refuses the file if it does not (Pet passes the digest of the bytes it validated and copied).
func ModuleRef(path string, sum [32]byte) string {
	return path + refPin + hex.EncodeToString(sum[:])
}

// Resolve returns the sha256 of the skill.wasm at ref (an absolute path, optionally pinned to a
// digest by ModuleRef).
func (m *ModuleFiles) Resolve(_ context.Context, ref string) (string, error) {
	ref, want, pinned := strings.Cut(ref, refPin)
	if !filepath.IsAbs(ref) || filepath.Clean(ref) != ref || filepath.Base(ref) != WASMFile {
		return "", errs.New(errs.NotFound, "%q is not the absolute path of a Skill's %s", ref, WASMFile)
	}
	body, err := m.read(ref)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(body)
	sha := hex.EncodeToString(sum[:])
	if pinned && sha != want {
		return "", errs.New(errs.Conflict, "%s is not the module that was validated (sha256 %s, want %s); run the Skill again", ref, sha, want)
	}
	m.mu.Lock()
	if m.paths == nil {
		m.paths = map[string]string{}
	}
	// One entry per path: drop the hash this path had before.
	for k, p := range m.paths {
		if p == ref && k != sha {
			delete(m.paths, k)
		}
	}
	m.paths[sha] = ref
	m.mu.Unlock()
	return sha, nil
}

// Load returns the body of the module with sha256 sha, read again from its path.
func (m *ModuleFiles) Load(_ context.Context, sha string) ([]byte, error) {
	m.mu.Lock()
	p, ok := m.paths[sha]
	m.mu.Unlock()
	if !ok {
		return nil, errs.New(errs.NotFound, "no Skill module with sha256 %s", sha)
	}
	body, err := m.read(p)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	if hex.EncodeToString(sum[:]) != sha {
		return nil, errs.New(errs.Conflict, "%s changed while it was being loaded; run the Skill again", p)
	}
	return body, nil
}

func (m *ModuleFiles) read(p string) ([]byte, error) {
	max := m.MaxSize
	if max <= 0 {
		max = DefaultMaxModuleFile
	}
	f, err := openNoFollow(p)
	if err != nil {
		return nil, errs.Wrap(errs.NotFound, err, "cannot open %s: %s", p, errText(err))
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, errs.Wrap(errs.Unprocessable, err, "cannot stat %s", p)
	}
	if !info.Mode().IsRegular() {
		return nil, errs.New(errs.Unprocessable, "%s is not a regular file", p)
	}
	body, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, errs.Wrap(errs.Unprocessable, err, "cannot read %s", p)
	}
	if int64(len(body)) > max {
		return nil, errs.New(errs.TooLarge, "%s is over %d bytes", p, max)
	}
	return body, nil
}

// Package agentskill owns the agent skill Pixie installs into a coding agent's skills folder
// (for Claude Code, .claude/skills/pixie-gate-guide/ of a project or of the user): SKILL.md,
// the rules an agent follows to build a Pixie gate (points, the exit 0/10/11 contract, `pixie
// ask` / `pixie judge`, WASM guests, testing), and guide.md, the gate guide. The files are
// embedded in the binary, so updating Pixie updates the skill on the next install.
//
// # Never clobber an edit
//
// Install keeps a manifest, .pixie-skill.json, beside the files: the sha256 of each file as
// Pixie last wrote it. On the next install a file is
//
//   - written when it is missing (deleting a file brings Pixie's version back);
//   - updated to the embedded version when its content still has the recorded hash (the user
//     did not touch it);
//   - kept as it is when its content differs from the recorded hash (the user edited it), or
//     when there is no record and the content is not Pixie's (a file Pixie did not write).
//
// A kept file keeps its old record, so it stays "edited" until the user deletes it or makes it
// identical to Pixie's version again. Files are written to a temporary name and renamed, and the
// manifest is written last, so an interrupted install never records a hash for content that is
// not on disk.
//
// Installs made by `pixie init claude --write` are remembered in the Pixie home
// (agent-skills.json), and UpdateRecorded refreshes each of them, which `pixie serve` does at
// start: updating Pixie updates every installed skill.
package agentskill

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
)

// Name is the skill's folder name.
const Name = "pixie-gate-guide"

// ManifestName is the manifest file inside the skill folder.
const ManifestName = ".pixie-skill.json"

//go:embed skill/*
var embeddedFiles embed.FS

// skillFS holds the embedded skill files at its root.
var skillFS = func() fs.FS {
	sub, err := fs.Sub(embeddedFiles, "skill")
	if err != nil { // cannot happen: the folder is embedded
		panic(err)
	}
	return sub
}()

// Files returns the skill's file names, sorted.
func Files() []string { return names(skillFS) }

func names(src fs.FS) []string {
	ents, _ := fs.ReadDir(src, ".")
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		if e.Type().IsRegular() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// Content returns an embedded file's content.
func Content(name string) ([]byte, error) {
	return fs.ReadFile(skillFS, name)
}

// Manifest records what Pixie last wrote into a skill folder.
type Manifest struct {
	// Version is the Pixie version that last installed the skill.
	Version string `json:"version"`
	// Files maps a file name to the sha256 (hex) of the content Pixie wrote.
	Files map[string]string `json:"files"`
}

// Report tells what an install did with each file.
type Report struct {
	// Dir is the skill folder.
	Dir string `json:"dir"`
	// Written were missing and were written.
	Written []string `json:"written"`
	// Updated held an older Pixie version and were updated.
	Updated []string `json:"updated"`
	// Unchanged already held the current version.
	Unchanged []string `json:"unchanged"`
	// Kept were edited by the user (or not written by Pixie) and were left alone.
	Kept []string `json:"kept"`
}

// Install writes the skill into dir (the skill folder itself, normally <skills>/pixie-gate-guide),
// creating it if needed, following the rules of the package comment. version is recorded in
// the manifest.
func Install(dir, version string) (Report, error) { return install(dir, version, skillFS) }

// install installs the files of src.
func install(dir, version string, src fs.FS) (Report, error) {
	rep := Report{Dir: dir, Written: []string{}, Updated: []string{}, Unchanged: []string{}, Kept: []string{}}
	if dir == "" {
		return rep, errors.New("agentskill: no folder given")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return rep, fmt.Errorf("agentskill: create %s: %w", dir, err)
	}
	old, err := readManifest(dir)
	if err != nil {
		return rep, err
	}
	next := Manifest{Version: version, Files: map[string]string{}}
	for _, name := range names(src) {
		want, err := fs.ReadFile(src, name)
		if err != nil {
			return rep, err
		}
		wantSum := sum(want)
		path := filepath.Join(dir, name)
		cur, err := os.ReadFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := writeAtomic(path, want); err != nil {
				return rep, err
			}
			next.Files[name] = wantSum
			rep.Written = append(rep.Written, name)
		case err != nil:
			return rep, fmt.Errorf("agentskill: read %s: %w", path, err)
		case sum(cur) == wantSum:
			next.Files[name] = wantSum
			rep.Unchanged = append(rep.Unchanged, name)
		case old.Files[name] != "" && sum(cur) == old.Files[name]:
			if err := writeAtomic(path, want); err != nil {
				return rep, err
			}
			next.Files[name] = wantSum
			rep.Updated = append(rep.Updated, name)
		default:
			if h := old.Files[name]; h != "" {
				next.Files[name] = h
			}
			rep.Kept = append(rep.Kept, name)
		}
	}
	raw, err := json.MarshalIndent(next, "", "  ")
	if err != nil {
		return rep, err
	}
	if err := writeAtomic(filepath.Join(dir, ManifestName), append(raw, '\n')); err != nil {
		return rep, err
	}
	return rep, nil
}

// readManifest reads dir's manifest; a missing one is empty. An unreadable one is treated as
// empty too (every file then counts as not written by Pixie unless it matches), so a damaged
// manifest can never cause an edited file to be overwritten.
func readManifest(dir string) (Manifest, error) {
	m := Manifest{Files: map[string]string{}}
	raw, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return m, fmt.Errorf("agentskill: read the manifest: %w", err)
	}
	if json.Unmarshal(raw, &m) != nil || m.Files == nil {
		return Manifest{Files: map[string]string{}}, nil
	}
	return m, nil
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// writeAtomic writes data to path through a temporary file in the same folder.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("agentskill: write %s: %w", path, err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp, 0o644)
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("agentskill: write %s: %w", path, werr)
	}
	return nil
}

// ProjectDir is the skill folder of a Claude Code project: <project>/.claude/skills/pixie-gate-guide.
func ProjectDir(project string) string {
	return filepath.Join(project, ".claude", "skills", Name)
}

// UserDir is the user's Claude Code skill folder: ~/.claude/skills/pixie-gate-guide.
func UserDir() (string, error) {
	h, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("agentskill: no home directory: %w", err)
	}
	return filepath.Join(h, ".claude", "skills", Name), nil
}

// recordFile lists the skill folders installed from a Pixie home.
const recordFile = "agent-skills.json"

// Record remembers dir (made absolute) in the Pixie home, so UpdateRecorded refreshes it.
func Record(home, dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	dirs, err := Recorded(home)
	if err != nil {
		return err
	}
	if slices.Contains(dirs, abs) {
		return nil
	}
	dirs = append(dirs, abs)
	sort.Strings(dirs)
	raw, err := json.MarshalIndent(map[string][]string{"dirs": dirs}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("agentskill: %w", err)
	}
	return writeAtomic(filepath.Join(home, recordFile), append(raw, '\n'))
}

// Recorded lists the skill folders recorded in the Pixie home.
func Recorded(home string) ([]string, error) {
	raw, err := os.ReadFile(filepath.Join(home, recordFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("agentskill: %w", err)
	}
	var v struct {
		Dirs []string `json:"dirs"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("agentskill: %s is not valid JSON: %w", filepath.Join(home, recordFile), err)
	}
	return v.Dirs, nil
}

// UpdateRecorded reinstalls the skill in every recorded folder that still holds a manifest (a
// folder the user removed is left removed). It returns one report per folder updated and the
// first error met; the other folders are still updated.
func UpdateRecorded(home, version string) ([]Report, error) {
	return updateRecorded(home, version, skillFS)
}

func updateRecorded(home, version string, src fs.FS) ([]Report, error) {
	dirs, err := Recorded(home)
	if err != nil {
		return nil, err
	}
	var reps []Report
	var first error
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, ManifestName)); err != nil {
			continue
		}
		rep, err := install(d, version, src)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		reps = append(reps, rep)
	}
	return reps, first
}

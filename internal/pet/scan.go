package pet

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"

	"github.com/pixie-dev/pixie/internal/errs"
)

// Files with a meaning in a Skill directory. Nothing else in a Skill is read by Pet: there is no
// Pet-specific field in SKILL.md.
const (
	ManifestFile = "SKILL.md"   // required: front matter with name and description, then instructions
	WASMFile     = "skill.wasm" // a WASM guest exporting run
	ScriptFile   = "run.sh"     // a legacy bash script
)

// Limits of a SKILL.md front matter.
const (
	MaxSkillNameLen    = 64
	MaxDescriptionLen  = 1024 // characters
	maxSkillDepth      = 32
	maxFrontMatterSize = 64 << 10
)

// SkillKind is how a Skill runs, decided by the files at its root: skill.wasm wins over run.sh,
// and a Skill with neither runs as instructions.
type SkillKind string

// Skill kinds.
const (
	KindWASM         SkillKind = "wasm"
	KindScript       SkillKind = "script"
	KindInstructions SkillKind = "instructions"
)

var skillName = regexp.MustCompile(`^[a-z0-9]+(?:-[a-z0-9]+)*$`)

// ValidSkillName reports whether name is a Skill name: kebab-case ([a-z0-9] words joined by
// single hyphens), at most 64 bytes.
func ValidSkillName(name string) bool {
	return len(name) <= MaxSkillNameLen && skillName.MatchString(name)
}

// SkillFile is one file of a Skill, by its slash-separated path inside the Skill.
type SkillFile struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// Problem is one reason a Skill directory is refused.
type Problem struct {
	// Path is the offending entry inside the Skill ("" for the Skill as a whole).
	Path   string `json:"path,omitempty"`
	Reason string `json:"reason"`
}

// scan is what reading a Skill directory found.
type scan struct {
	path        string
	name        string
	description string
	body        string
	kind        SkillKind
	files       []SkillFile
	total       int64
	fingerprint string // only when hashing
}

// refusal builds the error of a refused Skill directory: errs.Unprocessable with every problem
// as details.
func refusal(path string, problems []Problem) error {
	first := problems[0]
	msg := first.Reason
	if first.Path != "" {
		msg = first.Path + ": " + msg
	}
	more := ""
	if len(problems) > 1 {
		more = fmt.Sprintf(" (and %d more problems)", len(problems)-1)
	}
	return errs.New(errs.Unprocessable, "the Skill at %s is refused: %s%s", path, msg, more).WithDetails(problems)
}

// cleanSkillPath checks the path a user gave: absolute, and without ".." elements (a path that
// climbs out of where it appears to point is refused as an escape).
func cleanSkillPath(p string) (string, error) {
	if p == "" {
		return "", errs.New(errs.Invalid, "a Skill path is required (an absolute path on the server's machine)")
	}
	if !utf8.ValidString(p) || strings.ContainsRune(p, 0) || len(p) > MaxCwdLen {
		return "", errs.New(errs.Invalid, "the Skill path is not a valid path")
	}
	if !filepath.IsAbs(p) {
		return "", errs.New(errs.Invalid, "the Skill path %q is not absolute; give the absolute path on the server's machine", p)
	}
	for _, el := range strings.Split(filepath.ToSlash(p), "/") {
		if el == ".." {
			return "", errs.New(errs.Unprocessable, "the Skill path %q escapes with \"..\"; give the real path", p).
				WithDetails([]Problem{{Reason: "path escape: \"..\" element"}})
		}
	}
	return filepath.Clean(p), nil
}

// scanSkill reads and validates the Skill directory at p (already cleaned). hash computes the
// fingerprint (every file read). The error is errs.NotFound when p does not exist,
// errs.Unprocessable with the problems when the directory is refused.
func (s *Service) scanSkill(p string, hash bool) (*scan, error) {
	root, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, errs.New(errs.NotFound, "no Skill directory at %s", p)
	case err != nil:
		return nil, errs.Wrap(errs.Unprocessable, err, "cannot read the Skill directory %s", p)
	case root.Mode()&fs.ModeSymlink != 0:
		return nil, refusal(p, []Problem{{Reason: "the Skill directory is a symlink; give the path it points to"}})
	case !root.IsDir():
		return nil, refusal(p, []Problem{{Reason: "not a directory"}})
	}
	sc := &scan{path: p}
	var problems []Problem
	dirs := 0
	h := sha256.New()
	// stop ends the walk once a count limit is passed: a path pointing at a huge tree (a home
	// directory) is refused without reading all of it.
	stop := false
	var walk func(dir, rel string, depth int)
	walk = func(dir, rel string, depth int) {
		if stop {
			return
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			problems = append(problems, Problem{Path: rel, Reason: "cannot read directory: " + errText(err)})
			return
		}
		for _, e := range entries {
			if stop {
				return
			}
			name := e.Name()
			rp := name
			if rel != "" {
				rp = rel + "/" + name
			}
			if !filepath.IsLocal(rp) {
				problems = append(problems, Problem{Path: rp, Reason: "path escape"})
				continue
			}
			full := filepath.Join(dir, name)
			mode := e.Type()
			switch {
			case mode&fs.ModeSymlink != 0:
				problems = append(problems, Problem{Path: rp, Reason: "symlinks are not allowed"})
			case mode.IsDir():
				dirs++
				if dirs > s.cfg.MaxSkillFiles {
					problems = append(problems, Problem{Path: rp, Reason: fmt.Sprintf("more than %d directories", s.cfg.MaxSkillFiles)})
					stop = true
					return
				}
				if depth+1 > maxSkillDepth {
					problems = append(problems, Problem{Path: rp, Reason: fmt.Sprintf("nested deeper than %d levels", maxSkillDepth)})
					continue
				}
				walk(full, rp, depth+1)
			case mode.IsRegular():
				info, err := e.Info()
				if err != nil {
					problems = append(problems, Problem{Path: rp, Reason: "cannot stat: " + errText(err)})
					continue
				}
				if !info.Mode().IsRegular() {
					problems = append(problems, Problem{Path: rp, Reason: "special files are not allowed"})
					continue
				}
				size := info.Size()
				sc.files = append(sc.files, SkillFile{Path: rp, Size: size})
				if len(sc.files) > s.cfg.MaxSkillFiles {
					problems = append(problems, Problem{Path: rp, Reason: fmt.Sprintf("more than %d files", s.cfg.MaxSkillFiles)})
					stop = true
				}
				switch {
				case rp == WASMFile:
					// The guest has its own cap and is not counted in the total.
					if size > s.cfg.MaxSkillModuleSize {
						problems = append(problems, Problem{Path: rp, Reason: fmt.Sprintf("%d bytes; the limit for %s is %d", size, WASMFile, s.cfg.MaxSkillModuleSize)})
					}
				case size > s.cfg.MaxSkillFileSize:
					problems = append(problems, Problem{Path: rp, Reason: fmt.Sprintf("%d bytes; the per-file limit is %d", size, s.cfg.MaxSkillFileSize)})
				default:
					sc.total += size
				}
			default:
				problems = append(problems, Problem{Path: rp, Reason: "special files are not allowed (" + fileType(mode) + ")"})
			}
		}
	}
	walk(p, "", 0)
	if sc.total > s.cfg.MaxSkillSize {
		problems = append(problems, Problem{Reason: fmt.Sprintf("%d bytes in total; the limit is %d", sc.total, s.cfg.MaxSkillSize)})
	}
	sort.Slice(sc.files, func(i, j int) bool { return sc.files[i].Path < sc.files[j].Path })

	var manifest []byte
	kinds := map[string]bool{}
	for _, f := range sc.files {
		switch f.Path {
		case ManifestFile, WASMFile, ScriptFile:
			kinds[f.Path] = true
		}
	}
	if !kinds[ManifestFile] {
		problems = append(problems, Problem{Path: ManifestFile, Reason: "SKILL.md is missing"})
	}
	if len(problems) == 0 {
		// Only a directory that passed the walk is read: no symlink or special file is opened.
		for _, f := range sc.files {
			if !hash && f.Path != ManifestFile {
				continue
			}
			limit := s.cfg.MaxSkillFileSize
			if f.Path == WASMFile {
				limit = s.cfg.MaxSkillModuleSize
			}
			raw, err := s.readSkillFile(filepath.Join(p, filepath.FromSlash(f.Path)), limit)
			if err != nil {
				problems = append(problems, Problem{Path: f.Path, Reason: errText(err)})
				continue
			}
			if f.Path == ManifestFile {
				manifest = raw
			}
			if hash {
				sum := sha256.Sum256(raw)
				fmt.Fprintf(h, "%s\x00%d\x00%x\n", f.Path, len(raw), sum)
			}
		}
	}
	if manifest != nil {
		problems = append(problems, sc.parseManifest(manifest)...)
	}
	switch {
	case kinds[WASMFile]:
		sc.kind = KindWASM
	case kinds[ScriptFile]:
		sc.kind = KindScript
	default:
		sc.kind = KindInstructions
		if manifest != nil && sc.body == "" && sc.name != "" {
			problems = append(problems, Problem{Path: ManifestFile, Reason: "no instructions after the front matter, and no skill.wasm or run.sh to run"})
		}
	}
	if len(problems) > 0 {
		return sc, refusal(p, problems)
	}
	if hash {
		sc.fingerprint = hex.EncodeToString(h.Sum(nil))
	}
	return sc, nil
}

// readSkillFile reads one regular file without following a symlink or blocking on a fifo that
// replaced it since the walk, and with the per-file cap.
func (s *Service) readSkillFile(path string, limit int64) ([]byte, error) {
	f, err := openNoFollow(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, errors.New("changed into a special file while being read")
	}
	raw, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(raw)) > limit {
		return nil, fmt.Errorf("over the limit of %d bytes", limit)
	}
	return raw, nil
}

// parseManifest reads SKILL.md: YAML front matter between "---" lines with a kebab-case name
// and a non-empty description, then the body (the instructions).
func (sc *scan) parseManifest(raw []byte) []Problem {
	bad := func(reason string) []Problem { return []Problem{{Path: ManifestFile, Reason: reason}} }
	if !utf8.Valid(raw) {
		return bad("not valid UTF-8")
	}
	text := strings.TrimPrefix(string(raw), "\ufeff")
	text = strings.ReplaceAll(text, "\r\n", "\n")
	if !strings.HasPrefix(text, "---\n") {
		return bad("no front matter: SKILL.md must start with a \"---\" line, then name and description, then \"---\"")
	}
	rest := text[len("---\n"):]
	var front, body string
	if strings.HasPrefix(rest, "---\n") || rest == "---" {
		front, body = "", strings.TrimPrefix(strings.TrimPrefix(rest, "---"), "\n")
	} else {
		i := strings.Index(rest, "\n---\n")
		switch {
		case i >= 0:
			front, body = rest[:i], rest[i+len("\n---\n"):]
		case strings.HasSuffix(rest, "\n---"):
			front, body = strings.TrimSuffix(rest, "\n---"), ""
		default:
			return bad("the front matter is not closed by a \"---\" line")
		}
	}
	if len(front) > maxFrontMatterSize {
		return bad(fmt.Sprintf("the front matter is over %d bytes", maxFrontMatterSize))
	}
	var fm map[string]any
	if err := yaml.Unmarshal([]byte(front), &fm); err != nil {
		return bad("the front matter is not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var problems []Problem
	name, _ := fm["name"].(string)
	switch {
	case fm["name"] == nil:
		problems = append(problems, Problem{Path: ManifestFile, Reason: "the front matter has no name"})
	case name == "" || !ValidSkillName(name):
		problems = append(problems, Problem{Path: ManifestFile, Reason: fmt.Sprintf("name %v is not kebab-case (lowercase letters and digits joined by single hyphens, at most %d bytes)", fm["name"], MaxSkillNameLen)})
	default:
		sc.name = name
	}
	desc, _ := fm["description"].(string)
	desc = strings.TrimSpace(desc)
	switch {
	case desc == "":
		problems = append(problems, Problem{Path: ManifestFile, Reason: "the front matter has no description (a non-empty string)"})
	case utf8.RuneCountInString(desc) > MaxDescriptionLen:
		problems = append(problems, Problem{Path: ManifestFile, Reason: fmt.Sprintf("the description is over %d characters", MaxDescriptionLen)})
	default:
		sc.description = desc
	}
	sc.body = strings.TrimSpace(body)
	return problems
}

func fileType(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "irregular file"
}

// errText is an error's message without the path prefix os adds.
func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	return err.Error()
}

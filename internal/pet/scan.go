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
	"github.com/pixie-dev/pixie/runtime"
)

// Files with a meaning in a Skill directory. Nothing else in a Skill is read by Pet: there is no
// Pet-specific field in SKILL.md (the sandbox key, SandboxKey, is generic).
const (
	ManifestFile = "SKILL.md"   // required: front matter with name and description, then instructions
	WASMFile     = "skill.wasm" // a WASM guest exporting run
	ScriptFile   = "run.sh"     // a legacy bash script
)

// SandboxKey is the one front-matter key besides name and description that Pet reads: the
// sandbox policy a Skill asks for, read-only (the default) or workspace-write. It is a generic
// key, not a Pet-specific one: it says what the Skill's commands need, for any runner. What
// is asked is shown at inspection, must be confirmed at registration, and is what the Skill's
// Runs get (Skill.Sandbox); a Skill edited to ask for more than it was granted fails closed.
const SandboxKey = "sandbox"

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
	// identity is the directory's device and inode ("dev:ino"), as opened for this scan.
	identity string
	// staged is the private copy the scan wrote (scanOptions.stage), "" otherwise.
	staged string
	// sums are the sha256 of each file's content, by path (only when hashing).
	sums map[string][32]byte
	// scratch is the Run's private directory that holds staged (stage only).
	scratch string
	// sandbox is the policy SKILL.md's front matter asks for (SandboxKey): read-only when it
	// asks for nothing.
	sandbox runtime.Policy
	// executor is the registered Skill's executor (stage only).
	executor string
}

// scanOptions says what a scan reads besides SKILL.md.
type scanOptions struct {
	// hash reads every file and computes the fingerprint.
	hash bool
	// stage, when set, is an empty directory the scan copies every file it read into, byte for
	// byte what it validated and hashed (hash is implied). A Run executes that copy, never the
	// user's directory, so nothing swapped in after the check runs.
	stage string
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
	return s.scanDir(p, scanOptions{hash: hash})
}

// scanDir reads and validates the Skill directory at p. The walk never follows a symbolic link
// and never reads a path twice: each directory is opened once, beneath its parent (os.Root),
// and checked to be the one its parent listed (same device and inode), and each file is read
// through one descriptor, checked the same way, so a directory or file swapped during the scan
// is refused rather than read. p itself may not be, nor lie below, a symbolic link.
func (s *Service) scanDir(p string, o scanOptions) (*scan, error) {
	if o.stage != "" {
		o.hash = true
	}
	info, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, errs.New(errs.NotFound, "no Skill directory at %s", p)
	case err != nil:
		return nil, errs.Wrap(errs.Unprocessable, err, "cannot read the Skill directory %s", p)
	case info.Mode()&fs.ModeSymlink != 0:
		return nil, refusal(p, []Problem{{Reason: "the Skill directory is a symlink; give the path it points to"}})
	case !info.IsDir():
		return nil, refusal(p, []Problem{{Reason: "not a directory"}})
	}
	if real, err := filepath.EvalSymlinks(p); err != nil || real != p {
		return nil, refusal(p, []Problem{{Reason: fmt.Sprintf("a parent folder of the Skill path is a symlink (the path resolves to %s); give the real path", real)}})
	}
	root, err := openSkillRoot(p, info)
	if err != nil {
		return nil, refusal(p, []Problem{{Reason: err.Error()}})
	}
	defer root.Close()
	sc := &scan{path: p, identity: fileIdentity(info)}
	w := &skillWalk{s: s, sc: sc, o: o, dev: deviceOf(info), links: map[string][]string{}, content: map[string][]byte{}}
	if o.hash {
		sc.sums = map[string][32]byte{}
	}
	w.walk(root, "", 0)
	problems := w.problems
	for id, paths := range w.links {
		if n := w.nlink[id]; uint64(len(paths)) < n {
			for _, rp := range paths {
				problems = append(problems, Problem{Path: rp, Reason: fmt.Sprintf("a hard link to a file outside the Skill (%d links, %d inside)", n, len(paths))})
			}
		}
	}
	if sc.total > s.cfg.MaxSkillSize {
		problems = append(problems, Problem{Reason: fmt.Sprintf("%d bytes in total; the limit is %d", sc.total, s.cfg.MaxSkillSize)})
	}
	sort.Slice(sc.files, func(i, j int) bool { return sc.files[i].Path < sc.files[j].Path })
	sort.Slice(problems, func(i, j int) bool { return problems[i].Path < problems[j].Path })

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
	manifest, haveManifest := w.content[ManifestFile]
	if haveManifest && len(problems) == 0 {
		problems = append(problems, sc.parseManifest(manifest)...)
	}
	switch {
	case kinds[WASMFile]:
		sc.kind = KindWASM
	case kinds[ScriptFile]:
		sc.kind = KindScript
	default:
		sc.kind = KindInstructions
		if haveManifest && sc.body == "" && sc.name != "" {
			problems = append(problems, Problem{Path: ManifestFile, Reason: "no instructions after the front matter, and no skill.wasm or run.sh to run"})
		}
	}
	if len(problems) > 0 {
		return sc, refusal(p, problems)
	}
	if o.hash {
		h := sha256.New()
		for _, f := range sc.files {
			sum := sc.sums[f.Path]
			fmt.Fprintf(h, "%s\x00%d\x00%x\n", f.Path, f.Size, sum)
		}
		sc.fingerprint = hex.EncodeToString(h.Sum(nil))
	}
	if o.stage != "" {
		if err := w.writeStage(); err != nil {
			return sc, errs.Wrap(errs.Unavailable, err, "cannot copy the Skill %s for its run: %s", p, errText(err))
		}
		sc.staged = o.stage
	}
	return sc, nil
}

// skillWalk is one scan's walk of a Skill directory.
type skillWalk struct {
	s        *Service
	sc       *scan
	o        scanOptions
	dev      uint64
	problems []Problem
	dirs     int
	stop     bool
	// links are the files with more than one hard link, by identity, with their paths here;
	// nlink is their link count.
	links map[string][]string
	nlink map[string]uint64
	// content is what was read, by path (SKILL.md always; everything when hashing).
	content map[string][]byte
	order   []string // directories, in walk order, for staging
}

func (w *skillWalk) problem(path, reason string) {
	w.problems = append(w.problems, Problem{Path: path, Reason: reason})
}

// walk reads the directory r (at rel inside the Skill).
func (w *skillWalk) walk(r *os.Root, rel string, depth int) {
	if w.stop {
		return
	}
	d, err := r.Open(".")
	if err != nil {
		w.problem(rel, "cannot read directory: "+errText(err))
		return
	}
	entries, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		w.problem(rel, "cannot read directory: "+errText(err))
		return
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	for _, e := range entries {
		if w.stop {
			return
		}
		name := e.Name()
		rp := name
		if rel != "" {
			rp = rel + "/" + name
		}
		if !filepath.IsLocal(rp) || strings.ContainsAny(name, "/\x00") {
			w.problem(rp, "path escape")
			continue
		}
		// A fresh look, not the listing's: the entry may have changed since.
		info, err := r.Lstat(name)
		if err != nil {
			w.problem(rp, "cannot stat: "+errText(err))
			continue
		}
		mode := info.Mode()
		switch {
		case mode&fs.ModeSymlink != 0:
			w.problem(rp, "symlinks are not allowed")
		case mode.IsDir():
			w.dirs++
			if w.dirs > w.s.cfg.MaxSkillFiles {
				w.problem(rp, fmt.Sprintf("more than %d directories", w.s.cfg.MaxSkillFiles))
				w.stop = true
				return
			}
			if depth+1 > maxSkillDepth {
				w.problem(rp, fmt.Sprintf("nested deeper than %d levels", maxSkillDepth))
				continue
			}
			if deviceOf(info) != w.dev {
				w.problem(rp, "a mount point (another file system inside the Skill) is not allowed")
				continue
			}
			sub, err := r.OpenRoot(name)
			if err != nil {
				w.problem(rp, "cannot open directory: "+errText(err))
				continue
			}
			if st, err := sub.Stat("."); err != nil || !os.SameFile(st, info) {
				sub.Close()
				w.problem(rp, "changed while being read")
				continue
			}
			w.order = append(w.order, rp)
			w.walk(sub, rp, depth+1)
			sub.Close()
		case mode.IsRegular():
			w.file(r, name, rp, info)
		default:
			w.problem(rp, "special files are not allowed ("+fileType(mode)+")")
		}
	}
}

// file checks one regular file and reads it when the scan needs its content.
func (w *skillWalk) file(r *os.Root, name, rp string, info fs.FileInfo) {
	sc, cfg := w.sc, w.s.cfg
	size := info.Size()
	sc.files = append(sc.files, SkillFile{Path: rp, Size: size})
	if len(sc.files) > cfg.MaxSkillFiles {
		w.problem(rp, fmt.Sprintf("more than %d files", cfg.MaxSkillFiles))
		w.stop = true
	}
	limit := cfg.MaxSkillFileSize
	switch {
	case rp == WASMFile:
		// The guest has its own cap and is not counted in the total.
		limit = cfg.MaxSkillModuleSize
		if size > limit {
			w.problem(rp, fmt.Sprintf("%d bytes; the limit for %s is %d", size, WASMFile, limit))
			return
		}
	case size > limit:
		w.problem(rp, fmt.Sprintf("%d bytes; the per-file limit is %d", size, limit))
		return
	default:
		sc.total += size
	}
	if n := linkCount(info); n > 1 {
		id := fileIdentity(info)
		if w.nlink == nil {
			w.nlink = map[string]uint64{}
		}
		w.nlink[id] = n
		w.links[id] = append(w.links[id], rp)
	}
	if !w.o.hash && rp != ManifestFile {
		return
	}
	raw, err := readSkillFile(r, name, info, limit)
	if err != nil {
		w.problem(rp, errText(err))
		return
	}
	// The size the fingerprint records is what was read.
	sc.files[len(sc.files)-1].Size = int64(len(raw))
	w.content[rp] = raw
	if w.o.hash {
		sc.sums[rp] = sha256.Sum256(raw)
	}
}

// writeStage copies what the scan read into the stage directory.
func (w *skillWalk) writeStage() error {
	for _, d := range w.order {
		if err := os.Mkdir(filepath.Join(w.o.stage, filepath.FromSlash(d)), 0o700); err != nil {
			return err
		}
	}
	for _, f := range w.sc.files {
		mode := os.FileMode(0o600)
		if f.Path == ScriptFile || strings.HasSuffix(f.Path, ".sh") {
			mode = 0o700
		}
		if err := os.WriteFile(filepath.Join(w.o.stage, filepath.FromSlash(f.Path)), w.content[f.Path], mode); err != nil {
			return err
		}
	}
	return nil
}

// openSkillRoot opens the Skill directory p as a root that no lookup leaves, and checks that it
// is the directory p named when it was looked at (info): the same device and inode.
func openSkillRoot(p string, info fs.FileInfo) (*os.Root, error) {
	root, err := os.OpenRoot(p)
	if err != nil {
		return nil, fmt.Errorf("cannot open the Skill directory: %s", errText(err))
	}
	st, err := root.Stat(".")
	if err == nil && os.SameFile(st, info) {
		err = pinned(p, st)
	} else if err == nil {
		err = errors.New("the Skill directory changed while being read")
	}
	if err != nil {
		root.Close()
		return nil, err
	}
	return root, nil
}

// readSkillFile reads the regular file name of r without following a symlink or blocking on
// a fifo that replaced it since the walk, checks it is still the file the walk looked at
// (info), and applies the per-file cap.
func readSkillFile(r *os.Root, name string, info fs.FileInfo, limit int64) ([]byte, error) {
	f, err := r.OpenFile(name, os.O_RDONLY|noFollow|nonBlock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || !os.SameFile(st, info) {
		return nil, errors.New("changed while being read")
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
	sc.sandbox = runtime.PolicyReadOnly
	switch v := fm[SandboxKey].(type) {
	case nil:
	case string:
		switch p := runtime.Policy(strings.TrimSpace(v)); p {
		case runtime.PolicyReadOnly, runtime.PolicyWorkspaceWrite:
			sc.sandbox = p
		case runtime.PolicyFull:
			problems = append(problems, Problem{Path: ManifestFile, Reason: "sandbox: full is never granted to a Skill; ask for read-only or workspace-write"})
		default:
			problems = append(problems, Problem{Path: ManifestFile, Reason: fmt.Sprintf("sandbox: %q is not a sandbox policy; use read-only or workspace-write", v)})
		}
	default:
		problems = append(problems, Problem{Path: ManifestFile, Reason: "sandbox must be a string: read-only or workspace-write"})
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

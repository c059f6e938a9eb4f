// Command list-changed-files is the WASM twin of list-changed-files.sh (spec/pixie-gate.md): at
// the turn-end point it reports the git changes in the session's working directory, as
// `git status --porcelain | head -50` does, for the Pixie task ({{hooks.list-changed-files.text}}).
//
// A guest cannot run git, so it reads the repository itself through the read-only cwd mount
// (the gate's module rule must ask for the mount; without it, or outside a git work tree, the
// output is empty, as git's would be). It reads .git/index (versions 2 and 3), HEAD and the
// loose objects of HEAD's commit and trees, hashes changed work-tree files, and honours
// .gitignore files and .git/info/exclude (patterns with *, ?, [...], **, !, a trailing / and
// anchoring). It prints "XY path" lines in git's order: tracked changes, then untracked files
// ("??", a wholly untracked folder as "dir/").
//
// Where it falls short of git, and says so: history in pack files is not read (after a clone
// or git gc, HEAD's trees are usually packed), so the staged column then cannot be computed
// and a last line says "(staged changes not shown: HEAD is in a pack file)"; rename detection,
// file-mode changes, submodules, sparse checkouts, split indexes and index version 4 are not
// handled; the cwd must be the top of the work tree (the mount shows nothing above it).
package main

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/pixie-dev/pixie/sdk"
)

func main() {}

// root is the work tree: the guest's cwd, which is the mounted session cwd.
var root = "."

const maxLines = 50

func rule() int32 {
	lines, err := status(root)
	if err != nil {
		sdk.Logf("warn", "list-changed-files: %v", err)
		return sdk.Continue("")
	}
	if len(lines) > maxLines {
		lines = lines[:maxLines]
	}
	return sdk.Continue(strings.Join(lines, "\n"))
}

type entry struct {
	mode  uint32
	sha   string
	size  uint32
	mtime [2]uint32
}

var errPacked = errors.New("packed")

// status returns the porcelain lines for the work tree at dir.
func status(dir string) ([]string, error) {
	gitDir := path.Join(dir, ".git")
	if st, err := os.Stat(gitDir); err != nil || !st.IsDir() {
		return nil, nil // not a work tree: git prints nothing
	}
	index, err := readIndex(path.Join(gitDir, "index"))
	if err != nil {
		return nil, err
	}
	head, headErr := headTree(gitDir)
	if headErr != nil && !errors.Is(headErr, errPacked) {
		head = map[string]string{} // no commit yet: everything staged is new
	}
	changes := map[string][2]byte{}
	set := func(p string, col int, c byte) {
		v, ok := changes[p]
		if !ok {
			v = [2]byte{' ', ' '}
		}
		v[col] = c
		changes[p] = v
	}
	if headErr == nil {
		for p, sha := range index {
			if h, ok := head[p]; !ok {
				set(p, 0, 'A')
			} else if h != sha.sha {
				set(p, 0, 'M')
			}
		}
		for p := range head {
			if _, ok := index[p]; !ok {
				set(p, 0, 'D')
			}
		}
	}
	for p, e := range index {
		if e.mode == 0o160000 {
			continue
		}
		full := path.Join(dir, p)
		st, err := os.Lstat(full)
		if err != nil {
			set(p, 1, 'D')
			continue
		}
		if uint32(st.Size()) == e.size && uint32(st.ModTime().Unix()) == e.mtime[0] && uint32(st.ModTime().Nanosecond()) == e.mtime[1] {
			continue
		}
		sum, err := hashFile(full, st)
		if err != nil || sum != e.sha {
			set(p, 1, 'M')
		}
	}
	var out []string
	paths := make([]string, 0, len(changes))
	for p := range changes {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		c := changes[p]
		out = append(out, string(c[:])+" "+quote(p))
	}
	tracked := map[string]bool{}
	for p := range index {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			tracked[d+"/"] = true
		}
	}
	ig := &ignorer{}
	ig.load(path.Join(gitDir, "info", "exclude"), "")
	var untracked []string
	walkUntracked(dir, "", index, tracked, ig, &untracked)
	sort.Strings(untracked)
	for _, p := range untracked {
		out = append(out, "?? "+quote(p))
	}
	if errors.Is(headErr, errPacked) {
		out = append(out, "(staged changes not shown: HEAD is in a pack file)")
	}
	return out, nil
}

// walkUntracked lists untracked, not ignored files under rel; a folder holding no tracked file
// and at least one untracked one is listed as "dir/".
func walkUntracked(dir, rel string, index map[string]entry, tracked map[string]bool, ig *ignorer, out *[]string) {
	ig.load(path.Join(dir, rel, ".gitignore"), rel)
	ents, err := os.ReadDir(path.Join(dir, rel))
	if err != nil {
		return
	}
	for _, e := range ents {
		p := path.Join(rel, e.Name())
		if p == ".git" {
			continue
		}
		isDir := e.IsDir()
		if ig.ignored(p, isDir) {
			continue
		}
		if !isDir {
			if _, ok := index[p]; !ok {
				*out = append(*out, p)
			}
			continue
		}
		if tracked[p+"/"] {
			walkUntracked(dir, p, index, tracked, ig, out)
			continue
		}
		var sub []string
		walkUntracked(dir, p, index, tracked, ig.child(), &sub)
		if len(sub) > 0 {
			*out = append(*out, p+"/")
		}
	}
}

func hashFile(full string, st fs.FileInfo) (string, error) {
	var data []byte
	var err error
	if st.Mode()&fs.ModeSymlink != 0 {
		var target string
		target, err = os.Readlink(full)
		data = []byte(target)
	} else {
		data, err = os.ReadFile(full)
	}
	if err != nil {
		return "", err
	}
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// readIndex parses .git/index versions 2 and 3.
func readIndex(file string) (map[string]entry, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]entry{}, nil
	} else if err != nil {
		return nil, err
	}
	if len(b) < 12 || string(b[:4]) != "DIRC" {
		return nil, errors.New("index: bad signature")
	}
	ver := binary.BigEndian.Uint32(b[4:8])
	if ver != 2 && ver != 3 {
		return nil, fmt.Errorf("index: version %d is not supported", ver)
	}
	n := int(binary.BigEndian.Uint32(b[8:12]))
	out := make(map[string]entry, n)
	off := 12
	for range n {
		if off+62 > len(b) {
			return nil, errors.New("index: truncated")
		}
		e := b[off:]
		ent := entry{
			mtime: [2]uint32{binary.BigEndian.Uint32(e[8:12]), binary.BigEndian.Uint32(e[12:16])},
			mode:  binary.BigEndian.Uint32(e[24:28]),
			size:  binary.BigEndian.Uint32(e[36:40]),
			sha:   hex.EncodeToString(e[40:60]),
		}
		flags := binary.BigEndian.Uint16(e[60:62])
		hdr := 62
		if ver == 3 && flags&0x4000 != 0 {
			hdr += 2
		}
		end := bytes.IndexByte(e[hdr:], 0)
		if end < 0 {
			return nil, errors.New("index: truncated path")
		}
		name := string(e[hdr : hdr+end])
		if stage := (flags >> 12) & 3; stage == 0 || stage == 2 {
			out[name] = ent
		}
		size := hdr + end + 1
		size = (size + 7) &^ 7
		off += size
	}
	return out, nil
}

// headTree returns path → blob sha of HEAD's tree, from loose objects.
func headTree(gitDir string) (map[string]string, error) {
	sha, err := resolveHead(gitDir)
	if err != nil {
		return nil, err
	}
	typ, body, err := readObject(gitDir, sha)
	if err != nil {
		return nil, err
	}
	if typ != "commit" || !bytes.HasPrefix(body, []byte("tree ")) {
		return nil, errors.New("HEAD is not a commit")
	}
	out := map[string]string{}
	return out, walkTree(gitDir, string(body[5:45]), "", out)
}

func resolveHead(gitDir string) (string, error) {
	b, err := os.ReadFile(path.Join(gitDir, "HEAD"))
	if err != nil {
		return "", err
	}
	ref := strings.TrimSpace(string(b))
	if !strings.HasPrefix(ref, "ref: ") {
		return ref, nil
	}
	ref = strings.TrimPrefix(ref, "ref: ")
	if b, err := os.ReadFile(path.Join(gitDir, ref)); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	packed, err := os.ReadFile(path.Join(gitDir, "packed-refs"))
	if err != nil {
		return "", fmt.Errorf("no commit on %s", ref)
	}
	for _, line := range strings.Split(string(packed), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[1] == ref {
			return f[0], nil
		}
	}
	return "", fmt.Errorf("no commit on %s", ref)
}

func readObject(gitDir, sha string) (string, []byte, error) {
	if len(sha) != 40 {
		return "", nil, fmt.Errorf("bad object id %q", sha)
	}
	f, err := os.Open(path.Join(gitDir, "objects", sha[:2], sha[2:]))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil, errPacked
	} else if err != nil {
		return "", nil, err
	}
	defer f.Close()
	z, err := zlib.NewReader(f)
	if err != nil {
		return "", nil, err
	}
	raw, err := io.ReadAll(z)
	if err != nil {
		return "", nil, err
	}
	nul := bytes.IndexByte(raw, 0)
	if nul < 0 {
		return "", nil, errors.New("bad object header")
	}
	typ, _, _ := strings.Cut(string(raw[:nul]), " ")
	return typ, raw[nul+1:], nil
}

func walkTree(gitDir, sha, prefix string, out map[string]string) error {
	typ, body, err := readObject(gitDir, sha)
	if err != nil {
		return err
	}
	if typ != "tree" {
		return fmt.Errorf("%s is a %s, not a tree", sha, typ)
	}
	for len(body) > 0 {
		sp := bytes.IndexByte(body, ' ')
		nul := bytes.IndexByte(body, 0)
		if sp < 0 || nul < sp || nul+21 > len(body) {
			return errors.New("bad tree")
		}
		mode, _ := strconv.ParseUint(string(body[:sp]), 8, 32)
		name := path.Join(prefix, string(body[sp+1:nul]))
		id := hex.EncodeToString(body[nul+1 : nul+21])
		body = body[nul+21:]
		switch {
		case mode == 0o40000:
			if err := walkTree(gitDir, id, name, out); err != nil {
				return err
			}
		case mode != 0o160000:
			out[name] = id
		}
	}
	return nil
}

// quote renders a path as git does with core.quotePath: C-style quotes when it holds control
// characters, quotes, backslashes or bytes >= 0x80.
func quote(p string) string {
	need := false
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 || c == 0x7f {
			need = true
			break
		}
	}
	if !need {
		return p
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\n':
			b.WriteString(`\n`)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/pixie-dev/pixie/internal/clip"
	"github.com/pixie-dev/pixie/internal/errs"
)

// Limits of the file tools.
const (
	// DefaultListLimit and MaxListLimit cap the entries list shows.
	DefaultListLimit = 200
	MaxListLimit     = 2000
	// DefaultReadLines caps the lines read shows at once.
	DefaultReadLines = 2000
	// MaxReadOutput caps what one read shows, in bytes (cut at a line boundary).
	MaxReadOutput = 64 << 10
	// maxLine caps one line as read and search show it.
	maxLine = 2000
	// DefaultSearchLimit and MaxSearchLimit cap the matches search shows.
	DefaultSearchLimit = 100
	MaxSearchLimit     = 1000
	// MaxSearchFileSize: larger files are skipped by search.
	MaxSearchFileSize = 8 << 20
	// MaxSearchFiles caps the files one search reads.
	MaxSearchFiles = 20_000
	// maxListDepth caps a recursive listing.
	maxListDepth = 16
	// binarySniff is how much of a file is looked at to tell binary from text.
	binarySniff = 8 << 10
)

// FileOptions are the file tools' root and what stays out of sight.
type FileOptions struct {
	// Root is the directory every path resolves beneath (absolute).
	Root string
	// Hidden are directories never listed, read or searched, even inside Root (the Pixie home,
	// which holds the admin token, the credentials and the store).
	Hidden []string
}

// fileTools is the resolved root of list, read and search.
type fileTools struct {
	root   string // real path (symbolic links resolved)
	given  string // the root as given (absolute paths the model gives may use either)
	hidden []string
}

// FileTools returns the read-only tools list, read and search over o.Root. Every path a call
// gives is resolved beneath the root: "..", an absolute path outside it, a symbolic link (any
// component; links are shown by list but never followed) and a hidden directory are refused
// with a tool error the model sees.
func FileTools(o FileOptions) ([]Tool, error) {
	ft, err := newFileTools(o)
	if err != nil {
		return nil, err
	}
	return []Tool{
		{Name: "list", Description: "List the entries of a directory under the root (directories end in /). Set recursive to list subdirectories too (.git is not entered).",
			Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"directory, relative to the root (default \".\")"},"recursive":{"type":"boolean"},"limit":{"type":"integer","description":"at most this many entries (default 200, at most 2000)"}},"additionalProperties":false}`),
			Run:    ft.list},
		{Name: "read", Description: "Read a text file under the root, with line numbers. offset is the first line (from 1), limit the number of lines (default 2000). Binary files are refused.",
			Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"offset":{"type":"integer"},"limit":{"type":"integer"}},"required":["path"],"additionalProperties":false}`),
			Run:    ft.read},
		{Name: "search", Description: "Search the text files under a path for a literal string, or an RE2 regular expression when regex is true. Shows path:line: text for each match; .git, binary files and files over 8 MiB are skipped.",
			Schema: json.RawMessage(`{"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string","description":"file or directory, relative to the root (default \".\")"},"regex":{"type":"boolean"},"ignoreCase":{"type":"boolean"},"limit":{"type":"integer","description":"at most this many matches (default 100, at most 1000)"}},"required":["pattern"],"additionalProperties":false}`),
			Run:    ft.search},
	}, nil
}

func newFileTools(o FileOptions) (*fileTools, error) {
	if !filepath.IsAbs(o.Root) {
		return nil, errs.New(errs.Invalid, "agent: the root %q is not an absolute path", o.Root)
	}
	real, err := filepath.EvalSymlinks(o.Root)
	if err != nil {
		return nil, errs.Wrap(errs.Invalid, err, "agent: the root %s: %v", o.Root, err)
	}
	if st, err := os.Stat(real); err != nil || !st.IsDir() {
		return nil, errs.New(errs.Invalid, "agent: the root %s is not a directory", o.Root)
	}
	ft := &fileTools{root: real, given: filepath.Clean(o.Root)}
	for _, h := range o.Hidden {
		if !filepath.IsAbs(h) {
			return nil, errs.New(errs.Invalid, "agent: hidden directory %q is not absolute", h)
		}
		ft.hidden = append(ft.hidden, filepath.Clean(h))
		if r, err := filepath.EvalSymlinks(h); err == nil && r != filepath.Clean(h) {
			ft.hidden = append(ft.hidden, r)
		}
	}
	return ft, nil
}

// toolError is an error whose message the model gets as is.
func toolError(format string, args ...any) error { return fmt.Errorf(format, args...) }

// within reports whether p is dir or lies below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, string(filepath.Separator))+string(filepath.Separator))
}

// isHidden reports whether the real path p is (in) a hidden directory.
func (ft *fileTools) isHidden(p string) bool {
	for _, h := range ft.hidden {
		if within(p, h) {
			return true
		}
	}
	return false
}

// resolve turns a path the model gave into one relative to the root (slash-separated, "." for
// the root), refusing escapes, symbolic links and hidden directories.
func (ft *fileTools) resolve(r *os.Root, p string) (string, error) {
	given := p
	if p == "" {
		p = "."
	}
	if strings.ContainsRune(p, 0) || !utf8.ValidString(p) {
		return "", toolError("the path is not valid text")
	}
	if filepath.IsAbs(p) {
		c := filepath.Clean(p)
		base := ft.root
		if !within(c, base) {
			base = ft.given
		}
		if !within(c, base) {
			return "", toolError("%s is outside the root %s; give a path under it", given, ft.given)
		}
		p, _ = filepath.Rel(base, c)
	}
	rel := filepath.Clean(p)
	if rel != "." && !filepath.IsLocal(rel) {
		return "", toolError("%s leaves the root %s; give a path under it", given, ft.root)
	}
	if ft.isHidden(filepath.Join(ft.root, rel)) {
		return "", toolError("%s is not accessible (a hidden directory)", given)
	}
	if rel == "." {
		return ".", nil
	}
	// No component may be a symbolic link: links are not followed.
	parts := strings.Split(filepath.ToSlash(rel), "/")
	for i := range parts {
		sub := filepath.FromSlash(strings.Join(parts[:i+1], "/"))
		info, err := r.Lstat(sub)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return "", toolError("%s does not exist", filepath.ToSlash(sub))
			}
			return "", toolError("%s: %s", filepath.ToSlash(sub), errText(err))
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			return "", toolError("%s is a symbolic link; links are not followed", filepath.ToSlash(sub))
		}
	}
	return filepath.ToSlash(rel), nil
}

// open opens rel beneath the root for reading, without blocking on a fifo, and checks that what
// was opened really lies beneath the root and outside the hidden directories (a component
// swapped for a link since resolve is caught here).
func (ft *fileTools) open(r *os.Root, rel string) (*os.File, fs.FileInfo, error) {
	f, err := r.OpenFile(filepath.FromSlash(rel), os.O_RDONLY|nonBlock, 0)
	if err != nil {
		return nil, nil, toolError("%s: %s", rel, errText(err))
	}
	if real, ok := fdPath(f); ok && (!within(real, ft.root) || ft.isHidden(real)) {
		f.Close()
		return nil, nil, toolError("%s is not accessible", rel)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, toolError("%s: %s", rel, errText(err))
	}
	return f, info, nil
}

func (ft *fileTools) openRoot() (*os.Root, error) {
	r, err := os.OpenRoot(ft.root)
	if err != nil {
		return nil, toolError("cannot open the root %s: %s", ft.root, errText(err))
	}
	return r, nil
}

// decode reads a call's input into v, with a clear error for the model.
func decode(input json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return toolError("bad input: %v", err)
	}
	return nil
}

func (ft *fileTools) list(ctx context.Context, input json.RawMessage) (string, error) {
	var in struct {
		Path      string `json:"path"`
		Recursive bool   `json:"recursive"`
		Limit     int    `json:"limit"`
	}
	if err := decode(input, &in); err != nil {
		return "", err
	}
	limit, err := capped("limit", in.Limit, DefaultListLimit, MaxListLimit)
	if err != nil {
		return "", err
	}
	r, err := ft.openRoot()
	if err != nil {
		return "", err
	}
	defer r.Close()
	rel, err := ft.resolve(r, in.Path)
	if err != nil {
		return "", err
	}
	var lines []string
	more := 0
	var walk func(dir, prefix string, depth int) error
	walk = func(dir, prefix string, depth int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		f, info, err := ft.open(r, dir)
		if err != nil {
			return err
		}
		if !info.IsDir() {
			f.Close()
			return toolError("%s is not a directory; use read", dir)
		}
		entries, err := f.ReadDir(-1)
		f.Close()
		if err != nil {
			return toolError("%s: %s", dir, errText(err))
		}
		sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
		for _, e := range entries {
			child := path.Join(dir, e.Name())
			if ft.isHidden(filepath.Join(ft.root, filepath.FromSlash(child))) {
				continue
			}
			name := prefix + e.Name()
			var line string
			t := e.Type()
			switch {
			case t&fs.ModeSymlink != 0:
				target, _ := r.Readlink(filepath.FromSlash(child))
				line = name + " -> " + target + " (symbolic link, not followed)"
			case t.IsDir():
				line = name + "/"
			case t.IsRegular():
				size := int64(-1)
				if fi, err := e.Info(); err == nil {
					size = fi.Size()
				}
				line = fmt.Sprintf("%s  %d B", name, size)
			default:
				line = name + " (special file)"
			}
			if len(lines) >= limit {
				more++
			} else {
				lines = append(lines, line)
			}
			if in.Recursive && t.IsDir() && e.Name() != ".git" && depth < maxListDepth {
				if err := walk(child, name+"/", depth+1); err != nil {
					lines = append(lines, name+"/: "+msgOf(err))
				}
			}
		}
		return nil
	}
	if err := walk(rel, "", 0); err != nil {
		return "", err
	}
	head := fmt.Sprintf("%s (%d entries)", rel, len(lines)+more)
	if len(lines) == 0 {
		return head + "\n(empty)", nil
	}
	out := head + "\n" + strings.Join(lines, "\n")
	if more > 0 {
		out += fmt.Sprintf("\n[%d more entries not shown: raise limit (at most %d) or list a subdirectory]", more, MaxListLimit)
	}
	return out, nil
}

// capped checks an optional positive limit.
func capped(field string, v, def, most int) (int, error) {
	switch {
	case v < 0:
		return 0, toolError("%s must not be negative", field)
	case v == 0:
		return def, nil
	case v > most:
		return 0, toolError("%s is at most %d", field, most)
	}
	return v, nil
}

func (ft *fileTools) read(ctx context.Context, input json.RawMessage) (string, error) {
	var in struct {
		Path   string `json:"path"`
		Offset int    `json:"offset"`
		Limit  int    `json:"limit"`
	}
	if err := decode(input, &in); err != nil {
		return "", err
	}
	if in.Path == "" {
		return "", toolError("path is required")
	}
	if in.Offset < 0 || in.Limit < 0 {
		return "", toolError("offset and limit must not be negative")
	}
	first := max(in.Offset, 1)
	limit := in.Limit
	if limit == 0 {
		limit = DefaultReadLines
	}
	r, err := ft.openRoot()
	if err != nil {
		return "", err
	}
	defer r.Close()
	rel, err := ft.resolve(r, in.Path)
	if err != nil {
		return "", err
	}
	f, info, err := ft.open(r, rel)
	if err != nil {
		return "", err
	}
	defer f.Close()
	switch {
	case info.IsDir():
		return "", toolError("%s is a directory; use list", rel)
	case !info.Mode().IsRegular():
		return "", toolError("%s is not a regular file", rel)
	case linkCount(info) > 1:
		// Another name of the same file may lie outside the root, or in a hidden directory.
		return "", toolError("%s is a hard link (%d names); read it with the shell tool, whose sandbox decides", rel, linkCount(info))
	}
	br := bufio.NewReaderSize(f, binarySniff)
	if head, _ := br.Peek(binarySniff); isBinary(head, len(head) < binarySniff) {
		return "", toolError("%s is a binary file (%d bytes); read shows text files only", rel, info.Size())
	}
	var b strings.Builder
	n, shown := 0, 0
	for {
		if n%1024 == 0 && ctx.Err() != nil {
			return "", ctx.Err()
		}
		line, err := br.ReadString('\n')
		if line == "" && err != nil {
			if !errors.Is(err, io.EOF) {
				return "", toolError("%s: %s", rel, errText(err))
			}
			break
		}
		n++
		if n < first {
			continue
		}
		if shown >= limit {
			fmt.Fprintf(&b, "[more lines follow: read on with offset %d]\n", n)
			break
		}
		text := clip.BytesMark(strings.TrimRight(line, "\r\n"), maxLine, "…[line cut]")
		entry := fmt.Sprintf("%6d\t%s\n", n, text)
		if b.Len()+len(entry) > MaxReadOutput {
			fmt.Fprintf(&b, "[output cut at %d bytes: read on with offset %d]\n", MaxReadOutput, n)
			break
		}
		b.WriteString(entry)
		shown++
	}
	if shown == 0 && b.Len() == 0 {
		if n == 0 {
			return rel + " is empty", nil
		}
		return fmt.Sprintf("%s has %d lines; offset %d is past the end", rel, n, first), nil
	}
	return b.String(), nil
}

// isBinary reports whether head (the start of a file; whole when complete) looks binary: a NUL
// byte, or text that is not UTF-8 (a sequence cut at the end of an incomplete head is allowed).
func isBinary(head []byte, complete bool) bool {
	if bytes.IndexByte(head, 0) >= 0 {
		return true
	}
	if !complete {
		for i := 0; i < utf8.UTFMax && len(head) > 0 && !utf8.Valid(head); i++ {
			head = head[:len(head)-1]
		}
	}
	return !utf8.Valid(head)
}

func (ft *fileTools) search(ctx context.Context, input json.RawMessage) (string, error) {
	var in struct {
		Pattern    string `json:"pattern"`
		Path       string `json:"path"`
		Regex      bool   `json:"regex"`
		IgnoreCase bool   `json:"ignoreCase"`
		Limit      int    `json:"limit"`
	}
	if err := decode(input, &in); err != nil {
		return "", err
	}
	if in.Pattern == "" {
		return "", toolError("pattern is required")
	}
	limit, err := capped("limit", in.Limit, DefaultSearchLimit, MaxSearchLimit)
	if err != nil {
		return "", err
	}
	expr := in.Pattern
	if !in.Regex {
		expr = regexp.QuoteMeta(expr)
	}
	if in.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return "", toolError("bad regular expression: %v", err)
	}
	r, err := ft.openRoot()
	if err != nil {
		return "", err
	}
	defer r.Close()
	rel, err := ft.resolve(r, in.Path)
	if err != nil {
		return "", err
	}
	s := &searcher{ft: ft, r: r, re: re, limit: limit}
	if err := s.walk(ctx, rel, 0); err != nil {
		return "", err
	}
	if len(s.out) == 0 {
		return fmt.Sprintf("no match in %d files", s.files), nil
	}
	out := strings.Join(s.out, "\n")
	if s.more > 0 {
		out += fmt.Sprintf("\n[%d more matches not shown: raise limit (at most %d) or narrow the path or pattern]", s.more, MaxSearchLimit)
	}
	if s.files >= MaxSearchFiles {
		out += fmt.Sprintf("\n[stopped after %d files: narrow the path]", MaxSearchFiles)
	}
	return out, nil
}

type searcher struct {
	ft    *fileTools
	r     *os.Root
	re    *regexp.Regexp
	limit int
	out   []string
	more  int
	files int
}

func (s *searcher) walk(ctx context.Context, rel string, depth int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.files >= MaxSearchFiles {
		return nil
	}
	f, info, err := s.ft.open(s.r, rel)
	if err != nil {
		if depth == 0 {
			return err
		}
		return nil
	}
	if !info.IsDir() {
		defer f.Close()
		if !info.Mode().IsRegular() || info.Size() > MaxSearchFileSize || linkCount(info) > 1 {
			return nil
		}
		s.files++
		return s.file(ctx, f, rel)
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return nil
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	for _, e := range entries {
		t := e.Type()
		child := path.Join(rel, e.Name())
		if t&fs.ModeSymlink != 0 || (t.IsDir() && (e.Name() == ".git" || depth >= maxListDepth*2)) ||
			s.ft.isHidden(filepath.Join(s.ft.root, filepath.FromSlash(child))) || !(t.IsDir() || t.IsRegular()) {
			continue
		}
		if err := s.walk(ctx, child, depth+1); err != nil {
			return err
		}
	}
	return nil
}

func (s *searcher) file(ctx context.Context, f *os.File, rel string) error {
	br := bufio.NewReaderSize(f, binarySniff)
	if head, _ := br.Peek(binarySniff); isBinary(head, len(head) < binarySniff) {
		return nil
	}
	n := 0
	for {
		line, err := br.ReadString('\n')
		if line == "" && err != nil {
			return nil
		}
		n++
		if n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		text := strings.TrimRight(line, "\r\n")
		if !s.re.MatchString(text) {
			continue
		}
		if len(s.out) >= s.limit {
			s.more++
			continue
		}
		s.out = append(s.out, fmt.Sprintf("%s:%d: %s", rel, n, clip.BytesMark(text, maxLine/4, "…")))
	}
}

// errText is an error's message without the path prefix os adds.
func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	return err.Error()
}

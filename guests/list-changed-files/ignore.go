package main

import (
	"os"
	"path"
	"strings"
)

// pattern is one gitignore line.
type pattern struct {
	base     string // folder of the .gitignore, "" at the top
	glob     string
	negate   bool
	dirOnly  bool
	anchored bool // contains a slash: matched against the path below base
}

// ignorer holds the patterns in force, last one winning.
type ignorer struct{ pats []pattern }

func (ig *ignorer) child() *ignorer { return &ignorer{pats: append([]pattern(nil), ig.pats...)} }

// load reads a .gitignore (or info/exclude) whose patterns apply below base.
func (ig *ignorer) load(file, base string) {
	b, err := os.ReadFile(file)
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimRight(line, " ")
		p := pattern{base: base}
		if strings.HasPrefix(line, "!") {
			p.negate, line = true, line[1:]
		} else if strings.HasPrefix(line, `\`) {
			line = line[1:]
		}
		if strings.HasSuffix(line, "/") {
			p.dirOnly, line = true, strings.TrimSuffix(line, "/")
		}
		if strings.Contains(line, "/") {
			p.anchored, line = true, strings.TrimPrefix(line, "/")
		}
		p.glob = line
		ig.pats = append(ig.pats, p)
	}
}

// ignored reports whether rel (a path from the top of the work tree) is ignored.
func (ig *ignorer) ignored(rel string, isDir bool) bool {
	out := false
	for _, p := range ig.pats {
		if p.dirOnly && !isDir {
			continue
		}
		sub := rel
		if p.base != "" {
			if !strings.HasPrefix(rel, p.base+"/") {
				continue
			}
			sub = strings.TrimPrefix(rel, p.base+"/")
		}
		var ok bool
		if p.anchored {
			ok = match(p.glob, sub)
		} else {
			ok = match(p.glob, path.Base(sub))
		}
		if ok {
			out = !p.negate
		}
	}
	return out
}

// match matches a glob with *, ?, [...] within a segment and ** across segments.
func match(glob, name string) bool {
	if glob == "**" {
		return true
	}
	if rest, ok := strings.CutPrefix(glob, "**/"); ok {
		for s := name; ; {
			if match(rest, s) {
				return true
			}
			i := strings.IndexByte(s, '/')
			if i < 0 {
				return false
			}
			s = s[i+1:]
		}
	}
	if i := strings.Index(glob, "/**/"); i >= 0 {
		head, tail := glob[:i], glob[i+4:]
		parts := strings.Split(name, "/")
		for j := 1; j < len(parts); j++ {
			if match(head, strings.Join(parts[:j], "/")) && match("**/"+tail, strings.Join(parts[j:], "/")) {
				return true
			}
		}
		return false
	}
	if head, ok := strings.CutSuffix(glob, "/**"); ok {
		parts := strings.Split(name, "/")
		for j := 1; j < len(parts); j++ {
			if match(head, strings.Join(parts[:j], "/")) {
				return true
			}
		}
		return false
	}
	ok, err := path.Match(glob, name)
	return err == nil && ok
}

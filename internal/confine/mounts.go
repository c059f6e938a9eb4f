package confine

import (
	"path/filepath"
	"sort"
	"strings"
)

// mount is one entry of the mount table.
type mount struct {
	dev   string // the file system, as major:minor
	root  string // the mount's root, as a path inside its file system
	point string // where it is mounted
}

// fileID identifies a file: its device and inode numbers.
type fileID struct{ dev, ino uint64 }

// aliases computes Aliases for the resolved directory real over the mount table mounts; id
// stats a path (following symbolic links), reporting false when it cannot.
func aliases(real string, mounts []mount, id func(string) (fileID, bool)) []string {
	seen := map[string]bool{real: true}
	var extra []string
	add := func(p string) {
		p = filepath.Clean(p)
		if !seen[p] {
			seen[p] = true
			extra = append(extra, p)
		}
	}
	// A region is a part of one file system that must stay hidden: dir's own, and the root of
	// each mount nested inside dir. at is where the region is reached through dir.
	type region struct{ dev, fs, at string }
	var regions []region
	if m, ok := containing(real, mounts); ok {
		regions = append(regions, region{m.dev, join(m.root, strings.TrimPrefix(real, m.point)), real})
	}
	for _, m := range mounts {
		if m.point != real && Within(m.point, real) {
			regions = append(regions, region{m.dev, m.root, m.point})
		}
	}
	for _, r := range regions {
		want, wantOK := id(r.at)
		for _, m := range mounts {
			if m.dev != r.dev {
				continue
			}
			switch {
			case Within(m.root, r.fs):
				// The mount shows the region, or a part of it, at its mount point.
				add(m.point)
			case Within(r.fs, m.root):
				// The mount shows a tree that holds the region: the region appears below its
				// mount point, unless another mount covers that path (then it stats differently).
				p := join(m.point, relTo(r.fs, m.root))
				if got, ok := id(p); ok && wantOK && got == want {
					add(p)
				}
			}
		}
	}
	sort.Strings(extra)
	return append([]string{real}, extra...)
}

// containing returns the mount that holds the resolved path p: the one with the longest mount
// point above it, the last listed among equals (it is mounted over the others).
func containing(p string, mounts []mount) (mount, bool) {
	var best mount
	found := false
	for _, m := range mounts {
		if Within(p, m.point) && (!found || len(m.point) >= len(best.point)) {
			best, found = m, true
		}
	}
	return best, found
}

// join appends rest (a path that starts with "/" or is empty) to dir.
func join(dir, rest string) string {
	if rest == "" {
		return dir
	}
	return filepath.Join(dir, rest)
}

// relTo returns the part of p below dir ("" when p is dir); p must lie within dir.
func relTo(p, dir string) string {
	if dir == "/" {
		if p == "/" {
			return ""
		}
		return p
	}
	return strings.TrimPrefix(p, dir)
}

// unescapeMount decodes the octal escapes (\040 for a space, \011, \012, \134) the kernel
// writes in the paths of the mount table.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) && isOctal(s[i+1:i+4]) {
			v := (s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0')
			b.WriteByte(v)
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if s[i] < '0' || s[i] > '7' {
			return false
		}
	}
	return true
}

// parseMountInfo parses /proc/<pid>/mountinfo.
func parseMountInfo(text string) []mount {
	var out []mount
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		// id parent major:minor root point options [optional…] - type source superoptions
		if len(f) < 5 {
			continue
		}
		out = append(out, mount{dev: f[2], root: unescapeMount(f[3]), point: unescapeMount(f[4])})
	}
	return out
}

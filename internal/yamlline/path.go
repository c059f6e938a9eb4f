package yamlline

import (
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// PathLine returns the 1-based line of raw at which the member named by path begins (a path as
// the server names fields: gates[0].advanced.onErrror), or 0 when raw does not parse or has no
// such member. For a mapping key it is the key's line, so a misspelt key is found where it is
// written.
func PathLine(raw []byte, path string) int {
	var doc yaml.Node
	if yaml.Unmarshal(raw, &doc) != nil || doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return 0
	}
	segs := splitPath(path)
	if segs == nil {
		return 0
	}
	n := doc.Content[0]
	line := n.Line
	for _, seg := range segs {
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		switch {
		case seg.index >= 0:
			if n.Kind != yaml.SequenceNode || seg.index >= len(n.Content) {
				return 0
			}
			n = n.Content[seg.index]
			line = n.Line
		default:
			if n.Kind != yaml.MappingNode {
				return 0
			}
			found := false
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == seg.name {
					line, n, found = n.Content[i].Line, n.Content[i+1], true
					break
				}
			}
			if !found {
				return 0
			}
		}
	}
	return line
}

type pathSeg struct {
	name  string
	index int // -1 for a name
}

// splitPath splits a.b[2].c into a, b, [2], c.
func splitPath(path string) []pathSeg {
	var out []pathSeg
	for _, part := range strings.Split(path, ".") {
		name, rest, _ := strings.Cut(part, "[")
		if name != "" {
			out = append(out, pathSeg{name: name, index: -1})
		}
		for rest != "" {
			num, after, ok := strings.Cut(rest, "]")
			i, err := strconv.Atoi(num)
			if !ok || err != nil || i < 0 {
				return nil
			}
			out = append(out, pathSeg{index: i})
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return out
}

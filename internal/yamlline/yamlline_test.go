package yamlline_test

import (
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/pixie-dev/pixie/internal/yamlline"
)

func TestFixNamesTheBrokenLine(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		line int
	}{
		{"bad indent", "gates:\n  - name: a\n    point: x\n   bad: 1\n", 4},
		{"tab", "gates:\n  - name: a\n\tpoint: x\n", 3},
		{"deep bad indent", "gates:\n  - name: a\n    point: x\n  - name: b\n    point: y\n    task: t\n     oops: 1\n", 7},
		{"mapping value", "gates:\n  - name: a\n    task: x: y\n", 3},
		{"unclosed flow", "gates:\n  - name: a\n    point: [\n", 3},
		{"unclosed quote", "gates:\n  - name: a\n    task: \"unclosed\n  - name: b\n", 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var v any
			err := yamlline.Fix([]byte(c.doc), yaml.Unmarshal([]byte(c.doc), &v))
			var ye *yamlline.Error
			if !errorsAs(err, &ye) {
				t.Fatalf("not a syntax error: %v", err)
			}
			if ye.Line != c.line {
				t.Fatalf("line %d, want %d (%v)", ye.Line, c.line, err)
			}
		})
	}
}

func TestFixLeavesOtherErrors(t *testing.T) {
	doc := "a: 1\na: 2\n"
	var v map[string]int
	orig := yaml.Unmarshal([]byte(doc), &v)
	if got := yamlline.Fix([]byte(doc), orig); got != orig {
		t.Fatalf("changed %v into %v", orig, got)
	}
	if yamlline.Fix(nil, nil) != nil {
		t.Fatal("nil error changed")
	}
}

func errorsAs(err error, target **yamlline.Error) bool {
	e, ok := err.(*yamlline.Error)
	if ok {
		*target = e
	}
	return ok
}

// TestPathLineFindsTheMember maps the server's field paths back to the lines of a gate file.
func TestPathLineFindsTheMember(t *testing.T) {
	doc := []byte("gates:\n  - name: a\n    point: user-message\n    taks: t\n  - name: b\n    advanced:\n      onErrror: stop\npresets:\n  - name: dev\n    gates: [{gate: a, enabeld: false}]\n")
	for path, want := range map[string]int{
		"gates[0].taks":               4,
		"gates[1].advanced.onErrror":  7,
		"gates[1]":                    5,
		"presets[0].gates[0].enabeld": 10,
		"gates[2].name":               0,
		"gates[0].nothere":            0,
		"presets[x]":                  0,
	} {
		if got := yamlline.PathLine(doc, path); got != want {
			t.Errorf("%s: line %d, want %d", path, got, want)
		}
	}
	if yamlline.PathLine([]byte("a: [\n"), "a") != 0 {
		t.Error("a document that does not parse has no lines")
	}
}

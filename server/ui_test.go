package server

import (
	"io/fs"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/gate"
)

// jsImport finds a module specifier: `import … from '…'`, `export … from '…'`, a bare
// `import '…'`, and a dynamic `import('…')`. Studio's modules write specifiers in single quotes.
var jsImport = regexp.MustCompile(`(?m)(?:^\s*(?:import|export)\b[^'();]*?\bfrom\s*'([^']+)'|^\s*import\s*'([^']+)'|\bimport\(\s*'([^']+)'\s*\))`)

// uiImports reads every Studio module from the embedded files (what is served) and returns each
// one's imports, resolved to paths inside ui/.
func uiImports(t *testing.T) map[string][]string {
	t.Helper()
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		t.Fatal(err)
	}
	graph := map[string][]string{}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".js") {
			return err
		}
		b, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		deps := []string{}
		for _, m := range jsImport.FindAllStringSubmatch(string(b), -1) {
			spec := m[1] + m[2] + m[3]
			if !strings.HasPrefix(spec, "./") && !strings.HasPrefix(spec, "../") {
				t.Errorf("%s imports %q: Studio's modules import only relative paths inside ui/", p, spec)
				continue
			}
			dep := path.Join(path.Dir(p), spec)
			if _, err := fs.Stat(sub, dep); err != nil {
				t.Errorf("%s imports %q, which is not there (%s)", p, spec, dep)
			}
			deps = append(deps, dep)
		}
		graph[p] = deps
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return graph
}

// layer names the room a module is in: the shell (app.js), a page (pages/), or the library
// (lib/).
func layer(p string) string {
	switch {
	case p == "app.js":
		return "shell"
	case strings.HasPrefix(p, "pages/"):
		return "pages"
	case strings.HasPrefix(p, "lib/"):
		return "lib"
	}
	return "other"
}

// TestStudioImportsOneWay: Studio's modules import one way, lib → pages → shell. lib/ imports
// only lib/, a page imports only lib/, nothing imports the shell, and there is no cycle.
func TestStudioImportsOneWay(t *testing.T) {
	graph := uiImports(t)
	for _, want := range []string{"app.js", "lib/api.js", "lib/dom.js", "lib/points.js", "pages/gates.js"} {
		if _, ok := graph[want]; !ok {
			t.Fatalf("no %s among Studio's modules %v", want, keys(graph))
		}
	}
	may := map[string][]string{"lib": {"lib"}, "pages": {"lib"}, "shell": {"lib", "pages"}}
	for p, deps := range graph {
		if layer(p) == "other" {
			t.Errorf("%s is in no room (app.js, pages/ or lib/)", p)
		}
		for _, d := range deps {
			if !slices.Contains(may[layer(p)], layer(d)) {
				t.Errorf("%s (%s) imports %s (%s): %s may import only %v", p, layer(p), d, layer(d), layer(p), may[layer(p)])
			}
		}
	}
	// No cycle, even inside a room: a depth-first walk never meets a module it is still inside.
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var walk func(p string, stack []string)
	walk = func(p string, stack []string) {
		switch state[p] {
		case open:
			t.Errorf("import cycle: %s", strings.Join(append(stack, p), " → "))
			return
		case done:
			return
		}
		state[p] = open
		for _, d := range graph[p] {
			walk(d, append(stack, p))
		}
		state[p] = done
	}
	for _, p := range keys(graph) {
		walk(p, nil)
	}
}

// TestStudioModulesAreTypeChecked: every Studio module opts in to type checking (`make check`
// runs tsc --noEmit over them, internal/tools/tsc), so a new module cannot slip past it.
func TestStudioModulesAreTypeChecked(t *testing.T) {
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		t.Fatal(err)
	}
	for p := range uiImports(t) {
		b, err := fs.ReadFile(sub, p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(b), "// @ts-check\n") {
			t.Errorf("%s does not start with // @ts-check", p)
		}
	}
}

// TestStudioKeepsNoCopyOfThePointTable: the point table's words live in internal/gate alone;
// Studio reads them from GET /v1/gates/points (lib/points.js). A module that spells out a
// point's label or what a field does there (any text of 12 characters or more; the short ones,
// such as "Recorded", are ordinary words elsewhere too) is a copy that would drift.
func TestStudioKeepsNoCopyOfThePointTable(t *testing.T) {
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		t.Fatal(err)
	}
	var words []string
	for _, p := range gate.PointTable() {
		words = append(words, p.Label, p.Apply.Stop, p.Apply.Replacement, p.Apply.Addition, p.Apply.Note)
	}
	checked := 0
	for p := range uiImports(t) {
		b, err := fs.ReadFile(sub, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range words {
			if len(w) < 12 {
				continue
			}
			checked++
			if strings.Contains(string(b), w) {
				t.Errorf("%s holds %q from the point table: read it from GET /v1/gates/points (lib/points.js)", p, w)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no text of the point table was long enough to look for")
	}
}

func keys(m map[string][]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

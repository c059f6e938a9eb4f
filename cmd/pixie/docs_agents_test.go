package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/testutil"
)

// docBlocks returns the fenced blocks of a doc that follow a "<!-- pixie-test: NAME -->" marker.
func docBlocks(t testing.TB, doc string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testutil.Root(), "docs", "agents", doc))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- pixie-test: ([a-z]+) -->\\s*```[a-z]*\\n(.*?)```")
	out := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(string(raw), -1) {
		out[m[1]] = m[2]
	}
	return out
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(t testing.TB, a, b string) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal([]byte(a), &va); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, a)
	}
	if err := json.Unmarshal([]byte(b), &vb); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return reflect.DeepEqual(va, vb)
}

// exampleServer starts the real server with the docs' example gate: the block-risky-commands
// guest uploaded as a module and the gates YAML of claude-code.md applied with `pixie gate
// apply`.
func exampleServer(t testing.TB) (*testutil.Proc, []string) {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	p := testutil.StartServer(t, home, nil)
	t.Cleanup(func() { p.Stop(t) })
	tok := p.Token(t)
	env := []string{"PIXIE_SERVER_URL=" + p.URL, "PIXIE_HOME=" + home}

	req, err := http.NewRequest(http.MethodPost, p.URL+"/v1/modules?name=block-risky-commands",
		bytes.NewReader(testutil.Guest(t, "block-risky-commands")))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/wasm")
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("module upload: %d %s", resp.StatusCode, body)
	}

	gates := filepath.Join(t.TempDir(), "gates.yaml")
	if err := os.WriteFile(gates, []byte(docBlocks(t, "claude-code.md")["gates"]), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runIn(t, "", append(hookEnv(), env...), "gate", "apply", "-f", gates); r.code != 0 {
		t.Fatalf("pixie gate apply: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	return p, env
}

// TestDocsAgentsExamples runs the examples of docs/agents/claude-code.md and codex.md as
// written: the hook input through the command adapter and through the http endpoint must give
// the documented answer.
func TestDocsAgentsExamples(t *testing.T) {
	p, env := exampleServer(t)
	tok := p.Token(t)
	for _, doc := range []string{"claude-code.md", "codex.md"} {
		t.Run(doc, func(t *testing.T) {
			blocks := docBlocks(t, doc)
			var names []string
			for k := range blocks {
				names = append(names, k)
			}
			sort.Strings(names)
			if blocks["input"] == "" || blocks["output"] == "" {
				t.Fatalf("%s has no marked input and output (found %v)", doc, names)
			}
			r := runHookCmd(t, []byte(blocks["input"]), env, "--preset", "default")
			if r.code != 0 || !sameJSON(t, r.stdout, blocks["output"]) {
				t.Fatalf("pixie hook claude: exit %d\nstdout %s\nstderr %s\nwant %s", r.code, r.stdout, r.stderr, blocks["output"])
			}
			req, _ := http.NewRequest(http.MethodPost, p.URL+"/v1/hooks/claude-code?preset=default", strings.NewReader(blocks["input"]))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !sameJSON(t, string(body), blocks["output"]) {
				t.Fatalf("http hook: %d %s\nwant %s", resp.StatusCode, body, blocks["output"])
			}
		})
	}
}

// TestSkillAndDocsNameRealVerbs: every `pixie <verb>` the agent skill and the agent docs tell
// an agent or a person to run is a verb of this binary.
func TestSkillAndDocsNameRealVerbs(t *testing.T) {
	files := []string{
		filepath.Join(testutil.Root(), "internal", "agentskill", "skill", "SKILL.md"),
		filepath.Join(testutil.Root(), "internal", "agentskill", "skill", "guide.md"),
		filepath.Join(testutil.Root(), "docs", "agents", "claude-code.md"),
		filepath.Join(testutil.Root(), "docs", "agents", "codex.md"),
	}
	re := regexp.MustCompile("(?:^|[\\s`(\"'])pixie ([a-z][a-z-]*)")
	seen := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(line, "#") { // headings and shell comments are prose
				continue
			}
			for _, m := range re.FindAllStringSubmatch(line, -1) {
				seen++
				if root.find(m[1]) == nil {
					t.Errorf("%s: `pixie %s` is not a verb of the binary", filepath.Base(f), m[1])
				}
			}
		}
	}
	if seen < 20 {
		t.Fatalf("only %d pixie commands found; the pattern is broken", seen)
	}
}

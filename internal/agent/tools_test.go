package agent_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/agent"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/bash"
	"github.com/pixie-dev/pixie/runtime/sandbox"
)

// call runs the tool named name of tools with input.
func call(t *testing.T, tools []agent.Tool, name, input string) (string, error) {
	t.Helper()
	for _, tl := range tools {
		if tl.Name == name {
			return tl.Run(context.Background(), json.RawMessage(input))
		}
	}
	t.Fatalf("no tool %s", name)
	return "", nil
}

// TestFileToolsStayBeneathTheRoot: every way out of the root, or into a hidden directory, is a
// tool error; paths beneath the root work, given relative or absolute.
func TestFileToolsStayBeneathTheRoot(t *testing.T) {
	outside := tree(t, map[string]string{"secret.txt": "outside secret"})
	root := tree(t, map[string]string{"a.txt": "alpha\n", "sub/b.txt": "beta\n", ".pixie/admin-token": "tok", ".git/config": "[core]", "bin.dat": "a\x00b"})
	hidden := filepath.Join(root, ".pixie")
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(root, "out-file")))
	must(os.Symlink(outside, filepath.Join(root, "out-dir")))
	must(os.Symlink("a.txt", filepath.Join(root, "in-link")))
	must(os.Symlink(".pixie", filepath.Join(root, "to-hidden")))
	must(syscall.Mkfifo(filepath.Join(root, "fifo"), 0o600))
	// A hard link to a file outside the root (as a workspace-write command could make).
	must(os.Link(filepath.Join(outside, "secret.txt"), filepath.Join(root, "hard.txt")))
	tools := fileTools(t, root, hidden)
	for _, tc := range []struct {
		tool, input, want string
		isErr             bool
	}{
		{"read", `{"path":"a.txt"}`, "     1\talpha\n", false},
		{"read", `{"path":"` + filepath.Join(root, "sub/b.txt") + `"}`, "     1\tbeta\n", false},
		{"read", `{"path":"sub/../a.txt"}`, "     1\talpha\n", false},
		{"read", `{"path":"../` + filepath.Base(outside) + `/secret.txt"}`, "leaves the root", true},
		{"read", `{"path":"` + filepath.Join(outside, "secret.txt") + `"}`, "is outside the root", true},
		{"read", `{"path":"/etc/passwd"}`, "is outside the root", true},
		{"read", `{"path":"out-file"}`, "out-file is a symbolic link; links are not followed", true},
		{"read", `{"path":"out-dir/secret.txt"}`, "out-dir is a symbolic link", true},
		{"read", `{"path":"in-link"}`, "in-link is a symbolic link", true},
		{"read", `{"path":"to-hidden/admin-token"}`, "to-hidden is a symbolic link", true},
		{"read", `{"path":".pixie/admin-token"}`, "not accessible (a hidden directory)", true},
		{"read", `{"path":"` + hidden + `/admin-token"}`, "not accessible", true},
		{"read", `{"path":"bin.dat"}`, "is a binary file", true},
		{"read", `{"path":"fifo"}`, "not a regular file", true},
		{"read", `{"path":"sub"}`, "is a directory; use list", true},
		{"read", `{"path":"nope.txt"}`, "nope.txt does not exist", true},
		{"list", `{"path":"out-dir"}`, "out-dir is a symbolic link", true},
		{"list", `{"path":".pixie"}`, "not accessible", true},
		{"list", `{"path":"a.txt"}`, "not a directory", true},
		{"search", `{"pattern":"secret","path":"out-dir"}`, "out-dir is a symbolic link", true},
		{"search", `{"pattern":"tok"}`, "no match", false},
		{"read", `{"path":"hard.txt"}`, "hard.txt is a hard link (2 names)", true},
		{"search", `{"pattern":"outside secret"}`, "no match", false},
	} {
		t.Run(tc.tool+" "+tc.input, func(t *testing.T) {
			out, err := call(t, tools, tc.tool, tc.input)
			text := out
			if err != nil {
				text = err.Error()
			}
			if (err != nil) != tc.isErr || !strings.Contains(text, tc.want) {
				t.Fatalf("got %q (err %v), want %q", text, err, tc.want)
			}
			if strings.Contains(text, "outside secret") || strings.Contains(text, "tok\n") {
				t.Fatalf("leaked: %q", text)
			}
		})
	}
	t.Run("list shows links without following them and hides the hidden", func(t *testing.T) {
		out, err := call(t, tools, "list", `{"recursive":true}`)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"a.txt  6 B", "sub/", "sub/b.txt  5 B", "out-dir -> " + outside + " (symbolic link, not followed)", ".git/", "fifo (special file)"} {
			if !strings.Contains(out, want) {
				t.Errorf("listing lacks %q:\n%s", want, out)
			}
		}
		for _, not := range []string{".pixie/", "admin-token", ".git/config", "\nsecret.txt  "} {
			if strings.Contains(out, not) {
				t.Errorf("listing shows %q:\n%s", not, out)
			}
		}
	})
}

func TestFileToolLimits(t *testing.T) {
	files := map[string]string{}
	var lines []string
	for i := range 30 {
		files[filepath.Join("d", strings.Repeat("f", 1)+itoa(i))] = "needle here\n"
		lines = append(lines, "line "+itoa(i+1))
	}
	files["many.txt"] = strings.Join(lines, "\n") + "\n"
	files["long.txt"] = strings.Repeat(strings.Repeat("z", 1000)+"\n", 100)
	root := tree(t, files)
	tools := fileTools(t, root)
	for _, tc := range []struct {
		name, tool, input, want string
		isErr                   bool
	}{
		{"list limit", "list", `{"path":"d","limit":29}`, "[1 more entries not shown", false},
		{"list limit at the count", "list", `{"path":"d","limit":30}`, "d (30 entries)", false},
		{"list limit at the cap", "list", `{"limit":2000}`, "entries)", false},
		{"list limit over the cap", "list", `{"limit":2001}`, "limit is at most 2000", true},
		{"read offset and limit", "read", `{"path":"many.txt","offset":5,"limit":2}`, "     5\tline 5\n     6\tline 6\n[more lines follow: read on with offset 7]", false},
		{"read past the end", "read", `{"path":"many.txt","offset":31}`, "has 30 lines; offset 31 is past the end", false},
		{"read negative", "read", `{"path":"many.txt","offset":-1}`, "must not be negative", true},
		{"read output cap", "read", `{"path":"long.txt"}`, "[output cut at 65536 bytes: read on with offset 66]", false},
		{"search literal", "search", `{"pattern":"needle","path":"d","limit":1}`, "d/f0:1: needle here\n[29 more matches", false},
		{"search regex", "search", `{"pattern":"^line (7|8)$","regex":true,"path":"many.txt"}`, "many.txt:7: line 7\nmany.txt:8: line 8", false},
		{"search literal is literal", "search", `{"pattern":"line (7|8)","path":"many.txt"}`, "no match in 1 files", false},
		{"search ignore case", "search", `{"pattern":"LINE 30","ignoreCase":true}`, "many.txt:30: line 30", false},
		{"search bad regex", "search", `{"pattern":"(","regex":true}`, "bad regular expression", true},
		{"search limit over the cap", "search", `{"pattern":"x","limit":1001}`, "at most 1000", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := call(t, tools, tc.tool, tc.input)
			text := out
			if err != nil {
				text = err.Error()
			}
			if (err != nil) != tc.isErr || !strings.Contains(text, tc.want) {
				t.Fatalf("got %q (err %v), want %q", clipText(text), err, tc.want)
			}
		})
	}
}

func clipText(s string) string {
	if len(s) > 400 {
		return s[:200] + "…" + s[len(s)-200:]
	}
	return s
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func bashExec(t *testing.T) runtime.Executor {
	t.Helper()
	bx, err := bash.New(context.Background(), bash.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bx.Close(context.Background()) })
	return runtime.Dispatcher{runtime.KindScript: bx}
}

// TestShellPolicies: the shell tool runs in the root under its policy: workspace-write may
// change the root, read-only may not (the sandbox refuses and the result says so); environment
// values reach the command; the per-command time limit holds.
func TestShellPolicies(t *testing.T) {
	if err := sandbox.Probe(); err != nil {
		t.Skipf("no Landlock here (%v): the sandboxed policies fail closed, tested in runtime/bash", err)
	}
	ex := bashExec(t)
	shell := func(t *testing.T, root string, p runtime.Policy) agent.Tool {
		sh, err := agent.NewShell(agent.ShellOptions{Exec: ex, Root: root, Policy: p, Env: map[string]string{"DSH_PET_X": "xval"}, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sh.Close() })
		return sh.Tool()
	}
	t.Run("workspace-write", func(t *testing.T) {
		root := tree(t, map[string]string{"a.tmp": "1", "keep.txt": "2"})
		tool := shell(t, root, runtime.PolicyWorkspaceWrite)
		out, err := tool.Run(context.Background(), json.RawMessage(`{"command":"rm -v *.tmp; echo \"x=$DSH_PET_X pwd=$PWD\""}`))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(out, "exit status 0\nstdout:\n") || !strings.Contains(out, "removed 'a.tmp'") || !strings.Contains(out, "x=xval pwd="+root) {
			t.Fatalf("out %q", out)
		}
		if _, err := os.Stat(filepath.Join(root, "a.tmp")); !os.IsNotExist(err) {
			t.Fatal("a.tmp is still there")
		}
	})
	t.Run("read-only", func(t *testing.T) {
		root := tree(t, map[string]string{"a.tmp": "1"})
		tool := shell(t, root, runtime.PolicyReadOnly)
		_, err := tool.Run(context.Background(), json.RawMessage(`{"command":"rm a.tmp"}`))
		if err == nil || !strings.Contains(err.Error(), "exit status 1") || !strings.Contains(err.Error(), "Permission denied") {
			t.Fatalf("err %v", err)
		}
		if _, err := os.Stat(filepath.Join(root, "a.tmp")); err != nil {
			t.Fatal("a.tmp is gone under read-only")
		}
	})
	t.Run("time limit", func(t *testing.T) {
		tool := shell(t, t.TempDir(), runtime.PolicyReadOnly)
		start := time.Now()
		_, err := tool.Run(context.Background(), json.RawMessage(`{"command":"sleep 30","timeoutSeconds":1}`))
		if err == nil || !strings.Contains(err.Error(), "ran past its time limit of 1s") || time.Since(start) > 20*time.Second {
			t.Fatalf("err %v after %s", err, time.Since(start))
		}
	})
	t.Run("bad input", func(t *testing.T) {
		tool := shell(t, t.TempDir(), runtime.PolicyReadOnly)
		for in, want := range map[string]string{`{}`: "command is required", `{"command":"` + strings.Repeat("a", agent.MaxCommandSize+1) + `"}`: "the limit is 65536"} {
			if _, err := tool.Run(context.Background(), json.RawMessage(in)); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%.40s: err %v", in, err)
			}
		}
	})
}

// TestRootGivenThroughALink: a root given through a symbolic link works, and absolute paths
// under either spelling of it resolve.
func TestRootGivenThroughALink(t *testing.T) {
	real := tree(t, map[string]string{"a.txt": "alpha\n"})
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	tools := fileTools(t, link)
	for _, p := range []string{"a.txt", filepath.Join(link, "a.txt"), filepath.Join(real, "a.txt")} {
		if out, err := call(t, tools, "read", `{"path":"`+p+`"}`); err != nil || out != "     1\talpha\n" {
			t.Fatalf("%s: %q %v", p, out, err)
		}
	}
}

package pet_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/pet"
	"github.com/pixie-dev/pixie/internal/testutil/fakechat"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/bash"
)

// tidyBody is the "tidy" Skill's instructions.
const tidyBody = "Remove every *.tmp file from the working tree (never inside .git). Keep every other file. Then say what you removed."

// tidyCommand is the command the scripted model runs.
const tidyCommand = "find . -name '*.tmp' -type f -not -path './.git/*' -print -delete"

// tidyScript is a model that lists the tree, removes the *.tmp files with the shell tool, then
// ends its turn with a summary (the summary quotes the shell result it got).
func tidyScript() fakechat.Script {
	return func(c fakechat.Call) fakechat.Turn {
		switch len(c.Results) {
		case 0:
			return fakechat.Turn{Text: "Looking first.", Calls: []fakechat.ToolCall{{Name: "list", Arguments: `{"recursive":true}`}}}
		case 1:
			args, _ := json.Marshal(map[string]string{"command": tidyCommand})
			return fakechat.Turn{Calls: []fakechat.ToolCall{{Name: "shell", Arguments: string(args)}}}
		}
		last := c.Results[len(c.Results)-1].Output
		if strings.Contains(last, "Permission denied") {
			return fakechat.Turn{Text: "I could not remove the .tmp files: the sandbox is read-only."}
		}
		return fakechat.Turn{Text: "Removed the .tmp files: " + strings.Join(strings.Fields(strings.TrimPrefix(last, "exit status 0\nstdout:\n")), ", ")}
	}
}

// gitWorktree makes a git worktree with *.tmp files among others, committed.
func gitWorktree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range map[string]string{"a.tmp": "scratch", "src/b.tmp": "scratch", "src/main.go": "package main\n", "README.md": "# demo\n", "notes.tmp.txt": "keep: not a .tmp file"} {
		writeFile(t, filepath.Join(dir, filepath.FromSlash(p)), c)
	}
	git(t, dir, "init", "-q")
	git(t, dir, "add", "-A")
	git(t, dir, "-c", "user.name=Pixie Test", "-c", "user.email=test@pixie.invalid", "commit", "-qm", "init")
	writeFile(t, filepath.Join(dir, ".git", "keep.tmp"), "inside .git: never touched")
	return dir
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

func bashDispatcher(t *testing.T) runtime.Dispatcher {
	t.Helper()
	bx, err := bash.New(context.Background(), bash.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bx.Close(context.Background()) })
	return runtime.Dispatcher{runtime.KindScript: bx}
}

// TestChoreTidyTmpFiles is the chore end to end: an instruction Skill "tidy" runs on the
// built-in agent, whose (scripted) model lists a git worktree and removes its *.tmp files with
// the shell tool. Under workspace-write the files are gone and the others kept; under read-only
// the sandbox refuses the command, the files remain and the tool result says so. The Run record
// holds the tool calls and their results either way.
func TestChoreTidyTmpFiles(t *testing.T) {
	needLandlock(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		front  string // the sandbox line of the front matter
		policy runtime.Policy
	}{
		{"workspace-write", "sandbox: workspace-write\n", runtime.PolicyWorkspaceWrite},
		{"read-only", "", runtime.PolicyReadOnly},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakechat.NewScript(t, tidyScript())
			m, err := model.New(model.Config{Provider: "openai", BaseURL: srv.URL, Model: "m", APIKey: "k"})
			if err != nil {
				t.Fatal(err)
			}
			e := newEnv(t, bashDispatcher(t), m, pet.Config{RunTimeout: time.Minute})
			d := filepath.Join(t.TempDir(), "tidy")
			writeFile(t, filepath.Join(d, pet.ManifestFile), "---\nname: tidy\ndescription: Remove *.tmp files from the worktree.\n"+tc.front+"---\n"+tidyBody+"\n")
			in, err := e.svc.Inspect(ctx, d)
			if err != nil || in.Sandbox != tc.policy {
				t.Fatalf("inspect %+v %v", in, err)
			}
			sk := register(t, e.svc, d)
			if sk.Sandbox != tc.policy {
				t.Fatalf("granted %q", sk.Sandbox)
			}
			wt := gitWorktree(t)
			snap := snapshot("workspace:w1")
			snap.Cwd = wt
			v, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "tidy", Snapshot: snap})
			if err != nil {
				t.Fatal(err)
			}
			r := v.Latest()
			if v.Status != pet.StatusSucceeded || r.Executor != pet.KindInstructions || r.Sandbox != tc.policy || r.Steps != 3 || len(r.ToolCalls) != 2 {
				t.Fatalf("run %+v", r)
			}
			list, sh := r.ToolCalls[0], r.ToolCalls[1]
			if list.N != 1 || list.Step != 1 || list.Name != "list" || list.IsError || !strings.Contains(list.Output, "src/b.tmp  7 B") || strings.Contains(list.Output, ".git/keep.tmp") {
				t.Fatalf("list call %+v", list)
			}
			var in2 struct{ Command string }
			if sh.N != 2 || sh.Step != 2 || sh.Name != "shell" || json.Unmarshal(sh.Input, &in2) != nil || in2.Command != tidyCommand {
				t.Fatalf("shell call %+v", sh)
			}
			kept := []string{"src/main.go", "README.md", "notes.tmp.txt", ".git/keep.tmp"}
			tmp := []string{"a.tmp", "src/b.tmp"}
			// What the model got back for the shell call.
			got := srv.Calls()[2].Results[1].Output
			switch tc.policy {
			case runtime.PolicyWorkspaceWrite:
				if sh.IsError || !strings.HasPrefix(sh.Output, "exit status 0\nstdout:\n") || !strings.Contains(sh.Output, "./a.tmp") || !strings.Contains(sh.Output, "./src/b.tmp") {
					t.Fatalf("shell result %q", sh.Output)
				}
				for _, p := range tmp {
					if exists(filepath.Join(wt, p)) {
						t.Errorf("%s is still there", p)
					}
				}
				if st := git(t, wt, "status", "--porcelain"); !strings.Contains(st, " D a.tmp") || !strings.Contains(st, " D src/b.tmp") || strings.Count(st, "\n") != 2 {
					t.Errorf("git status:\n%s", st)
				}
				if !strings.Contains(r.Output, "Removed the .tmp files: ./a.tmp, ./src/b.tmp") {
					t.Errorf("summary %q", r.Output)
				}
			case runtime.PolicyReadOnly:
				if !sh.IsError || !strings.Contains(sh.Output, "Permission denied") || !strings.Contains(got, "Permission denied") {
					t.Fatalf("shell result %q; the model got %q", sh.Output, got)
				}
				for _, p := range tmp {
					if !exists(filepath.Join(wt, p)) {
						t.Errorf("%s was removed under read-only", p)
					}
				}
				if !strings.Contains(r.Output, "sandbox is read-only") {
					t.Errorf("summary %q", r.Output)
				}
			}
			for _, p := range kept {
				if !exists(filepath.Join(wt, p)) {
					t.Errorf("%s was removed", p)
				}
			}
			if got != strings.TrimSuffix(sh.Output, "\n") && got != "error: "+sh.Output {
				t.Errorf("the record %q is not what the model got %q", sh.Output, got)
			}
			// The system prompt names the tools, the root and the policy, then SKILL.md's body.
			sys := srv.Calls()[0].System
			if !strings.Contains(sys, "Tools: list, read, search, shell.") || !strings.Contains(sys, "is "+wt+" (the snapshot's cwd)") ||
				!strings.Contains(sys, "Sandbox policy: "+string(tc.policy)) || !strings.HasSuffix(sys, tidyBody) {
				t.Errorf("system prompt %q", sys)
			}
			if testing.Verbose() {
				raw, _ := json.MarshalIndent(r, "", "  ")
				t.Logf("Run record:\n%s", raw)
			}
		})
	}
}

// TestSandboxAskAndConfirm: inspection shows the sandbox policy a Skill asks for; registration
// must confirm exactly that (nothing is stored otherwise); full is never granted; a Skill edited
// to ask for more than it was granted fails closed; a script Skill granted workspace-write runs
// so, and a retry runs at Run 1's policy.
func TestSandboxAskAndConfirm(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil, nil, pet.Config{})
	write := skillDir(t, "writer", "Writes.", "Writes files.", nil)
	writeFile(t, filepath.Join(write, pet.ManifestFile), "---\nname: writer\ndescription: Writes.\nsandbox: workspace-write\n---\nWrites files.\n")
	in, err := e.svc.Inspect(ctx, write)
	if err != nil || in.Sandbox != runtime.PolicyWorkspaceWrite {
		t.Fatalf("inspect %+v %v", in, err)
	}
	for _, tc := range []struct {
		name    string
		sandbox runtime.Policy
		code    errs.Code
		want    string
	}{
		{"not confirmed", "", errs.Invalid, `confirm it by registering with sandbox "workspace-write"`},
		{"confirmed as less", runtime.PolicyReadOnly, errs.Conflict, "asks for the workspace-write sandbox, not \"read-only\""},
		{"confirmed as more", runtime.PolicyFull, errs.Conflict, "not \"full\""},
		{"not a policy", "root", errs.Conflict, "not \"root\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.svc.Register(ctx, pet.RegisterRequest{Path: write, Confirm: true, Fingerprint: in.Fingerprint, Sandbox: tc.sandbox, Enabled: true})
			if errs.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v (%s)", err, errs.CodeOf(err))
			}
			if list, _ := e.svc.Skills(ctx); len(list) != 0 {
				t.Fatalf("a refused registration stored %+v", list)
			}
			if entries, _ := os.ReadDir(filepath.Join(e.ws, pet.ProjectionDir)); len(entries) != 0 {
				t.Fatalf("a refused registration left a projection entry")
			}
		})
	}
	t.Run("full is never granted", func(t *testing.T) {
		d := skillDir(t, "root-me", "Wants all.", "x", nil)
		writeFile(t, filepath.Join(d, pet.ManifestFile), "---\nname: root-me\ndescription: Wants all.\nsandbox: full\n---\nx\n")
		if _, err := e.svc.Inspect(ctx, d); errs.CodeOf(err) != errs.Unprocessable || !strings.Contains(err.Error(), "full is never granted") {
			t.Fatalf("inspect %v", err)
		}
		writeFile(t, filepath.Join(d, pet.ManifestFile), "---\nname: root-me\ndescription: Wants all.\nsandbox: [workspace-write]\n---\nx\n")
		if _, err := e.svc.Inspect(ctx, d); errs.CodeOf(err) != errs.Unprocessable || !strings.Contains(err.Error(), "sandbox must be a string") {
			t.Fatalf("inspect %v", err)
		}
	})
	t.Run("edited to ask for more fails closed", func(t *testing.T) {
		d := skillDir(t, "sneaky", "Reads.", "Reads files.", nil)
		sk := register(t, e.svc, d)
		if sk.Sandbox != runtime.PolicyReadOnly || sk.SandboxAsked != runtime.PolicyReadOnly {
			t.Fatalf("registered %+v", sk)
		}
		writeFile(t, filepath.Join(d, pet.ManifestFile), "---\nname: sneaky\ndescription: Reads.\nsandbox: workspace-write\n---\nReads files.\n")
		v, _ := e.svc.Skill(ctx, "sneaky")
		if v.Available || v.SandboxAsked != runtime.PolicyWorkspaceWrite || v.Sandbox != runtime.PolicyReadOnly || !strings.Contains(v.Reason, "remove it and register it again") {
			t.Fatalf("view %+v", v)
		}
		_, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "sneaky", Snapshot: snapshot("independent")})
		if errs.CodeOf(err) != errs.Conflict || !strings.Contains(err.Error(), "was registered with read-only") {
			t.Fatalf("invoke %v", err)
		}
		if tasks, _ := e.svc.Tasks(ctx, pet.TaskFilter{}); len(tasks) != 0 {
			t.Fatalf("a refused invocation recorded %+v", tasks)
		}
	})
}

// TestScriptSkillPolicyPerSkill: a script Skill granted workspace-write may write the snapshot's
// cwd, one without the grant may not, and a retry runs at Run 1's policy.
func TestScriptSkillPolicyPerSkill(t *testing.T) {
	needLandlock(t)
	ctx := context.Background()
	bx, err := bash.New(ctx, bash.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bx.Close(ctx) })
	f := &failingOnce{Executor: bx, refs: make(chan string, 10)}
	f.failed.Store(true) // the first runs pass
	e := newEnv(t, runtime.Dispatcher{runtime.KindScript: f}, nil, pet.Config{})
	// A new file per Skill (touching an existing file's times is not a write Landlock governs).
	mk := func(name, front string) {
		script := "if echo x > \"$PWD/written-by-" + name + "-$RANDOM\" 2>/dev/null; then echo wrote; else echo read-only; fi\n"
		d := filepath.Join(t.TempDir(), name)
		writeFile(t, filepath.Join(d, pet.ManifestFile), "---\nname: "+name+"\ndescription: D.\n"+front+"---\n")
		writeFile(t, filepath.Join(d, pet.ScriptFile), script)
		register(t, e.svc, d)
	}
	mk("w", "sandbox: workspace-write\n")
	mk("r", "")
	cwd := t.TempDir()
	snap := snapshot("workspace:w9")
	snap.Cwd = cwd
	for name, want := range map[string]string{"w": "wrote", "r": "read-only"} {
		v, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: name, Snapshot: snap})
		if err != nil || v.Latest().Output != want {
			t.Fatalf("%s: %+v %v", name, v.Latest(), err)
		}
		<-f.refs
	}
	// A transient failure, then a retry at Run 1's policy.
	f.failed.Store(false)
	v, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "w", Snapshot: snap})
	if err != nil || !v.Latest().Transient || v.Latest().Sandbox != runtime.PolicyWorkspaceWrite {
		t.Fatalf("first run %+v %v", v.Latest(), err)
	}
	v2, err := e.svc.Retry(ctx, v.ID)
	if err != nil || len(v2.Runs) != 2 || v2.Runs[1].Sandbox != runtime.PolicyWorkspaceWrite || v2.Latest().Output != "wrote" {
		t.Fatalf("retry %+v %v", v2.Runs, err)
	}
}

// TestAgentLimitFailsTheRunAndKeepsItsRecord: a model that never ends its turn reaches the step
// limit (pet.agent.maxSteps): the Run fails, not worth retrying, with a message naming the
// limit, and keeps every tool call made.
func TestAgentLimitFailsTheRunAndKeepsItsRecord(t *testing.T) {
	ctx := context.Background()
	srv := fakechat.NewScript(t, func(fakechat.Call) fakechat.Turn {
		return fakechat.Turn{Calls: []fakechat.ToolCall{{Name: "list", Arguments: `{}`}}}
	})
	m, err := model.New(model.Config{Provider: "openai", BaseURL: srv.URL, Model: "m", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, nil, m, pet.Config{Agent: pet.AgentConfig{MaxSteps: 3}})
	register(t, e.svc, skillDir(t, "loop", "Loops.", "List forever.", nil))
	v, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "loop", Snapshot: snapshot("independent")})
	if err != nil {
		t.Fatal(err)
	}
	r := v.Latest()
	if v.Status != pet.StatusFailed || r.Transient || r.Error == nil || r.Error.Code != errs.Unprocessable ||
		!strings.Contains(r.Error.Message, "step limit (3 model turns)") || len(r.ToolCalls) != 3 || r.Steps != 3 || len(srv.Calls()) != 3 {
		t.Fatalf("run %+v error %+v", r, r.Error)
	}
	// No bash executor: no shell tool, and the preamble says so.
	if !strings.Contains(srv.Calls()[0].System, "Tools: list, read, search.") || len(r.EnvKeys) != 0 {
		t.Fatalf("system %q", srv.Calls()[0].System)
	}
	if _, err := pet.New(ctx, pet.Config{Store: openStore(t), Workspace: t.TempDir(), Agent: pet.AgentConfig{MaxTokens: -1}}); errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("a negative limit: %v", err)
	}
}

// TestAgentShellGetsEnvValuesTheModelNever: a DSH_PET_* value reaches the agent's shell
// commands, and is redacted from the tool result the model gets, from the Run record and from
// the system prompt (which names the variable only).
func TestAgentShellGetsEnvValuesTheModelNever(t *testing.T) {
	needLandlock(t)
	ctx := context.Background()
	const secret = "pet-env-s3cr3t-4242"
	srv := fakechat.NewScript(t, fakechat.Steps(
		fakechat.Turn{Calls: []fakechat.ToolCall{{Name: "shell", Arguments: `{"command":"echo \"group=$DSH_PET_CR_GROUP\""}`}}},
		fakechat.Turn{Text: "done"},
	))
	m, err := model.New(model.Config{Provider: "openai", BaseURL: srv.URL, Model: "m", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, bashDispatcher(t), m, pet.Config{})
	if _, err := e.svc.SetEnv(ctx, "", "CR_GROUP", secret); err != nil {
		t.Fatal(err)
	}
	register(t, e.svc, skillDir(t, "post", "Posts.", "Post to $DSH_PET_CR_GROUP.", nil))
	v, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "post", Snapshot: snapshot("independent")})
	if err != nil {
		t.Fatal(err)
	}
	r := v.Latest()
	if len(r.ToolCalls) != 1 || r.ToolCalls[0].Output != "exit status 0\nstdout:\ngroup=[$DSH_PET_CR_GROUP]" || strings.Join(r.EnvKeys, ",") != "DSH_PET_CR_GROUP" {
		t.Fatalf("run %+v", r)
	}
	raw, _ := json.Marshal(v)
	if strings.Contains(string(raw), secret) {
		t.Fatalf("the record holds the value: %s", raw)
	}
	for _, c := range srv.Calls() {
		if strings.Contains(string(c.Raw), secret) {
			t.Fatalf("the model was sent the value: %s", c.Raw)
		}
	}
	if !strings.Contains(srv.Calls()[0].System, "($DSH_PET_CR_GROUP)") {
		t.Fatalf("the prompt does not name the variable: %q", srv.Calls()[0].System)
	}
}

// TestOrdinaryAgentSkillRunsItsOwnScript: an ordinary agent Skill whose instructions say "run
// scripts/report.sh" works unchanged: the preamble names where the Run's copy of the Skill is,
// and the shell tool runs the script from there (read-only: reading the copy is allowed).
func TestOrdinaryAgentSkillRunsItsOwnScript(t *testing.T) {
	needLandlock(t)
	ctx := context.Background()
	staged := regexp.MustCompile(`This Skill's own files are in (\S+) \(`)
	srv := fakechat.NewScript(t, func(c fakechat.Call) fakechat.Turn {
		if len(c.Results) == 0 {
			m := staged.FindStringSubmatch(c.System)
			if m == nil {
				return fakechat.Turn{Text: "no staged folder in the prompt"}
			}
			args, _ := json.Marshal(map[string]string{"command": "bash " + m[1] + "/scripts/report.sh"})
			return fakechat.Turn{Calls: []fakechat.ToolCall{{Name: "shell", Arguments: string(args)}}}
		}
		return fakechat.Turn{Text: c.Results[0].Output}
	})
	m, err := model.New(model.Config{Provider: "openai", BaseURL: srv.URL, Model: "m", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, bashDispatcher(t), m, pet.Config{})
	register(t, e.svc, skillDir(t, "report", "Reports.", "Run scripts/report.sh and pass on what it prints.",
		map[string]string{"scripts/report.sh": "echo \"report from $(basename \"$(dirname \"$0\")\") in $PWD\"\n"}))
	cwd := t.TempDir()
	snap := snapshot("workspace:w2")
	snap.Cwd = cwd
	v, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "report", Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	if r := v.Latest(); v.Status != pet.StatusSucceeded || r.Output != "exit status 0\nstdout:\nreport from scripts in "+cwd {
		t.Fatalf("run %+v", r)
	}
}

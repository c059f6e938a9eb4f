package gate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/bash"
	"github.com/pixie-dev/pixie/runtime/sandbox"
)

// bashExecutor is the real bash executor; the test binary plays the sandbox verb (TestMain).
func bashExecutor(t testing.TB, cfg bash.Config) *bash.Executor {
	t.Helper()
	ex, err := bash.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ex.Close(context.Background()) })
	return ex
}

func scriptGate(name, point, task, script string) Gate {
	g := gateAt(name, point, task)
	g.Rule = &Rule{Kind: runtime.KindScript, Name: script}
	return g
}

// inSession gives a request the session policy scripts need.
func inSession(r EvalRequest, cwd string) EvalRequest {
	r.Session.Cwd, r.Session.Policy = cwd, runtime.PolicyFull
	return r
}

func TestScriptExitCodes(t *testing.T) {
	e := newEnv(t, envOptions{exec: bashExecutor(t, bash.Config{})})
	ctx := context.Background()
	cwd := t.TempDir()
	e.writeScript(t, "env.sh", `#!/bin/bash
printf '{"point":"%s","tool":"%s","args":%s,"agent":"%s","session":"%s","turn":"%s","gate":"%s","stdin":"%s"}\n' \
  "$PIXIE_POINT" "$PIXIE_TOOL_NAME" "$PIXIE_TOOL_ARGS" "$PIXIE_AGENT" "$PIXIE_SESSION_ID" "$PIXIE_TURN" "$PIXIE_GATE_NAME" "$(cat)"
`)
	e.writeScript(t, "skip.sh", "#!/bin/bash\nexit 10\n")
	e.writeScript(t, "conclude.sh", `#!/bin/bash
printf '{"verdict":"stop","reason":"The form has no title line."}'; exit 11
`)
	e.writeScript(t, "plain.sh", "#!/bin/bash\necho 'not json'\n")
	e.writeScript(t, "continue.sh", "#!/bin/bash\nexit 0\n")

	t.Run("exit 0 fills the hooks variables and Pixie runs", func(t *testing.T) {
		e.saveGates(t, scriptGate("g", "tool-before", "Text: {{hooks.env.text}}\nData: {{hooks.env.data}}", "env.sh"))
		e.llm.SetReply(answer(`{"note":"seen"}`))
		r := inSession(evalReq("tool-before", "STDIN"), cwd)
		res, err := e.svc.Evaluate(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		want := `{"point":"tool-before","tool":"grep","args":{"pattern":"x"},"agent":"root","session":"s1","turn":"1","gate":"g","stdin":"STDIN"}`
		calls := e.llm.Calls()
		user := calls[len(calls)-1].User
		if !strings.Contains(user, "Text: "+want+"\nData: "+want) {
			t.Errorf("the task did not get the script output:\n%s", user)
		}
		if res.ConcludedBy != ByPixie || len(res.Notes) != 1 {
			t.Errorf("%+v", res)
		}
		rec, _ := e.svc.Record(ctx, res.RunID)
		if rec.Rule == nil || rec.Rule.ExitCode != 0 || rec.Rule.Stdout != want {
			t.Errorf("rule run: %+v", rec.Rule)
		}
	})
	t.Run("non-JSON stdout leaves data empty", func(t *testing.T) {
		e.saveGates(t, scriptGate("g", "user-message", "[{{hooks.plain.text}}][{{hooks.plain.data}}]", "plain.sh"))
		if _, err := e.svc.Evaluate(ctx, inSession(evalReq("user-message", "x"), cwd)); err != nil {
			t.Fatal(err)
		}
		calls := e.llm.Calls()
		if !strings.Contains(calls[len(calls)-1].User, "[not json][]") {
			t.Errorf("got %s", calls[len(calls)-1].User)
		}
	})
	t.Run("exit 10 skips without a model call", func(t *testing.T) {
		e.saveGates(t, scriptGate("g", "user-message", "Check.", "skip.sh"))
		before := len(e.llm.Calls())
		res, err := e.svc.Evaluate(ctx, inSession(evalReq("user-message", "x"), cwd))
		if err != nil {
			t.Fatal(err)
		}
		if res.ConcludedBy != BySkippedByHook || res.Action != ActionNone || res.RunID == "" || len(e.llm.Calls()) != before {
			t.Errorf("%+v", res)
		}
	})
	t.Run("exit 11 concludes by the point rules", func(t *testing.T) {
		e.saveGates(t, scriptGate("g", "user-message", "", "conclude.sh"))
		before := len(e.llm.Calls())
		res, err := e.svc.Evaluate(ctx, inSession(evalReq("user-message", "x"), cwd))
		if err != nil {
			t.Fatal(err)
		}
		if res.ConcludedBy != ByHookScript || res.Action != ActionRejected || res.Reason != "The form has no title line." || len(e.llm.Calls()) != before {
			t.Errorf("%+v", res)
		}
		rec, _ := e.svc.Record(ctx, res.RunID)
		if rec.Output.Verdict != "stop" || rec.ConcludedBy != ByHookScript {
			t.Errorf("record: %+v", rec)
		}
	})
	t.Run("an empty task fails when the script exits 0", func(t *testing.T) {
		e.saveGates(t, scriptGate("g", "user-message", "", "continue.sh"))
		res, _ := e.svc.Evaluate(ctx, inSession(evalReq("user-message", "x"), cwd))
		if !strings.Contains(res.Error, "empty task") || res.Action != ActionNone {
			t.Errorf("%+v", res)
		}
	})
}

func TestScriptErrorPolicy(t *testing.T) {
	e := newEnv(t, envOptions{exec: bashExecutor(t, bash.Config{})})
	ctx := context.Background()
	cwd := t.TempDir()
	e.writeScript(t, "exit3.sh", "#!/bin/bash\necho partial\nexit 3\n")
	e.writeScript(t, "slow.sh", "#!/bin/bash\nsleep 30\n")
	e.writeScript(t, "notjson11.sh", "#!/bin/bash\necho 'stop please'; exit 11\n")
	e.writeScript(t, "unknown11.sh", `#!/bin/bash
printf '{"verdict":"stop","severity":"high"}'; exit 11
`)
	for _, tt := range []struct {
		name, script, errText string
	}{
		{"exit 3", "exit3.sh", "exited with status 3"},
		{"timeout", "slow.sh", "timed out after 1s"},
		{"exit 11 without JSON", "notjson11.sh", "Hook script exit 11 needs a gate output JSON"},
		{"exit 11 with an unknown field", "unknown11.sh", "Hook script exit 11 needs a gate output JSON"},
	} {
		for _, policy := range []string{OnErrorContinue, OnErrorStop} {
			t.Run(tt.name+"/"+policy, func(t *testing.T) {
				g := scriptGate("g", "tool-before", "Check {{hooks."+strings.TrimSuffix(tt.script, ".sh")+".text}}.", tt.script)
				g.Advanced.OnError = policy
				g.Advanced.TimeoutSeconds = 1
				e.saveGates(t, g)
				before := len(e.llm.Calls())
				res, err := e.svc.Evaluate(ctx, inSession(evalReq("tool-before", "{}"), cwd))
				if err != nil {
					t.Fatal(err)
				}
				wantAction := ActionNone
				if policy == OnErrorStop {
					wantAction = ActionBlocked
				}
				if res.Action != wantAction || !strings.Contains(res.Error, tt.errText) || res.ConcludedBy != ByHookScript {
					t.Errorf("%+v", res)
				}
				if policy == OnErrorStop && !strings.Contains(res.Reason, tt.errText) {
					t.Errorf("reason %q", res.Reason)
				}
				if len(e.llm.Calls()) != before {
					t.Error("a failed script still called the model")
				}
				rec, err := e.svc.Record(ctx, res.RunID)
				if err != nil || !strings.Contains(rec.Error, tt.errText) {
					t.Errorf("record: %+v %v", rec, err)
				}
			})
		}
	}
	t.Run("no executor", func(t *testing.T) {
		e2 := newEnv(t, envOptions{})
		e2.writeScript(t, "x.sh", "#!/bin/bash\n")
		e2.saveGates(t, scriptGate("g", "user-message", "t", "x.sh"))
		res, _ := e2.svc.Evaluate(ctx, inSession(evalReq("user-message", "x"), cwd))
		if !strings.Contains(res.Error, "hook-script-unsupported") {
			t.Errorf("%+v", res)
		}
	})
	t.Run("no session policy", func(t *testing.T) {
		e.saveGates(t, scriptGate("g", "user-message", "", "exit3.sh"))
		res, _ := e.svc.Evaluate(ctx, evalReq("user-message", "x"))
		if !strings.Contains(res.Error, "Session sandbox policy and cwd are required") {
			t.Errorf("%+v", res)
		}
	})
	t.Run("script removed after saving", func(t *testing.T) {
		e.writeScript(t, "gone.sh", "#!/bin/bash\nexit 10\n")
		e.saveGates(t, scriptGate("g", "user-message", "", "gone.sh"))
		if err := os.Remove(filepath.Join(e.scripts, "gone.sh")); err != nil {
			t.Fatal(err)
		}
		res, _ := e.svc.Evaluate(ctx, inSession(evalReq("user-message", "x"), cwd))
		if !strings.Contains(res.Error, "not an executable file") {
			t.Errorf("%+v", res)
		}
	})
}

// TestReadOnlySandboxDeniesAWrite runs a script in a read-only session: its write into the
// working directory fails, and the gate sees the script's own report of it.
func TestReadOnlySandboxDeniesAWrite(t *testing.T) {
	if err := sandbox.Probe(); err != nil {
		if errors.Is(err, runtime.ErrUnsupported) {
			t.Skipf("Landlock is not available here: %v", err)
		}
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{exec: bashExecutor(t, bash.Config{})})
	ctx := context.Background()
	e.writeScript(t, "write.sh", `#!/bin/bash
if echo hi > written.txt 2>/dev/null; then
  printf '{"note":"write allowed"}'
else
  printf '{"note":"write denied"}'
fi
exit 11
`)
	e.saveGates(t, scriptGate("g", "user-message", "", "write.sh"))
	for policy, want := range map[runtime.Policy]string{runtime.PolicyReadOnly: "write denied", runtime.PolicyWorkspaceWrite: "write allowed"} {
		cwd := t.TempDir()
		r := evalReq("user-message", "x")
		r.Session.Cwd, r.Session.Policy = cwd, policy
		res, err := e.svc.Evaluate(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Notes) != 1 || res.Notes[0] != want {
			t.Errorf("%s: %+v", policy, res)
		}
		_, statErr := os.Stat(filepath.Join(cwd, "written.txt"))
		if (policy == runtime.PolicyReadOnly) != os.IsNotExist(statErr) {
			t.Errorf("%s: written.txt stat: %v", policy, statErr)
		}
	}
}

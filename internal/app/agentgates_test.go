package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/agent"
	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
	"github.com/pixie-dev/pixie/internal/testutil/fakechat"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/bash"
	"github.com/pixie-dev/pixie/runtime/sandbox"
)

// denyRead is a gate rule (a legacy bash script, the run contract): it stops a read call and
// skips the gate for anything else.
const denyRead = `#!/bin/bash
if [ "$PIXIE_TOOL_NAME" = "read" ]; then
  printf '{"verdict":"stop","reason":"reading is off for the Lark child (%s)"}' "$PIXIE_SESSION_ID"
  exit 11
fi
exit 10
`

// TestAgentGatesAdapter: a built-in agent's tool calls pass through the real gate service by
// the adapter: a tool-before gate of the session's preset, targeting child agents, denies a
// read (the model gets the reason, the record says which gate), lets list through, and leaves
// a run record for the session; the same call as a root agent is not that gate's.
func TestAgentGatesAdapter(t *testing.T) {
	if err := sandbox.Probe(); err != nil {
		t.Skipf("no Landlock here (%v): gate scripts run sandboxed", err)
	}
	ctx := context.Background()
	st, err := badgerstore.Open(ctx, badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	bx, err := bash.New(ctx, bash.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bx.Close(ctx) })
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "commands"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "commands", "deny-read.sh"), []byte(denyRead), 0o755); err != nil {
		t.Fatal(err)
	}
	svc, err := gate.New(ctx, gate.Config{Store: st, Exec: runtime.Dispatcher{runtime.KindScript: bx}, Home: home})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close(ctx) })
	g := gate.Gate{Name: "no-reads", Enabled: true, Point: agent.PointToolBefore, Task: "Is this call fine?",
		Rule:     &gate.Rule{Kind: runtime.KindScript, Name: "deny-read.sh"},
		Advanced: gate.Options{ShowInChat: true, OnError: gate.OnErrorStop, TimeoutSeconds: 30, RedoLimit: 1, Targets: "child"}}
	if _, err := svc.Save(ctx, gate.Set{Gates: []gate.Gate{g}, Presets: []gate.Preset{{Name: "lark-test", Gates: []gate.Attachment{{Gate: g.Name, Enabled: true}}}}}); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("alpha"), 0o644); err != nil {
		t.Fatal(err)
	}
	tools, err := agent.FileTools(agent.FileOptions{Root: ws})
	if err != nil {
		t.Fatal(err)
	}
	run := func(kind string) agent.Result {
		srv := fakechat.NewScript(t, fakechat.Steps(
			fakechat.Turn{Calls: []fakechat.ToolCall{{Name: "list", Arguments: `{}`}, {Name: "read", Arguments: `{"path":"a.txt"}`}}},
			fakechat.Turn{Text: "ok"},
		))
		m, err := model.New(model.Config{Provider: "openai", BaseURL: srv.URL, Model: "m", APIKey: "k", Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		res, err := agent.Run(ctx, agent.Config{Model: m, User: "go", Tools: tools,
			Gates:   agentGates{svc: svc, agent: kind, host: "pixie-lark"},
			Session: agent.GateSession{ID: "cchild" + kind, Preset: "lark-test", Cwd: ws, Policy: runtime.PolicyReadOnly}, Turn: 1})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := run("child")
	if c := res.Calls[0]; c.Name != "list" || c.IsError || c.Gate != "" {
		t.Fatalf("list %+v", c)
	}
	if c := res.Calls[1]; c.Name != "read" || !c.IsError || !strings.Contains(c.Output, "denied by a gate: reading is off for the Lark child (cchildchild)") ||
		!strings.Contains(c.Gate, "the gate no-reads denied the call") {
		t.Fatalf("read %+v", c)
	}
	page, err := svc.Records(ctx, "cchildchild", "", 0)
	if err != nil || len(page.Records) == 0 {
		t.Fatalf("run records %+v %v", page, err)
	}
	// As a root agent the child-only gate does not run.
	if c := run("root").Calls[1]; c.IsError || c.Output != "     1\talpha\n" {
		t.Fatalf("read as root %+v", c)
	}
}

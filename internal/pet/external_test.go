package pet_test

import (
	"context"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/pet"
	"github.com/pixie-dev/pixie/runtime/sandbox"
)

// TestExternalAvailability: a Skill on an external executor is unavailable, with the reason,
// while its CLI is not installed or the server's URL for the hooks is unknown, and an
// invocation then records nothing; Diagnostics says the same per CLI.
func TestExternalAvailability(t *testing.T) {
	url := ""
	for _, tc := range []struct {
		name    string
		cli     pet.CLIConfig
		url     string
		ok      bool
		reason  string
		landlck bool
	}{
		{name: "not installed", cli: pet.CLIConfig{Command: "/nonexistent/claude"}, url: "http://127.0.0.1:1", reason: `the claude command "/nonexistent/claude" is not installed here (set pet.claude.command`},
		{name: "no server URL", cli: pet.CLIConfig{Command: "/bin/true"}, reason: "the server's own URL, which Pixie's hooks call, is not known yet"},
		{name: "ready", cli: pet.CLIConfig{Command: "/bin/true"}, url: "http://127.0.0.1:1", ok: true, landlck: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.landlck && sandbox.Probe() != nil {
				t.Skip("no Landlock here: Claude Code Skills fail closed")
			}
			url = tc.url
			e := newEnv(t, nil, nil, pet.Config{External: pet.ExternalConfig{Claude: tc.cli, ServerURL: func() string { return url }}})
			dir := skillDir(t, "notes", "Takes notes.", "Take notes.\n", nil)
			in, err := e.svc.Inspect(context.Background(), dir)
			if err != nil {
				t.Fatal(err)
			}
			v, err := e.svc.Register(context.Background(), pet.RegisterRequest{Path: dir, Confirm: true, Fingerprint: in.Fingerprint, Enabled: true, Executor: "claude"})
			if err != nil {
				t.Fatal(err)
			}
			if v.Available != tc.ok || !strings.Contains(v.Reason, tc.reason) || v.Executor != pet.ExecutorClaude {
				t.Fatalf("view: available %v reason %q", v.Available, v.Reason)
			}
			d, err := e.svc.Diagnostics(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if a := d.ExternalExecutors[pet.ExecutorClaude]; a.Available != tc.ok || !strings.Contains(a.Reason, tc.reason) {
				t.Fatalf("diagnostics: %+v", a)
			}
			if tc.ok {
				return
			}
			if _, err := e.svc.Invoke(context.Background(), pet.InvokeRequest{Skill: "notes", Snapshot: snapshot("independent")}); !errs.Is(err, errs.Unavailable) {
				t.Fatalf("invoke: %v", err)
			}
			if tasks, _ := e.svc.Tasks(context.Background(), pet.TaskFilter{}); len(tasks) != 0 {
				t.Fatalf("a refused invocation made a task: %+v", tasks)
			}
		})
	}
}

package pet_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/pet"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime/sandbox"
)

// TestWASMSkillHelper runs guests/pet-judge-skill on the real WASM executor with the real gate
// helper (the real decision engine, the OpenAI provider against a test server): its asks and
// its judgment reach the model with environment values redacted, every call is in the Run
// record, the budget is the gate's 20 calls, and without a helper the calls are unavailable.
func TestWASMSkillHelper(t *testing.T) {
	const team = "team-s3cr3t-4711"
	ms, m := newModelServer(t)
	exec := executors(t)
	// Generous: the first run compiles the guest, which is slow under -race on a busy machine.
	e := newEnv(t, exec, m, pet.Config{RunTimeout: 3 * time.Minute, Helpers: newHelpers(t, m)})
	ctx := context.Background()
	if _, err := e.svc.SetEnv(ctx, "", "TEAM", team); err != nil {
		t.Fatal(err)
	}
	dir := skillDir(t, "review", "Summarise and judge the selection.", "A WASM guest.", nil)
	guest, err := os.ReadFile(testutil.GuestPath(t, "pet-judge-skill"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, pet.WASMFile), guest, 0o644); err != nil {
		t.Fatal(err)
	}
	register(t, e.svc, dir)
	invoke := func(t *testing.T, svc *pet.Service, selection string) pet.Run {
		t.Helper()
		sn := snapshot("independent")
		sn.Selection = selection
		v, err := svc.Invoke(ctx, pet.InvokeRequest{Skill: "review", Snapshot: sn})
		if err != nil {
			t.Fatal(err)
		}
		return v.Latest()
	}

	t.Run("ask and judge", func(t *testing.T) {
		r := invoke(t, e.svc, "wrote the parser\n---\nall tests pass")
		if r.Status != pet.StatusSucceeded {
			t.Fatalf("run %+v %+v", r, r.Error)
		}
		summary := "model saw 2 messages; last: Summarise this part of a work log in one line. The reader is the team [$DSH_PET_TEAM]."
		if want := "1. " + summary + "\n2. " + summary + "\nfinished=yes yes=0.8000 engine=llm"; r.Output != want {
			t.Fatalf("output %q, want %q", r.Output, want)
		}
		calls := r.HelperCalls
		if len(calls) != 3 || calls[0].Type != "ask" || calls[1].Type != "ask" || calls[2].Type != "judge" {
			t.Fatalf("helper calls %+v", calls)
		}
		j := calls[2]
		if j.JudgeType != "bool" || j.Label != "yes" || j.Engine != "llm" || j.Confidence == nil || *j.Confidence <= 0 || j.Usage.InputTokens != 90 || j.Error != "" {
			t.Fatalf("judge call %+v", j)
		}
		if r.Usage == nil || r.Usage.InputTokens != 2*11+90 || r.Usage.OutputTokens != 2*7+1 {
			t.Fatalf("usage %+v", r.Usage)
		}
		if len(r.Logs) != 1 || !strings.HasPrefix(r.Logs[0], "info: judged by llm: yes") {
			t.Fatalf("logs %q", r.Logs)
		}
		// The judgment saw the selection, and no prompt saw the value.
		bodies, reqs := ms.received()
		last := reqs[len(reqs)-1]
		if !last.Logprobs || !strings.Contains(last.Messages[len(last.Messages)-1].Content, "all tests pass") {
			t.Fatalf("judge request %+v", last)
		}
		for _, b := range bodies {
			if strings.Contains(b, team) {
				t.Fatalf("the environment value reached the model: %s", b)
			}
		}
	})

	t.Run("budget", func(t *testing.T) {
		// 20 parts: 20 asks use the budget, and the judgment is refused.
		r := invoke(t, e.svc, strings.Repeat("step\n---\n", 19)+"step")
		if r.Status != pet.StatusFailed || r.Error.Code != errs.Unprocessable || r.Transient ||
			!strings.Contains(r.Error.Message, "judge: pixie_judge: rate_limited: the run has used its 20 helper calls") {
			t.Fatalf("run %+v %+v", r, r.Error)
		}
		if len(r.HelperCalls) != 20 || r.HelperCalls[19].Type != "ask" {
			t.Fatalf("%d helper calls", len(r.HelperCalls))
		}
		// A new Run has a new budget.
		if r := invoke(t, e.svc, "done"); r.Status != pet.StatusSucceeded || len(r.HelperCalls) != 2 {
			t.Fatalf("next run %+v", r)
		}
	})

	t.Run("no helper", func(t *testing.T) {
		svc, err := pet.New(context.Background(), pet.Config{Store: e.st, Exec: exec, Model: m, Workspace: e.ws, RunTimeout: 3 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		r := invoke(t, svc, "done")
		if r.Status != pet.StatusFailed || !strings.Contains(r.Error.Message, "summary of part 1: pixie_ask: unavailable") || len(r.HelperCalls) != 0 {
			t.Fatalf("run %+v %+v", r, r.Error)
		}
	})

	t.Run("never recorded", func(t *testing.T) {
		var all strings.Builder
		err := e.st.View(ctx, func(tx *store.Tx) error {
			return tx.ScanRaw("pet-", store.ScanOptions{}, func(k string, v []byte) error {
				if !strings.HasPrefix(k, "pet-env/") {
					all.WriteString(k)
					all.Write(v)
				}
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(all.String(), team) || !strings.Contains(all.String(), `"helperCalls":[{"type":"ask"`) {
			t.Fatal("the records leak the value or lack the helper calls")
		}
	})
}

// TestScriptSkillHelperEnv: a script Skill gets PIXIE_URL and a run token when the helper has
// a URL (none without), and the token never reaches the record. (`pixie ask` itself is driven
// through the real binary and server in cmd/pixie.)
func TestScriptSkillHelperEnv(t *testing.T) {
	if sandbox.Probe() != nil {
		t.Skip("no Landlock: script Skills fail closed")
	}
	_, m := newModelServer(t)
	helpers := newHelpers(t, m)
	e := newEnv(t, executors(t), m, pet.Config{Helpers: helpers})
	ctx := context.Background()
	register(t, e.svc, skillDir(t, "env", "Shows its helper.", "Runs run.sh.", map[string]string{pet.ScriptFile: `echo "url=${PIXIE_URL-unset} token=${PIXIE_TOKEN-unset}"
case "${PIXIE_TOKEN-}" in pxr_*) echo "has a run token";; esac
`}))
	tests := []struct {
		name, url, want string
	}{
		{"no helper URL", "", "url=unset token=unset"},
		{"helper URL", "http://127.0.0.1:9", "url=http://127.0.0.1:9 token=[$PIXIE_TOKEN]\nhas a run token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			helpers.SetURL(tc.url)
			v, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "env", Snapshot: snapshot("independent")})
			if err != nil {
				t.Fatal(err)
			}
			if r := v.Latest(); r.Status != pet.StatusSucceeded || r.Output != tc.want {
				t.Fatalf("run %+v", r)
			}
		})
	}
}

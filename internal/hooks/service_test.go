package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/hint"
	"github.com/pixie-dev/pixie/internal/later"
	"github.com/pixie-dev/pixie/internal/rewrite"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// input returns a fixture with its fields overridden (session_id, prompt_id, …); the cwd is
// an existing directory (the WASM executor mounts it read-only).
func input(t testing.TB, name string, set map[string]any) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(fixture(t, name), &m); err != nil {
		t.Fatal(err)
	}
	if sharedStack != nil {
		m["cwd"] = sharedStack.dir
	}
	for k, v := range set {
		m[k] = v
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestServiceEvents(t *testing.T) {
	s := newStack(t)
	tests := []struct {
		name    string
		fixture string
		set     map[string]any
		model   abi.GateOutput
		check   func(t *testing.T, o Output)
	}{
		{"user-message rejected", "user_prompt_submit", nil,
			abi.GateOutput{Verdict: "stop", Reason: "Name the directory.", Replace: "delete ./victim/build"},
			func(t *testing.T, o Output) {
				want(t, o.Decision == "block" && o.Reason == "Name the directory.", "decision %q reason %q", o.Decision, o.Reason)
				want(t, strings.Contains(o.SystemMessage, "Suggested message (not sent to the agent):\ndelete ./victim/build"), "systemMessage %q", o.SystemMessage)
				want(t, o.HookSpecificOutput == nil, "hookSpecificOutput %+v", o.HookSpecificOutput)
			}},
		{"user-message replaced", "user_prompt_submit", nil,
			abi.GateOutput{Replace: "Delete ./victim (build output)."},
			func(t *testing.T, o Output) {
				want(t, o.Decision == "", "decision %q", o.Decision)
				want(t, strings.HasSuffix(specOf(o).AdditionalContext, "\n\nDelete ./victim (build output)."), "additionalContext %q", specOf(o).AdditionalContext)
			}},
		{"user-message appended", "user_prompt_submit", nil,
			abi.GateOutput{Append: "Measured: 3 cues", Note: "measured"},
			func(t *testing.T, o Output) {
				want(t, specOf(o).AdditionalContext == "Measured: 3 cues", "additionalContext %q", specOf(o).AdditionalContext)
				want(t, o.SystemMessage == "Pixie: measured", "systemMessage %q", o.SystemMessage)
			}},
		{"agent-message rejected", "pre_tool_use_agent", nil,
			abi.GateOutput{Verdict: "stop", Reason: "Name the files.", Replace: "find callers of Map in server/"},
			func(t *testing.T, o Output) {
				h := specOf(o)
				// The spec: on a stop the replacement never reaches the main model; the user sees it.
				want(t, h.PermissionDecision == "deny" && h.PermissionDecisionReason == "Name the files.",
					"decision %q reason %q", h.PermissionDecision, h.PermissionDecisionReason)
				want(t, strings.Contains(o.SystemMessage, "Suggested message (not sent to the agent):\nfind callers of Map in server/"), "systemMessage %q", o.SystemMessage)
			}},
		{"agent-message replaced", "pre_tool_use_agent", nil,
			abi.GateOutput{Replace: "TASK: find callers of Map"},
			func(t *testing.T, o Output) {
				h := specOf(o)
				want(t, h.PermissionDecision == "allow", "permissionDecision %q", h.PermissionDecision)
				want(t, string(h.UpdatedInput) == `{"description":"Find callers","prompt":"TASK: find callers of Map","subagent_type":"Explore"}`, "updatedInput %s", h.UpdatedInput)
			}},
		{"agent-message appended", "pre_tool_use_agent", nil,
			abi.GateOutput{Append: "Answer with file:line."},
			func(t *testing.T, o Output) {
				want(t, string(specOf(o).UpdatedInput) == `{"description":"Find callers","prompt":"find every caller of Map\n\nAnswer with file:line.","subagent_type":"Explore"}`,
					"updatedInput %s", specOf(o).UpdatedInput)
			}},
		{"tool-before blocked by the WASM guest", "codex_pre_tool_use", nil, abi.GateOutput{},
			func(t *testing.T, o Output) {
				h := specOf(o)
				want(t, h.PermissionDecision == "deny" && h.PermissionDecisionReason == "Blocked: force push. Push without --force, or ask the user first.",
					"decision %q reason %q", h.PermissionDecision, h.PermissionDecisionReason)
			}},
		{"tool-before skipped by the WASM guest", "pre_tool_use_subagent", nil, abi.GateOutput{},
			func(t *testing.T, o Output) { want(t, o.Empty(), "output %+v", o) }},
		{"tool-before guest error passes with a note", "pre_tool_use", nil, abi.GateOutput{},
			func(t *testing.T, o Output) {
				// rm -rf ./victim is "unclear": the guest asks the decision engine, which this
				// stack does not have, so the run fails and the "continue" policy lets it pass.
				want(t, o.HookSpecificOutput == nil, "hookSpecificOutput %+v", o.HookSpecificOutput)
				want(t, strings.HasPrefix(o.SystemMessage, `Pixie: The gate "block-risky-commands" failed and was passed over: `), "systemMessage %q", o.SystemMessage)
			}},
		{"tool-after blocked", "post_tool_use", nil,
			abi.GateOutput{Verdict: "stop", Reason: "Secret in the output."},
			func(t *testing.T, o Output) {
				want(t, o.Decision == "block" && o.Reason == "Secret in the output.", "decision %q reason %q", o.Decision, o.Reason)
			}},
		{"tool-after structured replacement is a note", "post_tool_use", nil,
			abi.GateOutput{Replace: "two files"},
			func(t *testing.T, o Output) {
				want(t, o.HookSpecificOutput == nil, "hookSpecificOutput %+v", o.HookSpecificOutput)
				want(t, strings.Contains(o.SystemMessage, "two files"), "systemMessage %q", o.SystemMessage)
			}},
		{"tool-after appended", "post_tool_use", nil,
			abi.GateOutput{Append: "Both files are empty."},
			func(t *testing.T, o Output) {
				want(t, specOf(o).AdditionalContext == "Both files are empty.", "additionalContext %q", specOf(o).AdditionalContext)
			}},
		{"tool-after text replaced", "post_tool_use_text", nil,
			abi.GateOutput{Replace: "Two results."},
			func(t *testing.T, o Output) {
				h := specOf(o)
				want(t, string(h.UpdatedToolOutput) == `"Two results."`, "updatedToolOutput %s", h.UpdatedToolOutput)
			}},
		{"turn-end steered", "stop", nil,
			abi.GateOutput{Verdict: "stop", Reason: "Run the tests first."},
			func(t *testing.T, o Output) {
				want(t, o.Decision == "block" && o.Reason == "Run the tests first.", "decision %q reason %q", o.Decision, o.Reason)
			}},
		{"turn-end note", "stop", nil,
			abi.GateOutput{Note: "[Translation]\nAll done."},
			func(t *testing.T, o Output) {
				want(t, o.Decision == "" && o.SystemMessage == "Pixie: [Translation]\nAll done.", "decision %q systemMessage %q", o.Decision, o.SystemMessage)
			}},
		{"subagent turn-end steered", "subagent_stop", nil,
			abi.GateOutput{Verdict: "stop", Reason: "Add line numbers."},
			func(t *testing.T, o Output) {
				want(t, o.Decision == "block" && o.Reason == "Add line numbers.", "decision %q reason %q", o.Decision, o.Reason)
			}},
		{"unknown preset runs no gate and says so", "stop", map[string]any{"preset": "none"},
			abi.GateOutput{Verdict: "stop", Reason: "x"},
			func(t *testing.T, o Output) {
				want(t, o.Decision == "" && o.HookSpecificOutput == nil, "output %+v", o)
				want(t, strings.Contains(o.SystemMessage, `the preset "none" does not exist`) && strings.Contains(o.SystemMessage, "pixie doctor"), "systemMessage %q", o.SystemMessage)
			}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.model.answer(tt.model)
			preset := "p"
			set := map[string]any{"session_id": fmt.Sprintf("events-%d", i)}
			for k, v := range tt.set {
				if k == "preset" {
					preset = v.(string)
					continue
				}
				set[k] = v
			}
			out := s.handle(t, preset, input(t, tt.fixture, set))
			ev, _ := Map(input(t, tt.fixture, set))
			checkOutputShape(t, ev, out)
			tt.check(t, out)
		})
	}
}

func want(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	if !ok {
		t.Errorf(format, args...)
	}
}

func specOf(o Output) SpecificOutput {
	if o.HookSpecificOutput == nil {
		return SpecificOutput{}
	}
	return *o.HookSpecificOutput
}

func TestServiceUnhandledTouchesNothing(t *testing.T) {
	// No store, gate or queue at all: an unhandled event must not need them.
	svc, err := New(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"notification", "session_start"} {
		var got Output
		err := svc.Handle(context.Background(), Call{Preset: ""}, fixture(t, f), func(o Output) error { got = o; return nil })
		if err != nil || !got.Empty() || string(got.Marshal()) != "{}" {
			t.Errorf("%s: output %s, err %v", f, got.Marshal(), err)
		}
	}
}

func TestServiceInvalid(t *testing.T) {
	s := newStack(t)
	err := s.svc.Handle(context.Background(), Call{Preset: "p"}, []byte(`{"hook_event_name":"PreToolUse","session_id":"x"}`), func(Output) error { return nil })
	if errs.CodeOf(err) != errs.Invalid {
		t.Errorf("bad input: err = %v", err)
	}
	err = s.svc.Handle(context.Background(), Call{Preset: "../etc"}, fixture(t, "stop"), func(Output) error { return nil })
	if errs.CodeOf(err) != errs.Invalid {
		t.Errorf("bad preset: err = %v", err)
	}
}

func TestServiceRedoLimit(t *testing.T) {
	s := newStack(t)
	session := map[string]any{"session_id": "redo", "prompt_id": "p1"}
	s.handle(t, "p", input(t, "user_prompt_submit", session))
	s.model.answer(abi.GateOutput{Verdict: "stop", Reason: "Run the tests first."})

	first := s.handle(t, "p", input(t, "stop", session))
	if first.Decision != "block" {
		t.Fatalf("first Stop: %+v, want a redo", first)
	}
	if !s.hints.Running("redo") {
		t.Error("a redo ended the turn")
	}
	// Claude Code continues the same turn and stops again with stop_hook_active; the gate's
	// redo limit (1) is spent, so the agent is let go with a note.
	session["stop_hook_active"] = true
	second := s.handle(t, "p", input(t, "stop", session))
	if second.Decision != "" || !strings.Contains(second.SystemMessage, "Redo limit reached") {
		t.Fatalf("second Stop: %+v, want no redo and the limit note", second)
	}
	if s.hints.Running("redo") {
		t.Error("the turn did not end at the final Stop")
	}
	// Even a changed prompt_id does not start a new turn while stop_hook_active is set.
	session["prompt_id"] = "p1-continued"
	third := s.handle(t, "p", input(t, "stop", session))
	if third.Decision != "" {
		t.Fatalf("Stop with stop_hook_active and a new prompt_id asked for another redo: %+v", third)
	}
	// The next prompt is a new turn with a fresh budget.
	delete(session, "stop_hook_active")
	session["prompt_id"] = "p2"
	s.model.answer(abi.GateOutput{})
	s.handle(t, "p", input(t, "user_prompt_submit", session))
	s.model.answer(abi.GateOutput{Verdict: "stop", Reason: "Run the tests first."})
	if next := s.handle(t, "p", input(t, "stop", session)); next.Decision != "block" {
		t.Fatalf("Stop of the next turn: %+v, want a redo", next)
	}
}

func TestServiceTurn(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	ev := func(name, key string, active bool) Event {
		return Event{Name: name, Handled: true, SessionID: "turns", TurnKey: key, StopHookActive: active}
	}
	steps := []struct {
		ev   Event
		want int
	}{
		{ev(EventPreToolUse, "", false), 1},             // first event ever: turn 1
		{ev(EventUserPromptSubmit, "a", false), 2},      // a prompt starts a turn
		{ev(EventUserPromptSubmit, "a", false), 2},      // the same prompt again (a retried hook)
		{ev(EventPostToolUse, "a", false), 2},           // same turn
		{ev(EventStop, "a", false), 2},                  // same turn
		{ev(EventPreToolUse, "b", false), 3},            // a new prompt id Pixie never saw start
		{ev(EventStop, "c", true), 3},                   // continuing because of a Stop hook: same turn
		{ev(EventUserPromptSubmit, "", false), 4},       // no prompt ids at all: every prompt is a turn
		{ev(EventUserPromptSubmit, "", false), 5},       //
		{ev(EventSubagentStop, "", false), 5},           //
		{ev(EventPostToolUse, "turn_9", false), 6},      // Codex turn id
		{ev(EventPostToolUse, "turn_9", false), 6},      //
		{ev(EventUserPromptSubmit, "turn_9", false), 6}, // Codex sends the turn id with the prompt too
	}
	for i, st := range steps {
		got, err := s.svc.turn(ctx, st.ev)
		if err != nil {
			t.Fatal(err)
		}
		if got != st.want {
			t.Fatalf("step %d (%s %q): turn %d, want %d", i, st.ev.Name, st.ev.TurnKey, got, st.want)
		}
	}
}

func TestServiceTurnStartEnd(t *testing.T) {
	s := newStack(t)
	s.model.answer(abi.GateOutput{})
	in := map[string]any{"session_id": "running"}
	s.handle(t, "p", input(t, "user_prompt_submit", in))
	if !s.hints.Running("running") {
		t.Fatal("UserPromptSubmit did not start the turn")
	}
	s.handle(t, "p", input(t, "subagent_stop", in))
	if !s.hints.Running("running") {
		t.Fatal("SubagentStop ended the turn")
	}
	s.handle(t, "p", input(t, "stop", in))
	if s.hints.Running("running") {
		t.Fatal("Stop did not end the turn")
	}
	// A rejected prompt starts no turn that lasts.
	s.model.answer(abi.GateOutput{Verdict: "stop", Reason: "no"})
	s.handle(t, "p", input(t, "user_prompt_submit", in))
	if s.hints.Running("running") {
		t.Fatal("a rejected prompt left the turn running")
	}
}

func TestServiceHintDelivery(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	s.model.answer(abi.GateOutput{})
	sess := map[string]any{"session_id": "deliver"}
	if _, err := s.hints.Put(ctx, "deliver", "use the staging database"); err != nil {
		t.Fatal(err)
	}
	// Not at PreToolUse, Stop or SubagentStop.
	for _, f := range []string{"pre_tool_use_subagent", "stop", "subagent_stop"} {
		out := s.handle(t, "p", input(t, f, sess))
		if strings.Contains(string(out.Marshal()), "staging") {
			t.Fatalf("%s delivered the hint: %s", f, out.Marshal())
		}
	}
	// Not with a rejected prompt (the step never happens).
	s.model.answer(abi.GateOutput{Verdict: "stop", Reason: "no"})
	if out := s.handle(t, "p", input(t, "user_prompt_submit", sess)); strings.Contains(string(out.Marshal()), "staging") {
		t.Fatalf("a rejected prompt delivered the hint: %s", out.Marshal())
	}
	// At UserPromptSubmit, once.
	s.model.answer(abi.GateOutput{})
	out := s.handle(t, "p", input(t, "user_prompt_submit", sess))
	msg := specOf(out).AdditionalContext
	if !strings.Contains(msg, "1. use the staging database") || !strings.HasPrefix(msg, s.hints.Messages().Header) {
		t.Fatalf("additionalContext %q does not carry the rendered hint", msg)
	}
	if out := s.handle(t, "p", input(t, "post_tool_use", sess)); !out.Empty() {
		t.Fatalf("the hint came twice: %s", out.Marshal())
	}
	snap, err := s.hints.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Pending) != 0 || len(snap.Consumed) != 1 || snap.Consumed[0].TakeID != "" {
		t.Fatalf("queue after delivery: %+v", snap)
	}
}

func TestServiceHintRollback(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	if _, err := s.hints.Put(ctx, "rb", "check the logs"); err != nil {
		t.Fatal(err)
	}
	in := input(t, "post_tool_use", map[string]any{"session_id": "rb"})
	lost := errors.New("client went away")
	var first Output
	err := s.svc.Handle(ctx, Call{Preset: "p"}, in, func(o Output) error { first = o; return lost })
	if !errors.Is(err, lost) {
		t.Fatalf("Handle error = %v, want the deliver error", err)
	}
	if !strings.Contains(specOf(first).AdditionalContext, "check the logs") {
		t.Fatal("the failed answer did not carry the hint")
	}
	// The answer never went out, so the hint is pending again and the next step gets it.
	if out := s.handle(t, "p", in); !strings.Contains(specOf(out).AdditionalContext, "check the logs") {
		t.Fatalf("hint not redelivered after a failed answer: %s", out.Marshal())
	}
	if out := s.handle(t, "p", in); !out.Empty() {
		t.Fatalf("hint delivered a third time: %s", out.Marshal())
	}
}

// TestServiceHintsExactlyOnceConcurrent fires PostToolUse calls of one session from many
// goroutines while hints keep arriving: every hint reaches exactly one answer.
func TestServiceHintsExactlyOnceConcurrent(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	s.model.answer(abi.GateOutput{})
	const (
		callers  = 8
		calls    = 12
		hintsN   = 60
		session  = "concurrent"
		hintText = "hint number %03d"
	)
	in := input(t, "post_tool_use_text", map[string]any{"session_id": session})
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		wg   sync.WaitGroup
	)
	record := func(o Output) {
		for _, line := range strings.Split(specOf(o).AdditionalContext, "\n") {
			if i := strings.Index(line, "hint number "); i >= 0 {
				mu.Lock()
				seen[line[i:]]++
				mu.Unlock()
			}
		}
	}
	// Most hints are queued before the calls start, so the calls contend for the same hints;
	// the rest arrive while they run.
	const early = 40
	for i := 0; i < early; i++ {
		if _, err := s.hints.Put(ctx, session, fmt.Sprintf(hintText, i)); err != nil {
			t.Fatal(err)
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := early; i < hintsN; i++ {
			if _, err := s.hints.Put(ctx, session, fmt.Sprintf(hintText, i)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for c := 0; c < callers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < calls; i++ {
				if err := s.svc.Handle(ctx, Call{Preset: "p"}, in, func(o Output) error { record(o); return nil }); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// Whatever is still pending is taken by the last calls (at most MaxPerStep each).
	for i := 0; i < hintsN/hint.DefaultMaxPerStep+1; i++ {
		if err := s.svc.Handle(ctx, Call{Preset: "p"}, in, func(o Output) error { record(o); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < hintsN; i++ {
		if n := seen[fmt.Sprintf(hintText, i)]; n != 1 {
			t.Errorf("hint %d delivered %d times", i, n)
		}
	}
	if len(seen) != hintsN {
		t.Errorf("%d distinct hints seen, want %d", len(seen), hintsN)
	}
	snap, err := s.hints.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Pending) != 0 {
		t.Errorf("%d hints still pending", len(snap.Pending))
	}
	for _, h := range snap.Consumed {
		if h.TakeID != "" {
			t.Errorf("hint %s consumed but never confirmed", h.ID)
		}
	}
}

// TestServiceTooLargeTarget: a target over the gate's cap is not checked, the user is told, and
// the step still gets its hints.
func TestServiceTooLargeTarget(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	if _, err := s.hints.Put(ctx, "big", "keep going"); err != nil {
		t.Fatal(err)
	}
	calls := s.model.count()
	big := strings.Repeat("x", gate.MaxTargetSize+1)
	out := s.handle(t, "p", input(t, "post_tool_use_text", map[string]any{"session_id": "big", "tool_response": big}))
	if !strings.Contains(out.SystemMessage, "Pixie did not check this tool result") {
		t.Errorf("systemMessage %q", out.SystemMessage)
	}
	if !strings.Contains(specOf(out).AdditionalContext, "keep going") {
		t.Error("hint not delivered with an oversized result")
	}
	if s.model.count() != calls {
		t.Error("the model was asked about an oversized target")
	}
	// Exactly at the cap the gate runs.
	s.model.answer(abi.GateOutput{Note: "checked"})
	atCap := strings.Repeat("x", gate.MaxTargetSize)
	out = s.handle(t, "p", input(t, "post_tool_use_text", map[string]any{"session_id": "big", "tool_response": atCap}))
	if out.SystemMessage != "Pixie: checked" {
		t.Errorf("target at the cap: systemMessage %q", out.SystemMessage)
	}
}

// A session whose hints another path delivers (the model-API proxy) gets none in its hook
// answers, and its hints stay pending for that path; other sessions are served as before.
func TestServiceHintsElsewhere(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	svc, err := New(ctx, Config{Store: s.st, Gates: s.gates, Hints: s.hints, DefaultPreset: "p",
		HintsElsewhere: func(_ context.Context, session string) bool { return session == "via-proxy" }})
	if err != nil {
		t.Fatal(err)
	}
	run := func(session, fixture string) string {
		t.Helper()
		var out Output
		if err := svc.Handle(ctx, Call{Preset: "p"}, input(t, fixture, map[string]any{"session_id": session}), func(o Output) error { out = o; return nil }); err != nil {
			t.Fatal(err)
		}
		return string(out.Marshal())
	}
	hp, err := s.hints.Put(ctx, "via-proxy", "for the proxy to carry")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.hints.Put(ctx, "via-hooks", "for the hooks to carry"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"user_prompt_submit", "post_tool_use"} {
		if out := run("via-proxy", f); strings.Contains(out, "proxy to carry") {
			t.Fatalf("%s delivered a hint the proxy delivers: %s", f, out)
		}
	}
	if out := run("via-hooks", "user_prompt_submit"); !strings.Contains(out, "for the hooks to carry") {
		t.Fatalf("the hooks session did not get its hint: %s", out)
	}
	snap, err := s.hints.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pending := false
	for _, h := range snap.Pending {
		if h.ID == hp.Hint.ID {
			pending = true
		}
	}
	if !pending {
		t.Fatal("the proxy session's hint did not stay pending")
	}
	if _, err := s.hints.TakeAndConfirm(ctx, "via-proxy"); err != nil {
		t.Fatal(err)
	}
}

// A call whose host goes through the proxy (Call.ViaProxy, ?proxy=1) carries no hints at all,
// from a brand-new session's first prompt on (the proxy has never seen that session; its first
// model request will carry the hint), when the proxy delivers hints; with hints.delivery hooks
// (ProxyDeliversHints false) the hooks still deliver them.
func TestServiceViaProxyLeavesHintsToTheProxy(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name          string
		proxyDelivers bool
		want          bool // the hook answer carries the hint
	}{
		{name: "the proxy delivers", proxyDelivers: true, want: false},
		{name: "hints.delivery hooks", proxyDelivers: false, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc, err := New(ctx, Config{Store: s.st, Gates: s.gates, Hints: s.hints, DefaultPreset: "p", ProxyDeliversHints: tc.proxyDelivers,
				HintsElsewhere: func(context.Context, string) bool { return false }}) // a session the proxy never carried
			if err != nil {
				t.Fatal(err)
			}
			session := "new-" + strings.ReplaceAll(tc.name, " ", "-")
			if _, err := s.hints.Put(ctx, session, "HINT-"+session); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"user_prompt_submit", "post_tool_use"} {
				var out Output
				if err := svc.Handle(ctx, Call{Preset: "p", ViaProxy: true}, input(t, f, map[string]any{"session_id": session}), func(o Output) error { out = o; return nil }); err != nil {
					t.Fatal(err)
				}
				got := strings.Contains(string(out.Marshal()), "HINT-"+session)
				if f == "user_prompt_submit" && got != tc.want {
					t.Fatalf("%s: the answer carries the hint: %v, want %v: %s", f, got, tc.want, out.Marshal())
				}
				if f == "post_tool_use" && got {
					t.Fatalf("%s: the hint was delivered twice", f)
				}
			}
			take, err := s.hints.TakeAndConfirm(ctx, session)
			if err != nil {
				t.Fatal(err)
			}
			if (len(take.Hints) == 1) == tc.want {
				t.Fatalf("left pending: %d hints (want the hint pending only when the proxy delivers)", len(take.Hints))
			}
		})
	}
}

// A gate with "Show the result in the chat" off sends the host none of its notes (no
// systemMessage), at any point, while its record keeps them; the same output from a gate with
// the setting on is shown.
func TestServiceShowInChatOff(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	s.model.answer(abi.GateOutput{Note: "[한국어 번역 — 미확인]\nNOTE-QUIET", Reason: "REASON-QUIET"})
	for _, f := range []string{"user_prompt_submit", "post_tool_use"} {
		session := "quiet-" + f
		out := s.handle(t, "quiet", input(t, f, map[string]any{"session_id": session}))
		if raw := string(out.Marshal()); strings.Contains(raw, "NOTE-QUIET") || strings.Contains(raw, "REASON-QUIET") || out.SystemMessage != "" {
			t.Fatalf("%s: a note reached the host: %s", f, raw)
		}
		page, err := s.gates.Records(ctx, session, "", 0)
		if err != nil || len(page.Records) != 1 {
			t.Fatalf("%s: records %+v %v", f, page, err)
		}
		rec, err := s.gates.Record(ctx, page.Records[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if rec.ShowInChat || !strings.Contains(strings.Join(rec.Notes, "\n"), "NOTE-QUIET") {
			t.Fatalf("%s: the record lost its notes: %+v", f, rec)
		}
		// The control: the same answer from a gate that shows its result.
		if loud := s.handle(t, "p", input(t, f, map[string]any{"session_id": "loud-" + f})); !strings.Contains(loud.SystemMessage, "NOTE-QUIET") {
			t.Fatalf("%s: the shown gate's note is missing: %s", f, loud.Marshal())
		}
	}
}

// Through the proxy (Call.ViaProxy) the replacements a hook cannot make are left to the proxy:
// a replaced prompt becomes a message rule (and no additionalContext tells the model to treat
// it as the user's message), a replaced structured tool result a tool-result rule for its call
// (the gate applies it instead of making it a note; the answer carries no updatedToolOutput).
// Without the proxy the answers are as before.
func TestServiceLeavesReplacementsToTheProxy(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	rw, err := rewrite.New(ctx, rewrite.Config{Store: s.st})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := New(ctx, Config{Store: s.st, Gates: s.gates, Hints: s.hints, DefaultPreset: "p", Rewrites: rw, ProxyDeliversHints: true})
	if err != nil {
		t.Fatal(err)
	}
	handle := func(viaProxy bool, fixture, session string) Output {
		t.Helper()
		var out Output
		if err := svc.Handle(ctx, Call{Preset: "p", ViaProxy: viaProxy}, input(t, fixture, map[string]any{"session_id": session}), func(o Output) error { out = o; return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	lastRecord := func(session string) gate.Record {
		t.Helper()
		page, err := s.gates.Records(ctx, session, "", 1)
		if err != nil || len(page.Records) != 1 {
			t.Fatalf("records: %+v %v", page, err)
		}
		rec, err := s.gates.Record(ctx, page.Records[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	ev, _ := Map(input(t, "user_prompt_submit", nil))

	s.model.answer(abi.GateOutput{Replace: "NEW-PROMPT: move ./victim to ./trash"})
	out := handle(true, "user_prompt_submit", "rw-prompt")
	if specOf(out).AdditionalContext != "" || !strings.Contains(out.SystemMessage, "Your message was rewritten for the agent:\nNEW-PROMPT") {
		t.Fatalf("through the proxy: %s", out.Marshal())
	}
	rs, err := rw.For(ctx, "rw-prompt")
	if err != nil || len(rs) != 1 || rs[0].Kind != rewrite.KindMessage || !rs[0].Matches(ev.Target) || rs[0].Text != "NEW-PROMPT: move ./victim to ./trash" {
		t.Fatalf("rules: %+v %v", rs, err)
	}
	if out := handle(false, "user_prompt_submit", "rw-prompt-hooks"); !strings.Contains(specOf(out).AdditionalContext, "Treat the text below as the user's message") {
		t.Fatalf("without the proxy: %s", out.Marshal())
	}
	if rs, _ := rw.For(ctx, "rw-prompt-hooks"); len(rs) != 0 {
		t.Fatalf("a rule without the proxy: %+v", rs)
	}

	s.model.answer(abi.GateOutput{Replace: "TA-DIGEST: two files"})
	out = handle(true, "post_tool_use", "rw-tool")
	if h := specOf(out); len(h.UpdatedToolOutput) != 0 || out.Decision != "" || !strings.Contains(out.SystemMessage, "The agent gets this in place of the tool result:\nTA-DIGEST") {
		t.Fatalf("through the proxy: %s", out.Marshal())
	}
	if rec := lastRecord("rw-tool"); rec.Action != gate.ActionReplaced || rec.Final != "TA-DIGEST: two files" || !rec.Structured {
		t.Fatalf("record: %+v", rec)
	}
	rs, err = rw.For(ctx, "rw-tool")
	if err != nil || len(rs) != 1 || rs[0].Kind != rewrite.KindToolResult || rs[0].CallID != "toolu_02" || rs[0].Text != "TA-DIGEST: two files" {
		t.Fatalf("rules: %+v %v", rs, err)
	}
	out = handle(false, "post_tool_use", "rw-tool-hooks")
	if rec := lastRecord("rw-tool-hooks"); rec.Action != gate.ActionNone || !strings.Contains(strings.Join(rec.Notes, "\n"), "TA-DIGEST") ||
		!strings.Contains(out.SystemMessage, "TA-DIGEST") {
		t.Fatalf("without the proxy the replacement is a note: %+v %s", rec, out.Marshal())
	}
}

// TestServiceAfterTheAnswer: a hook call's After holds the work its gate evaluation sets off
// until the answer is sent: the run record is not in the store while After holds (the record
// writer would have written it within milliseconds), and it is once After is released.
func TestServiceAfterTheAnswer(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	// The run records of the tests before are written first.
	if err := s.gates.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Run records are indexed under gate-run-id/<run id> (internal/gate's key layout).
	records := func() int {
		n := 0
		err := s.st.View(ctx, func(tx *store.Tx) error {
			return tx.ScanRaw("gate-run-id/", store.ScanOptions{}, func(string, []byte) error { n++; return nil })
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := records()
	after := &later.Queue{}
	defer after.Release()
	answered := false
	err := s.svc.Handle(ctx, Call{Preset: "p", After: after}, input(t, "user_prompt_submit", map[string]any{"session_id": "after-the-answer"}),
		func(Output) error { answered = true; return nil })
	if err != nil || !answered {
		t.Fatalf("answered %v, err %v", answered, err)
	}
	time.Sleep(200 * time.Millisecond)
	if n := records(); n != before {
		t.Fatalf("%d run records written before the answer was sent", n-before)
	}
	after.Release()
	if err := s.gates.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := records(); n != before+1 {
		t.Fatalf("%d run records written after the answer, want 1", n-before)
	}
}

// TestServiceForPetRuns: a call marked NoHints (a Pet run's CLI) takes no hint, not even a
// global one, and marks no turn; Session refuses a call before anything runs; Observe hears
// what the gates did to a tool call, by its tool_use_id.
func TestServiceForPetRuns(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	if _, err := s.hints.Put(ctx, "", "a line for the person's own session"); err != nil {
		t.Fatal(err)
	}
	sess := map[string]any{"session_id": "pet-run"}
	type seen struct {
		id, gate string
		stopped  bool
	}
	var heard []seen
	call := Call{Preset: "p", NoHints: true, Session: func(id string) error {
		if id != "pet-run" {
			return errs.New(errs.Forbidden, "another session")
		}
		return nil
	}, Observe: func(id, gate string, stopped bool) { heard = append(heard, seen{id, gate, stopped}) }}
	handle := func(c Call, in []byte) (Output, error) {
		var out Output
		err := s.svc.Handle(ctx, c, in, func(o Output) error { out = o; return nil })
		return out, err
	}
	s.model.answer(abi.GateOutput{})
	for _, f := range []string{"user_prompt_submit", "post_tool_use"} {
		out, err := handle(call, input(t, f, sess))
		if err != nil || strings.Contains(string(out.Marshal()), "person's own session") {
			t.Fatalf("%s: %v %s", f, err, out.Marshal())
		}
	}
	if s.hints.Running("pet-run") {
		t.Fatal("a Pet run's prompt started a turn")
	}
	risky := map[string]any{"session_id": "pet-run", "tool_name": "Bash", "tool_input": map[string]any{"command": "git push --force origin main"}}
	out, err := handle(call, input(t, "pre_tool_use", risky))
	if err != nil || specOf(out).PermissionDecision != "deny" {
		t.Fatalf("pre_tool_use: %v %s", err, out.Marshal())
	}
	if len(heard) != 1 || heard[0].id != "toolu_01" || !heard[0].stopped || heard[0].gate != "tool-before block-risky-commands: blocked: Blocked: force push. Push without --force, or ask the user first." {
		t.Fatalf("observed %+v", heard)
	}
	if _, err := handle(call, input(t, "pre_tool_use", map[string]any{"session_id": "someone-else"})); !errs.Is(err, errs.Forbidden) {
		t.Fatalf("another session: %v", err)
	}
	if len(heard) != 1 {
		t.Fatalf("a refused call ran the gates: %+v", heard)
	}
	snap, err := s.hints.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Pending) != 1 {
		t.Fatalf("the global hint was taken: %+v", snap)
	}
	// The same steps without NoHints deliver it: the test above means something.
	s.model.answer(abi.GateOutput{})
	if out := s.handle(t, "p", input(t, "user_prompt_submit", sess)); !strings.Contains(specOf(out).AdditionalContext, "person's own session") {
		t.Fatalf("control: %s", out.Marshal())
	}
}

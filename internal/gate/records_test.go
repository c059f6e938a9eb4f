package gate

import (
	"context"
	"reflect"
	"testing"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/runtime/bash"
)

func TestRecordsListAndDetail(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	e.saveGates(t, gateAt("fmt", "user-message", "Check."))
	for turn := 1; turn <= 5; turn++ {
		r := evalReq("user-message", "x")
		r.Turn = turn
		if _, err := e.svc.Evaluate(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	other := evalReq("user-message", "x")
	other.Session.ID = "s2"
	if _, err := e.svc.Evaluate(ctx, other); err != nil {
		t.Fatal(err)
	}
	var turns []int
	cursor := ""
	pages := 0
	for {
		page, err := e.svc.Records(ctx, "s1", cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range page.Records {
			turns = append(turns, r.Turn)
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	if want := []int{5, 4, 3, 2, 1}; !reflect.DeepEqual(turns, want) || pages != 3 {
		t.Errorf("turns %v over %d pages, want %v over 3", turns, pages, want)
	}
	page, _ := e.svc.Records(ctx, "s1", "", 0)
	if len(page.Records) != 5 || page.Next != "" {
		t.Errorf("default page: %d records, next %q", len(page.Records), page.Next)
	}
	rec, err := e.svc.Record(ctx, page.Records[0].ID)
	if err != nil || rec.Turn != 5 || rec.Session != "s1" || rec.Gate != "fmt" || rec.Point != "user-message" || rec.Agent != "root" {
		t.Errorf("detail: %+v %v", rec, err)
	}
	if _, err := e.svc.Record(ctx, "run_000000000000000000000000"); !errs.Is(err, errs.NotFound) {
		t.Errorf("unknown run: %v", err)
	}
	for _, bad := range []struct {
		cursor string
		limit  int
	}{{"../x", 1}, {"", -1}, {"", MaxRecordPage + 1}} {
		if _, err := e.svc.Records(ctx, "s1", bad.cursor, bad.limit); !errs.Is(err, errs.Invalid) {
			t.Errorf("Records(%q, %d) = %v", bad.cursor, bad.limit, err)
		}
	}
}

func TestChatNotes(t *testing.T) {
	e := newEnv(t, envOptions{exec: bashExecutor(t, bash.Config{})})
	ctx := context.Background()
	cwd := t.TempDir()
	e.writeScript(t, "skip.sh", "#!/bin/bash\nexit 10\n")
	hidden := gateAt("quiet", "agent-message", "Check.")
	hidden.Advanced.ShowInChat = false
	e.saveGates(t,
		gateAt("fmt", "user-message", "Check."),
		hidden,
		gateAt("before", "tool-before", "Check."),
		gateAt("after", "tool-after", "Check."),
		gateAt("verify", "turn-end", "Check."),
	)
	run := func(point, output string, turn int, mod func(*EvalRequest)) {
		t.Helper()
		e.llm.SetReply(answer(output))
		r := inSession(evalReq(point, "x"), cwd)
		r.Turn = turn
		if point == "agent-message" {
			r.Agent = AgentChild
		}
		if mod != nil {
			mod(&r)
		}
		if _, err := e.svc.Evaluate(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// Turn 1: a rejected instruction (no block), a hidden gate, a tool call's before and after,
	// and a turn end run twice (only the last shows).
	run("user-message", `{"verdict":"stop","reason":"no"}`, 1, nil)
	run("agent-message", `{"note":"hidden"}`, 1, nil)
	run("tool-before", `{"note":"[Checked] looks safe"}`, 1, nil)
	run("tool-after", `{"verdict":"pass","replace":"short","append":"more"}`, 1, nil)
	run("turn-end", `{"verdict":"stop","reason":"show tests"}`, 1, nil)
	run("turn-end", "{\"note\":\"[한국어 번역 — 충실도 미확인]\\n번역문\"}", 1, nil)
	// Turn 2: an accepted instruction with a not-verified English label, and a failed run.
	run("user-message", "{\"note\":\"[Translation — not verified]\\nbody line\"}", 2, nil)
	e.llm.SetReply(answer("nonsense"))
	r := evalReq("turn-end", "x")
	r.Turn = 2
	if _, err := e.svc.Evaluate(ctx, r); err != nil {
		t.Fatal(err)
	}
	// Turn 3: a skipped run (exit 10) gets no block.
	e.saveGates(t, gateAt("fmt", "user-message", "Check."), scriptGate("verify", "turn-end", "", "skip.sh"))
	run("turn-end", "", 3, nil)

	notes, err := e.svc.ChatNotes(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	type view struct {
		Place, Point, Title, Body, Verdict, Reason, Replace, Append, Error string
		NotVerified                                                        bool
	}
	var got []view
	for _, n := range notes {
		got = append(got, view{n.Place, n.Point, n.Title, n.Body, n.Verdict, n.Reason, n.Replace, n.Append, n.Error, n.NotVerified})
	}
	want := []view{
		{Place: "root/turn:1/tool:call_1", Point: "tool-before", Title: "Checked", Body: "looks safe"},
		{Place: "root/turn:1/tool:call_1", Point: "tool-after", Title: "after", Verdict: "pass", Replace: "short", Append: "more"},
		{Place: "root/turn:1/answer", Point: "turn-end", Title: "한국어 번역 — 충실도 미확인", Body: "번역문", NotVerified: true},
		{Place: "root/turn:2/message:user-message:", Point: "user-message", Title: "Translation — not verified", Body: "body line", NotVerified: true},
		{Place: "root/turn:2/answer", Point: "turn-end", Title: "verify", Error: "Pixie's answer is not gate output JSON: no JSON object found"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("notes:\n got %+v\nwant %+v", got, want)
	}
}

func TestNoteTitle(t *testing.T) {
	for _, tt := range []struct {
		note, label, body string
		ok                bool
	}{
		{"[한국어 번역]\n안녕", "한국어 번역", "안녕", true},
		{"  [Label] same line\nnext", "Label", "same line\nnext", true},
		{"no label", "", "no label", false},
		{"[] empty", "", "[] empty", false},
		{"text [not a label]", "", "text [not a label]", false},
	} {
		label, body, ok := noteTitle(tt.note)
		if label != tt.label || body != tt.body || ok != tt.ok {
			t.Errorf("noteTitle(%q) = %q, %q, %v", tt.note, label, body, ok)
		}
	}
}

func TestSessionSwitches(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	off := gateAt("disabled", "turn-end", "Check.")
	off.Enabled = false
	e.saveGates(t, gateAt("fmt", "user-message", "Check."), gateAt("before", "tool-before", "Check."), off)
	if _, err := e.svc.Attach(ctx, "ops", "before", true); err != nil {
		t.Fatal(err)
	}

	if err := e.svc.SetSessionSwitch(ctx, "s1", "nope", false); !errs.Is(err, errs.NotFound) {
		t.Errorf("unknown gate: %v", err)
	}
	if err := e.svc.SetSessionSwitch(ctx, "s1", "fmt", false); err != nil {
		t.Fatal(err)
	}
	// Switched off: nothing runs and nothing is recorded, from the next evaluation on.
	res, err := e.svc.Evaluate(ctx, evalReq("user-message", "x"))
	if err != nil || res.Skipped != SkipSwitchedOff || len(e.llm.Calls()) != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	// Another session is not affected.
	r2 := evalReq("user-message", "x")
	r2.Session.ID = "s2"
	if res, _ := e.svc.Evaluate(ctx, r2); res.Skipped != "" || res.RunID == "" {
		t.Errorf("s2: %+v", res)
	}
	page, _ := e.svc.Records(ctx, "s1", "", 0)
	if len(page.Records) != 0 {
		t.Errorf("a switched-off gate left %d records", len(page.Records))
	}
	// The listing shows the gates that apply to the preset (not the disabled one).
	sg, err := e.svc.SessionGates(ctx, "s1", "dev")
	if err != nil {
		t.Fatal(err)
	}
	if want := []SessionGate{{Gate: "fmt", Point: "user-message", On: false}, {Gate: "before", Point: "tool-before", On: true}}; !reflect.DeepEqual(sg.Gates, want) {
		t.Errorf("listing %+v, want %+v", sg.Gates, want)
	}
	// Without a preset, the session's last evaluated preset is used (s2 evaluated with dev).
	if sg, _ := e.svc.SessionGates(ctx, "s2", ""); sg.Preset != "dev" || len(sg.Gates) != 2 {
		t.Errorf("s2 listing: %+v", sg)
	}
	if sg, _ := e.svc.SessionGates(ctx, "s1", "ops"); len(sg.Gates) != 1 || sg.Gates[0].Gate != "before" {
		t.Errorf("ops listing: %+v", sg)
	}
	// Switching back on applies at once.
	if err := e.svc.SetSessionSwitch(ctx, "s1", "fmt", true); err != nil {
		t.Fatal(err)
	}
	if res, _ := e.svc.Evaluate(ctx, evalReq("user-message", "x")); res.Skipped != "" || res.RunID == "" {
		t.Errorf("switched back on: %+v", res)
	}
	// Definitions did not change.
	set, _ := e.svc.Definitions(ctx)
	if set.Revision != 2 {
		t.Errorf("switches changed the definitions: revision %d", set.Revision)
	}
}

package gate

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// TestMain lets the test binary play the pixie binary's sandbox verb, which the bash executor
// re-executes for sandboxed policies, and removes the pixie binary examples_test.go built
// (testutil.Main).
func TestMain(m *testing.M) { testutil.Main(m) }

const fullOutput = `{"verdict":"stop","reason":"R","replace":"S","append":"A","note":"N"}`

// TestApplicationTable runs every row (point) and column (stop + reason, replacement,
// addition, note) of the application table through the whole pipeline, with Pixie answering
// through the real OpenAI provider.
func TestApplicationTable(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	const orig = "ORIGINAL"
	type want struct {
		action, text, addition, reason, suggestion string
		notes                                      []string
	}
	columns := []struct {
		name, output string
	}{
		{"stop+reason", fullOutput},
		{"replacement", `{"replace":"S"}`},
		{"addition", `{"append":"A"}`},
		{"note", `{"note":"N"}`},
	}
	rows := map[string][]want{
		"user-message": {
			{action: ActionRejected, text: orig, reason: "R", suggestion: "S", notes: []string{"N", "Addition: A"}},
			{action: ActionReplaced, text: "S", notes: []string{}},
			{action: ActionAppended, text: orig + "\n\nA", addition: "A", notes: []string{}},
			{action: ActionNone, text: orig, notes: []string{"N"}},
		},
		"agent-message": {
			{action: ActionRejected, text: orig, reason: "R", suggestion: "S", notes: []string{"N", "Addition: A"}},
			{action: ActionReplaced, text: "S", notes: []string{}},
			{action: ActionAppended, text: orig + "\n\nA", addition: "A", notes: []string{}},
			{action: ActionNone, text: orig, notes: []string{"N"}},
		},
		"tool-before": {
			{action: ActionBlocked, text: orig, reason: "R", notes: []string{"N", "Replacement: S", "Addition: A"}},
			{action: ActionNone, text: orig, notes: []string{"Replacement: S"}},
			{action: ActionNone, text: orig, notes: []string{"Addition: A"}},
			{action: ActionNone, text: orig, notes: []string{"N"}},
		},
		"tool-after": {
			{action: ActionBlocked, text: orig, reason: "R", notes: []string{"N", "Replacement: S", "Addition: A"}},
			{action: ActionReplaced, text: "S", notes: []string{}},
			{action: ActionAppended, text: orig + "\n\nA", addition: "A", notes: []string{}},
			{action: ActionNone, text: orig, notes: []string{"N"}},
		},
		"turn-end": {
			{action: ActionSteered, text: orig, reason: "R", notes: []string{"N", "Replacement: S", "Addition: A"}},
			{action: ActionNone, text: orig, notes: []string{"Replacement: S"}},
			{action: ActionNone, text: orig, notes: []string{"Addition: A"}},
			{action: ActionNone, text: orig, notes: []string{"N"}},
		},
	}
	var gates []Gate
	for _, p := range abi.Points {
		g := gateAt("g-"+p, p, "Check it.")
		g.Advanced.Targets = TargetsAll
		gates = append(gates, g)
	}
	e.saveGates(t, gates...)
	turn := 0
	for _, point := range abi.Points {
		for i, col := range columns {
			t.Run(point+"/"+col.name, func(t *testing.T) {
				turn++ // a fresh turn, so the redo limit is not reached
				e.llm.SetReply(answer(col.output))
				r := evalReq(point, orig)
				r.Turn = turn
				res, err := e.svc.Evaluate(ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				w := rows[point][i]
				got := want{res.Action, res.Text, res.Addition, res.Reason, res.Suggestion, res.Notes}
				if !reflect.DeepEqual(got, w) {
					t.Errorf("got  %+v\nwant %+v", got, w)
				}
				if res.ConcludedBy != ByPixie || res.RunID == "" || res.Error != "" {
					t.Errorf("concluded by %q, run %q, error %q", res.ConcludedBy, res.RunID, res.Error)
				}
				rec, err := e.svc.Record(ctx, res.RunID)
				if err != nil {
					t.Fatal(err)
				}
				if rec.Action != w.action || rec.Final != w.text || rec.Original != orig || rec.ConcludedBy != ByPixie ||
					!reflect.DeepEqual(rec.Notes, w.notes) || rec.Usage.InputTokens != 10 || rec.Usage.OutputTokens != 5 {
					t.Errorf("record %+v", rec)
				}
				if o, _ := ParseModelOutput(col.output); rec.Output != o {
					t.Errorf("record output %+v, want %+v", rec.Output, o)
				}
			})
		}
	}
	// The model saw the task, the point and the target.
	c := e.llm.Calls()[0]
	if !strings.Contains(c.System, `"verdict"`) || !strings.Contains(c.User, "Check it.") || !strings.Contains(c.User, orig) ||
		!strings.Contains(c.User, "Point: user-message") {
		t.Errorf("model request: %+v", c)
	}
}

func TestRedoLimit(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	g := gateAt("verify", "turn-end", "Verify.")
	g.Advanced.RedoLimit = 2
	e.saveGates(t, g)
	e.llm.SetReply(answer(`{"verdict":"stop","reason":"Show the test output."}`))
	var actions []string
	for i := 0; i < 3; i++ {
		res, err := e.svc.Evaluate(ctx, evalReq("turn-end", "done"))
		if err != nil {
			t.Fatal(err)
		}
		actions = append(actions, res.Action)
		if i == 2 {
			if res.Reason != "" || len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "Redo limit reached (2 per turn)") ||
				!strings.Contains(res.Notes[0], "Show the test output.") {
				t.Errorf("past the limit: %+v", res)
			}
		}
	}
	if want := []string{ActionSteered, ActionSteered, ActionNone}; !reflect.DeepEqual(actions, want) {
		t.Errorf("actions %v, want %v", actions, want)
	}
	// The next turn has its own budget.
	r := evalReq("turn-end", "done")
	r.Turn = 2
	if res, _ := e.svc.Evaluate(ctx, r); res.Action != ActionSteered {
		t.Errorf("next turn: %s", res.Action)
	}
	// A limit of 0 never asks for a redo.
	g.Advanced.RedoLimit = 0
	e.saveGates(t, g)
	r.Turn = 3
	if res, _ := e.svc.Evaluate(ctx, r); res.Action != ActionNone {
		t.Errorf("limit 0: %s", res.Action)
	}
}

func TestConfirmBeforeReplace(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	var gates []Gate
	for _, p := range []string{"user-message", "agent-message", "tool-after"} {
		g := gateAt("g-"+p, p, "Fix it.")
		g.Advanced.ConfirmReplace = true
		g.Advanced.Targets = TargetsAll
		gates = append(gates, g)
	}
	e.saveGates(t, gates...)
	e.llm.SetReply(answer(`{"replace":"BETTER","append":"MORE"}`))
	for point, want := range map[string]string{"user-message": ActionRejected, "agent-message": ActionRejected, "tool-after": ActionReplaced} {
		res, err := e.svc.Evaluate(ctx, evalReq(point, "orig"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Action != want {
			t.Errorf("%s: action %s, want %s", point, res.Action, want)
		}
		if want == ActionRejected && (res.Suggestion != "BETTER" || res.Text != "orig" || res.Reason == "" ||
			!reflect.DeepEqual(res.Notes, []string{"Addition: MORE"})) {
			t.Errorf("%s: %+v", point, res)
		}
	}
}

func TestStructuredResultsAreNeverReplaced(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	e.saveGates(t, gateAt("digest", "tool-after", "Digest."))
	r := evalReq("tool-after", `{"files":["a.go"]}`)
	r.Structured = true
	for _, tt := range []struct {
		output, action, addition string
		notes                    []string
	}{
		{`{"replace":"short"}`, ActionNone, "", []string{"Replacement (not applied to a structured result): short"}},
		{`{"replace":"short","append":"see a.go"}`, ActionAppended, "see a.go", []string{"Replacement (not applied to a structured result): short"}},
		{`{"append":"see a.go"}`, ActionAppended, "see a.go", []string{}},
	} {
		e.llm.SetReply(answer(tt.output))
		res, err := e.svc.Evaluate(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if res.Action != tt.action || res.Text != r.Target || res.Addition != tt.addition || !reflect.DeepEqual(res.Notes, tt.notes) {
			t.Errorf("%s: %+v", tt.output, res)
		}
	}
}

func TestModelAnswerParsing(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	e.saveGates(t, gateAt("fmt", "user-message", "Check."))
	for _, tt := range []struct {
		name, answer, action, err string
	}{
		{"bare", `{"verdict":"stop","reason":"no title"}`, ActionRejected, ""},
		{"fenced", "```json\n{\"verdict\": \"stop\", \"reason\": \"no title\"}\n```", ActionRejected, ""},
		{"prose around", "Sure {not json}. Here is my answer:\n{\"verdict\":\"stop\",\"reason\":\"a {brace} in text\"}\nHope it helps.", ActionRejected, ""},
		{"nulls", `{"verdict":"pass","reason":null,"note":null}`, ActionNone, ""},
		{"empty object", `{}`, ActionNone, ""},
		{"unknown field", `{"verdict":"stop","confidence":0.9}`, ActionNone, `unknown field "confidence"`},
		{"wrong type", `{"verdict":"stop","reason":["a"]}`, ActionNone, `"reason" must be a string`},
		{"bad verdict", `{"verdict":"maybe"}`, ActionNone, `verdict must be`},
		{"no json", `I think it is fine.`, ActionNone, "no JSON object found"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e.llm.SetReply(answer(tt.answer))
			res, err := e.svc.Evaluate(ctx, evalReq("user-message", "hi"))
			if err != nil {
				t.Fatal(err)
			}
			if res.Action != tt.action || !strings.Contains(res.Error, tt.err) || (tt.err == "") != (res.Error == "") {
				t.Errorf("action %s error %q; want %s %q", res.Action, res.Error, tt.action, tt.err)
			}
			if tt.err != "" {
				rec, _ := e.svc.Record(ctx, res.RunID)
				if rec.Error == "" || rec.ModelAnswer != tt.answer || rec.ConcludedBy != ByPixie {
					t.Errorf("record of a bad answer: %+v", rec)
				}
			}
		})
	}
}

func TestModelErrorPolicy(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name, policy, point, action, errText string
		noModel                              bool
	}{
		{"model 500, continue", OnErrorContinue, "user-message", ActionNone, "Pixie model error", false},
		{"model 500, stop at a message", OnErrorStop, "user-message", ActionRejected, "Pixie model error", false},
		{"model 500, stop before a tool", OnErrorStop, "tool-before", ActionBlocked, "Pixie model error", false},
		{"model 500, stop after a tool", OnErrorStop, "tool-after", ActionBlocked, "Pixie model error", false},
		{"model 500, stop at turn end", OnErrorStop, "turn-end", ActionSteered, "Pixie model error", false},
		{"no model, continue", OnErrorContinue, "turn-end", ActionNone, "no Pixie model is configured", true},
		{"no model, stop", OnErrorStop, "user-message", ActionRejected, "no Pixie model is configured", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOptions{noModel: tt.noModel})
			if !tt.noModel {
				e.llm.SetReply(func(chatCall) (int, string) { return http.StatusInternalServerError, "" })
			}
			g := gateAt("g", tt.point, "Check.")
			g.Advanced.OnError = tt.policy
			e.saveGates(t, g)
			res, err := e.svc.Evaluate(ctx, evalReq(tt.point, "target"))
			if err != nil {
				t.Fatal(err)
			}
			if res.Action != tt.action || !strings.Contains(res.Error, tt.errText) || res.ConcludedBy != ByPixie {
				t.Errorf("%+v", res)
			}
			if tt.policy == OnErrorStop && !strings.Contains(res.Reason, tt.errText) {
				t.Errorf("the stop reason does not carry the error: %q", res.Reason)
			}
			rec, err := e.svc.Record(ctx, res.RunID)
			if err != nil || !strings.Contains(rec.Error, tt.errText) || rec.Action != tt.action {
				t.Errorf("record: %+v, %v", rec, err)
			}
			if strings.Contains(mustJSON(rec), "sk-test-secret") {
				t.Error("the API key reached the record")
			}
		})
	}
}

func TestSkips(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	child := gateAt("child-only", "turn-end", "Check.")
	child.Advanced.Targets = TargetsChild
	e.saveGates(t, gateAt("fmt", "user-message", "Check."), child, gateAt("tool", "tool-before", "Check."))
	if err := e.svc.SetSessionSwitch(ctx, "s1", "tool", false); err != nil {
		t.Fatal(err)
	}
	rejected := evalReq("user-message", "x")
	rejected.Rejected = true
	other := evalReq("user-message", "x")
	other.Session.Preset = "ops"
	for _, tt := range []struct {
		name string
		req  EvalRequest
		skip string
	}{
		{"another hook rejected", rejected, SkipRejected},
		{"the preset does not exist", other, SkipNoPreset},
		{"no gate at the point", evalReq("agent-message", "x"), SkipNoGate},
		{"agent does not match", evalReq("turn-end", "x"), SkipAgent},
		{"switched off", evalReq("tool-before", "{}"), SkipSwitchedOff},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := e.svc.Evaluate(ctx, tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Skipped != tt.skip || res.Action != ActionNone || res.Text != tt.req.Target || res.RunID != "" {
				t.Errorf("%+v", res)
			}
		})
	}
	if n := len(e.llm.Calls()); n != 0 {
		t.Errorf("skipped gates called the model %d times", n)
	}
	page, err := e.svc.Records(ctx, "s1", "", 0)
	if err != nil || len(page.Records) != 0 {
		t.Errorf("skipped gates left records: %+v %v", page, err)
	}
}

func TestEvalRequestValidation(t *testing.T) {
	e := newEnv(t, envOptions{})
	bad := []EvalRequest{
		{Point: "nowhere", Session: Session{ID: "s", Preset: "p"}},
		{Point: "user-message", Session: Session{ID: "", Preset: "p"}},
		{Point: "user-message", Session: Session{ID: "a/b", Preset: "p"}},
		{Point: "user-message", Session: Session{ID: "s"}},
		{Point: "user-message", Session: Session{ID: "s", Preset: "p", Cwd: "rel"}},
		{Point: "user-message", Session: Session{ID: "s", Preset: "p", Policy: "yolo"}},
		{Point: "user-message", Session: Session{ID: "s", Preset: "p"}, Agent: "grandchild"},
		{Point: "tool-before", Session: Session{ID: "s", Preset: "p"}},
		{Point: "tool-before", Session: Session{ID: "s", Preset: "p"}, Tool: &Tool{Name: "x", Args: []byte("{nope")}},
	}
	for i, r := range bad {
		if _, err := e.svc.Evaluate(context.Background(), r); err == nil {
			t.Errorf("request %d was accepted", i)
		}
	}
	big := evalReq("user-message", strings.Repeat("x", MaxTargetSize+1))
	if _, err := e.svc.Evaluate(context.Background(), big); err == nil {
		t.Error("an oversized target was accepted")
	}
}

func TestTry(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	e.llm.SetReply(answer(`{"verdict":"stop","reason":"risky"}`))
	g := gateAt("draft", "turn-end", "Verify {{target}}.")
	for i := 0; i < 3; i++ { // the redo limit is not counted in trials
		res, err := e.svc.Try(ctx, TryRequest{Gate: g, Sample: Sample{Target: "done"}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Action != ActionSteered || res.RunID != "" || res.Output.Reason != "risky" || res.ModelAnswer == "" {
			t.Errorf("try %d: %+v", i, res)
		}
	}
	if page, _ := e.svc.Records(ctx, "trial", "", 0); len(page.Records) != 0 {
		t.Errorf("trials were recorded: %+v", page)
	}
	if !strings.Contains(e.llm.Calls()[0].User, "Verify done.") {
		t.Errorf("task not rendered: %s", e.llm.Calls()[0].User)
	}
	_, err := e.svc.Try(ctx, TryRequest{Gate: gateAt("d", "tool-before", "x"), Sample: Sample{Target: "{}"}})
	if ps := problemsOf(t, err); len(ps) != 1 || ps[0].Field != "sample.tool.name" {
		t.Errorf("sample problems: %+v", ps)
	}
	_, err = e.svc.Try(ctx, TryRequest{Gate: gateAt("d", "user-message", ""), Sample: Sample{Target: "x"}})
	if ps := problemsOf(t, err); ps[len(ps)-1].Field != "gate.task" {
		t.Errorf("draft problems: %+v", ps)
	}
}

// A reason without a stop has nothing to explain: it becomes a note at every point, and a
// confirmation of a replacement still uses it as its reason.
func TestReasonWithoutStopIsANote(t *testing.T) {
	for _, point := range []string{"user-message", "agent-message", "tool-before", "tool-after", "turn-end"} {
		for _, verdict := range []string{"", VerdictPass} {
			d := apply(applyInput{Point: point, Target: "t", GateName: "g"}, abi.GateOutput{Verdict: verdict, Reason: "looks fine"})
			if d.Action != ActionNone || d.Reason != "" || len(d.Notes) != 1 || d.Notes[0] != "Reason: looks fine" {
				t.Errorf("%s/%q: %+v", point, verdict, d)
			}
		}
	}
	d := apply(applyInput{Point: "user-message", Target: "t", ConfirmReplace: true}, abi.GateOutput{Replace: "u", Reason: "clearer"})
	if d.Action != ActionRejected || d.Reason != "clearer" || len(d.Notes) != 0 {
		t.Errorf("confirm: %+v", d)
	}
	d = apply(applyInput{Point: "tool-after", Target: "t"}, abi.GateOutput{Verdict: VerdictStop, Reason: "secret"})
	if d.Action != ActionBlocked || d.Reason != "secret" || len(d.Notes) != 0 {
		t.Errorf("stop: %+v", d)
	}
}

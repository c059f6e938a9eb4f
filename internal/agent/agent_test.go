package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/agent"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/internal/testutil/fakechat"
	"github.com/pixie-dev/pixie/internal/testutil/fakemodel"
)

// TestMain lets the test binary play the pixie binary for the bash executor.
func TestMain(m *testing.M) { testutil.Main(m) }

func chatModel(t *testing.T, srv *fakechat.Server) model.Model {
	t.Helper()
	m, err := model.New(model.Config{Provider: "openai", BaseURL: srv.URL, Model: "m", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// tree writes files under a new root.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func fileTools(t *testing.T, root string, hidden ...string) []agent.Tool {
	t.Helper()
	tools, err := agent.FileTools(agent.FileOptions{Root: root, Hidden: hidden})
	if err != nil {
		t.Fatal(err)
	}
	return tools
}

func TestRunLoopBothProviders(t *testing.T) {
	root := tree(t, map[string]string{"a.txt": "alpha\nbeta\n", "sub/b.tmp": "x"})
	check := func(t *testing.T, m model.Model, results func() []string) {
		res, err := agent.Run(context.Background(), agent.Config{Model: m, System: "sys", User: "What is there?", Tools: fileTools(t, root)})
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != "Two files." || res.Steps != 3 || len(res.Calls) != 2 {
			t.Fatalf("result %+v", res)
		}
		if c := res.Calls[0]; c.N != 1 || c.Step != 1 || c.Name != "list" || string(c.Input) != `{"recursive":true}` ||
			!strings.Contains(c.Output, "sub/b.tmp  1 B") || c.IsError {
			t.Fatalf("first call %+v", c)
		}
		if c := res.Calls[1]; c.N != 2 || c.Step != 2 || c.Name != "read" || c.Output != "     1\talpha\n     2\tbeta\n" {
			t.Fatalf("second call %+v", c)
		}
		if res.Usage.InputTokens == 0 {
			t.Fatalf("usage %+v", res.Usage)
		}
		got := results()
		if len(got) != 2 || !strings.Contains(got[0], "a.txt") || !strings.Contains(got[1], "alpha") {
			t.Fatalf("results the model got: %q", got)
		}
	}
	t.Run("openai", func(t *testing.T) {
		srv := fakechat.NewScript(t, fakechat.Steps(
			fakechat.Turn{Calls: []fakechat.ToolCall{{Name: "list", Arguments: `{"recursive": true}`}}},
			fakechat.Turn{Text: "Reading a.", Calls: []fakechat.ToolCall{{Name: "read", Arguments: `{"path":"a.txt"}`}}},
			fakechat.Turn{Text: "Two files."},
		))
		check(t, chatModel(t, srv), func() []string {
			// No answer cap for an OpenAI-compatible server: it uses its own.
			if strings.Contains(string(srv.Calls()[0].Raw), "max_tokens") {
				t.Errorf("max_tokens sent: %s", srv.Calls()[0].Raw)
			}
			var out []string
			for _, r := range srv.Calls()[2].Results {
				out = append(out, r.Output)
			}
			return out
		})
	})
	t.Run("anthropic", func(t *testing.T) {
		srv := fakemodel.NewAnthropic(t, fakemodel.Steps(
			fakemodel.Reply{Calls: []fakemodel.Call{{Name: "list", Input: map[string]any{"recursive": true}}}},
			fakemodel.Reply{Text: "Reading a.", Calls: []fakemodel.Call{{Name: "read", Input: map[string]any{"path": "a.txt"}}}},
			fakemodel.Reply{Text: "Two files."},
		))
		m, err := model.New(model.Config{Provider: "anthropic", BaseURL: srv.URL, Model: "c", APIKey: "k"})
		if err != nil {
			t.Fatal(err)
		}
		check(t, m, func() []string {
			if !srv.Requests()[0].Contains(`"max_tokens":4096`) {
				t.Errorf("Anthropic needs max_tokens: %s", srv.Requests()[0].Body)
			}
			var out []string
			for _, r := range srv.Requests()[2].Results {
				out = append(out, r.Output)
			}
			return out
		})
	})
}

// TestLimits: the step and token limits hold at their edge, and a limit reached keeps the
// transcript so far.
func TestLimits(t *testing.T) {
	root := tree(t, map[string]string{"a.txt": "a"})
	// Each answer costs 15 tokens (fakechat's usage); two tool turns then an answer.
	script := fakechat.Steps(
		fakechat.Turn{Calls: []fakechat.ToolCall{{Name: "list", Arguments: `{}`}}},
		fakechat.Turn{Calls: []fakechat.ToolCall{{Name: "read", Arguments: `{"path":"a.txt"}`}}},
		fakechat.Turn{Text: "done"},
	)
	for _, tc := range []struct {
		name      string
		steps     int
		tokens    int
		want      error
		wantCalls int
	}{
		{"3 steps is enough", 3, 0, nil, 2},
		{"2 steps is not", 2, 0, agent.ErrStepLimit, 2},
		{"45 tokens is enough", 0, 45, nil, 2},
		{"44 tokens is not", 0, 44, agent.ErrTokenLimit, 2},
		{"29 tokens stop after the second turn", 0, 29, agent.ErrTokenLimit, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakechat.NewScript(t, script)
			res, err := agent.Run(context.Background(), agent.Config{Model: chatModel(t, srv), User: "go", Tools: fileTools(t, root),
				MaxSteps: tc.steps, MaxTokens: tc.tokens})
			if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if err != nil && errs.CodeOf(err) != errs.Unprocessable {
				t.Fatalf("code %s", errs.CodeOf(err))
			}
			if len(res.Calls) != tc.wantCalls {
				t.Fatalf("calls %+v", res.Calls)
			}
		})
	}
	t.Run("deadline", func(t *testing.T) {
		srv := fakechat.NewScript(t, func(c fakechat.Call) fakechat.Turn {
			time.Sleep(300 * time.Millisecond)
			return fakechat.Turn{Calls: []fakechat.ToolCall{{Name: "list", Arguments: `{}`}}}
		})
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		res, err := agent.Run(ctx, agent.Config{Model: chatModel(t, srv), User: "go", Tools: fileTools(t, root)})
		if errs.CodeOf(err) != errs.Timeout || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v (%s)", err, errs.CodeOf(err))
		}
		if len(res.Calls) != 1 {
			t.Fatalf("the transcript so far is lost: %+v", res)
		}
	})
	t.Run("key prefix and OnCall", func(t *testing.T) {
		srv := fakechat.NewScript(t, script)
		var seen []agent.Record
		res, err := agent.Run(context.Background(), agent.Config{Model: chatModel(t, srv), User: "go", Tools: fileTools(t, root),
			MaxSteps: 2, KeyPrefix: "lark.agent", OnCall: func(r agent.Record) { seen = append(seen, r) }})
		if !errors.Is(err, agent.ErrStepLimit) || !strings.Contains(err.Error(), "raise lark.agent.maxSteps") {
			t.Fatalf("err %v", err)
		}
		// Every call reached OnCall as it was made, with the record the Result keeps.
		if len(seen) != 2 || seen[0].Name != "list" || seen[1].Name != "read" || seen[1].Output != res.Calls[1].Output {
			t.Fatalf("OnCall got %+v", seen)
		}
	})
	t.Run("cut answer", func(t *testing.T) {
		srv := fakechat.NewScript(t, func(fakechat.Call) fakechat.Turn { return fakechat.Turn{Text: "half an ans", Finish: "length"} })
		res, err := agent.Run(context.Background(), agent.Config{Model: chatModel(t, srv), User: "go"})
		if !errors.Is(err, agent.ErrCutAnswer) || res.Text != "half an ans" {
			t.Fatalf("err %v res %+v", err, res)
		}
	})
}

// TestToolErrorsReachTheModel: an unknown tool, bad input and a failing tool are results the
// model sees (is-error), never the end of the Run.
func TestToolErrorsReachTheModel(t *testing.T) {
	root := tree(t, map[string]string{"a.txt": "a"})
	boom := agent.Tool{Name: "boom", Schema: json.RawMessage(`{"type":"object"}`), Run: func(context.Context, json.RawMessage) (string, error) {
		return "", errors.New("it broke")
	}}
	srv := fakechat.NewScript(t, fakechat.Steps(
		fakechat.Turn{Calls: []fakechat.ToolCall{{Name: "read", Arguments: `{"path":"a.txt","bogus":1}`}, {Name: "boom", Arguments: `{}`}, {Name: "read", Arguments: `{"path":"../x"}`}}},
		fakechat.Turn{Text: "ok"},
	))
	res, err := agent.Run(context.Background(), agent.Config{Model: chatModel(t, srv), User: "go", Tools: append(fileTools(t, root), boom)})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`bad input: json: unknown field "bogus"`, "it broke", "../x leaves the root"}
	got := srv.Calls()[1].Results
	for i, w := range want {
		if !res.Calls[i].IsError || !strings.HasPrefix(res.Calls[i].Output, w) || !strings.HasPrefix(got[i].Output, "error: "+w) {
			t.Errorf("call %d: record %q, model got %q; want %q", i, res.Calls[i].Output, got[i].Output, w)
		}
	}
}

// TestRedaction: a secret a tool prints reaches neither the model nor the record.
func TestRedaction(t *testing.T) {
	const secret = "s3cr3t-value-42"
	echo := agent.Tool{Name: "echo", Run: func(_ context.Context, in json.RawMessage) (string, error) { return "value is " + secret, nil }}
	srv := fakechat.NewScript(t, fakechat.Steps(
		fakechat.Turn{Calls: []fakechat.ToolCall{{Name: "echo", Arguments: `{"q":"` + secret + `"}`}}},
		fakechat.Turn{Text: "ok"},
	))
	res, err := agent.Run(context.Background(), agent.Config{Model: chatModel(t, srv), User: "go", Tools: []agent.Tool{echo},
		Redact: func(s string) string { return strings.ReplaceAll(s, secret, "[redacted]") }})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(res.Calls)
	if strings.Contains(string(raw), secret) || !strings.Contains(string(raw), "value is [redacted]") {
		t.Fatalf("record %s", raw)
	}
	for _, c := range srv.Calls() {
		for _, r := range c.Results {
			if strings.Contains(r.Output, secret) {
				t.Fatalf("the model got the secret: %q", r.Output)
			}
		}
	}
}

// TestResultCaps: the model gets at most MaxResultToModel bytes of a result and is told it was
// cut; the record keeps at most MaxRecorded.
func TestResultCaps(t *testing.T) {
	big := agent.Tool{Name: "big", Run: func(context.Context, json.RawMessage) (string, error) {
		return strings.Repeat("x", agent.MaxResultToModel+10), nil
	}}
	exact := agent.Tool{Name: "exact", Run: func(context.Context, json.RawMessage) (string, error) {
		return strings.Repeat("y", agent.MaxResultToModel), nil
	}}
	srv := fakechat.NewScript(t, fakechat.Steps(
		fakechat.Turn{Calls: []fakechat.ToolCall{{Name: "big", Arguments: `{}`}, {Name: "exact", Arguments: `{}`}}},
		fakechat.Turn{Text: "ok"},
	))
	res, err := agent.Run(context.Background(), agent.Config{Model: chatModel(t, srv), User: "go", Tools: []agent.Tool{big, exact}})
	if err != nil {
		t.Fatal(err)
	}
	got := srv.Calls()[1].Results
	if !strings.HasPrefix(got[0].Output, strings.Repeat("x", agent.MaxResultToModel)+"\n[output cut: the first 65536 of 65546 bytes") {
		t.Fatalf("cut result %q", got[0].Output[agent.MaxResultToModel-5:])
	}
	if got[1].Output != strings.Repeat("y", agent.MaxResultToModel) {
		t.Fatalf("a result at the cap was cut")
	}
	if len(res.Calls[0].Output) > agent.MaxRecorded+64 || !strings.HasSuffix(res.Calls[0].Output, "[cut in the record]") {
		t.Fatalf("record of %d bytes", len(res.Calls[0].Output))
	}
}

// gateRecorder is a Gates that applies fixed verdicts by point and tool, and records checks.
type gateRecorder struct {
	mu      sync.Mutex
	checks  []agent.GateCheck
	verdict func(agent.GateCheck) (agent.GateVerdict, error)
}

func (g *gateRecorder) Check(_ context.Context, c agent.GateCheck) (agent.GateVerdict, error) {
	g.mu.Lock()
	g.checks = append(g.checks, c)
	g.mu.Unlock()
	return g.verdict(c)
}

// TestGateTable: tool-before stop denies the call (not run, the model gets the reason);
// tool-after stop withholds the result; a replacement replaces it; an addition goes along;
// notes are kept; a gate that cannot be asked fails closed.
func TestGateTable(t *testing.T) {
	var ran []string
	mk := func(name string) agent.Tool {
		return agent.Tool{Name: name, Run: func(context.Context, json.RawMessage) (string, error) {
			ran = append(ran, name)
			return name + " output", nil
		}}
	}
	g := &gateRecorder{verdict: func(c agent.GateCheck) (agent.GateVerdict, error) {
		switch c.Point + "/" + c.Tool {
		case "tool-before/deny":
			return agent.GateVerdict{Action: agent.ActionBlocked, Reason: "not this one", Gate: "g1", Notes: []string{"n1"}}, nil
		case "tool-after/withhold":
			return agent.GateVerdict{Action: agent.ActionBlocked, Reason: "secret inside", Gate: "g2"}, nil
		case "tool-after/replace":
			return agent.GateVerdict{Action: agent.ActionReplaced, Text: "digest", Gate: "g3"}, nil
		case "tool-after/append":
			return agent.GateVerdict{Action: agent.ActionAppended, Text: c.Target + "\n\nmind this", Addition: "mind this", Gate: "g4"}, nil
		case "tool-before/broken":
			return agent.GateVerdict{}, errs.New(errs.Unavailable, "gate service down")
		}
		return agent.GateVerdict{Action: agent.ActionNone}, nil
	}}
	names := []string{"deny", "withhold", "replace", "append", "broken", "plain"}
	var calls []fakechat.ToolCall
	var tools []agent.Tool
	for _, n := range names {
		calls = append(calls, fakechat.ToolCall{ID: "call_" + n, Name: n, Arguments: `{"x":1}`})
		tools = append(tools, mk(n))
	}
	srv := fakechat.NewScript(t, fakechat.Steps(fakechat.Turn{Calls: calls}, fakechat.Turn{Text: "ok"}))
	sess := agent.GateSession{ID: "pet-exec-t1", Preset: "pet", Cwd: "/w", Policy: "read-only"}
	res, err := agent.Run(context.Background(), agent.Config{Model: chatModel(t, srv), User: "go", Tools: tools, Gates: g, Session: sess, Turn: 3})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ran, ",") != "withhold,replace,append,plain" {
		t.Fatalf("tools run: %v", ran)
	}
	got := srv.Calls()[1].Results
	want := []string{"error: denied by a gate: not this one", "error: the result is withheld by a gate: secret inside", "digest",
		"append output\n\nmind this", "error: denied: the gate check failed, so the call was not run: gate service down", "plain output"}
	for i, w := range want {
		if got[i].Output != w {
			t.Errorf("%s: the model got %q, want %q", names[i], got[i].Output, w)
		}
	}
	gates := []string{"the gate g1 denied the call: not this one", "the gate g2 withheld the result: secret inside",
		"the gate g3 replaced the result: digest", "the gate g4 added to the result: mind this", "gate check failed: gate service down", ""}
	for i, w := range gates {
		if res.Calls[i].Gate != w {
			t.Errorf("%s: record gate %q, want %q", names[i], res.Calls[i].Gate, w)
		}
	}
	if strings.Join(res.Calls[0].Notes, ",") != "n1" || res.Calls[1].Output != "withhold output" {
		t.Fatalf("records %+v", res.Calls[:2])
	}
	// The checks carry the session, the turn, the call and the target.
	c0 := g.checks[0]
	if c0.Point != "tool-before" || c0.Session != sess || c0.Turn != 3 || c0.Tool != "deny" || c0.CallID != "call_deny" || c0.Target != `{"x":1}` || string(c0.Args) != `{"x":1}` {
		t.Fatalf("check %+v", c0)
	}
	if a := g.checks[2]; a.Point != "tool-after" || a.Target != "withhold output" {
		t.Fatalf("after check %+v", a)
	}
}

package hostfuncs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// memory is an Extism-like block memory.
type memory struct{ blocks map[uint64][]byte }

func (m *memory) Length(off uint64) (uint64, error) {
	b, ok := m.blocks[off]
	if !ok {
		return 0, errors.New("no block")
	}
	return uint64(len(b)), nil
}
func (m *memory) ReadBytes(off uint64) ([]byte, error) {
	b, ok := m.blocks[off]
	if !ok {
		return nil, errors.New("no block")
	}
	return append([]byte(nil), b...), nil
}
func (m *memory) WriteBytes(b []byte) (uint64, error) {
	if m.blocks == nil {
		m.blocks = map[uint64][]byte{}
	}
	off := uint64(len(m.blocks) + 1)
	m.blocks[off] = append([]byte(nil), b...)
	return off, nil
}

type helper struct {
	err  error
	logs []string
}

func (h *helper) Ask(ctx context.Context, req abi.AskRequest) (abi.AskResponse, error) {
	return abi.AskResponse{Text: "answer to " + req.Instruction}, h.err
}
func (h *helper) Judge(ctx context.Context, req abi.JudgeRequest) (abi.JudgeResponse, error) {
	return abi.JudgeResponse{Engine: "llm"}, h.err
}
func (h *helper) Log(level, message string) { h.logs = append(h.logs, level+": "+message) }

func call(t *testing.T, ctx context.Context, name string, req []byte) abi.HostResult {
	t.Helper()
	m := &memory{}
	off, _ := m.WriteBytes(req)
	stack := []uint64{off}
	for _, f := range Funcs() {
		if f.Name == name {
			f.Call(ctx, m, stack)
		}
	}
	if n := len(m.blocks[stack[0]]); n%8 != 0 {
		t.Fatalf("the result block is %d bytes, not padded to 8", n)
	}
	var res abi.HostResult
	if err := json.Unmarshal(m.blocks[stack[0]], &res); err != nil {
		t.Fatalf("result %q: %v", m.blocks[stack[0]], err)
	}
	return res
}

func TestAskJudge(t *testing.T) {
	h := &helper{}
	ctx := WithRun(context.Background(), NewRun(h, nil, Limits{}))
	tests := []struct {
		name string
		fn   string
		req  string
		herr error
		ok   string
		code string
	}{
		{"ask", abi.FnAsk, `{"instruction":"hi","input":"x"}`, nil, `{"text":"answer to hi"}`, ""},
		{"judge", abi.FnJudge, `{"state":"s","questions":{"q":{"type":"noul","instructions":"i","criteria":{}}}}`, nil, `{"answers":null,"engine":"llm","usage":{"inputTokens":0,"outputTokens":0}}`, ""},
		{"malformed", abi.FnAsk, `{"instruction":`, nil, "", "invalid"},
		{"unknown field", abi.FnAsk, `{"instruction":"hi","model":"x"}`, nil, "", "invalid"},
		{"empty instruction", abi.FnAsk, `{"instruction":" "}`, nil, "", "invalid"},
		{"no questions", abi.FnJudge, `{"state":"s","questions":{}}`, nil, "", "invalid"},
		{"rate limited", abi.FnAsk, `{"instruction":"hi"}`, errs.New(errs.RateLimited, "the run used its 20 helper calls"), "", "rate_limited"},
		{"uncoded error is internal", abi.FnAsk, `{"instruction":"hi"}`, errors.New("secret detail"), "", "internal"},
		{"deadline", abi.FnJudge, `{"state":"s","questions":{"q":{"type":"noul","instructions":"i","criteria":{}}}}`, fmt.Errorf("model: %w", context.DeadlineExceeded), "", "timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h.err = tc.herr
			res := call(t, ctx, tc.fn, []byte(tc.req))
			if tc.code != "" {
				if res.Error == nil || res.Error.Code != tc.code || res.Ok != nil || strings.Contains(res.Error.Message, "secret") {
					t.Fatalf("%+v", res)
				}
				return
			}
			if res.Error != nil || string(res.Ok) != tc.ok {
				t.Fatalf("%+v %s", res.Error, res.Ok)
			}
		})
	}
}

func TestRequestSize(t *testing.T) {
	ctx := WithRun(context.Background(), NewRun(&helper{}, nil, Limits{}))
	pad := func(n int) []byte {
		head := `{"instruction":"x","input":"`
		return []byte(head + strings.Repeat("a", n-len(head)-2) + `"}`)
	}
	if res := call(t, ctx, abi.FnAsk, pad(abi.MaxHelperRequestSize)); res.Error != nil {
		t.Fatalf("at the limit: %+v", res.Error)
	}
	res := call(t, ctx, abi.FnAsk, pad(abi.MaxHelperRequestSize+1))
	if res.Error == nil || res.Error.Code != "too_large" {
		t.Fatalf("over the limit: %+v", res)
	}
}

func TestNoHelper(t *testing.T) {
	res := call(t, context.Background(), abi.FnAsk, []byte(`{"instruction":"hi"}`))
	if res.Error == nil || res.Error.Code != "unavailable" {
		t.Fatalf("%+v", res)
	}
}

func TestLogAndCallLimits(t *testing.T) {
	h := &helper{}
	run := NewRun(h, nil, Limits{MaxHostCalls: 6, MaxLogLines: 3, MaxLogLine: 20})
	ctx := WithRun(context.Background(), run)
	log := func(level, msg string) {
		m := &memory{}
		b, _ := json.Marshal(abi.LogRequest{Level: level, Message: msg})
		off, _ := m.WriteBytes(b)
		logFunc(ctx, m, []uint64{off})
	}
	log("warning", "one")
	log("loud", strings.Repeat("é", 30))
	log("error", "three")
	log("error", "four is dropped")
	log("error", "five is dropped")
	want := []string{"warn: one", "info: " + strings.Repeat("é", 3) + "…[truncated]", "error: three", "warn: pixie_log: 3 lines reached; later lines are dropped"}
	if fmt.Sprint(h.logs) != fmt.Sprint(want) {
		t.Fatalf("logs %q", h.logs)
	}
	log("info", "sixth call")
	func() {
		defer func() {
			if r, _ := recover().(error); !errors.Is(r, ErrHostCallLimit) {
				t.Fatalf("the 7th call did not trap: %v", r)
			}
		}()
		log("info", "seventh call")
	}()
	if run.Calls() != 7 {
		t.Fatalf("%d calls", run.Calls())
	}
}

func TestPetContext(t *testing.T) {
	m := &memory{}
	stack := []uint64{0}
	petContextFunc(WithRun(context.Background(), NewRun(nil, []byte(`{"a":1}`), Limits{})), m, stack)
	if string(m.blocks[stack[0]]) != `{"a":1} ` { // padded with a space to 8 bytes
		t.Fatalf("%q", m.blocks[stack[0]])
	}
	petContextFunc(context.Background(), m, stack)
	if stack[0] != 0 {
		t.Fatal("a gate run got a pet context")
	}
}

func TestContext(t *testing.T) {
	decode := func(t *testing.T, ctx context.Context) (string, map[string]string) {
		t.Helper()
		m := &memory{}
		stack := []uint64{0}
		contextFunc(ctx, m, stack)
		b, ok := m.blocks[stack[0]]
		if !ok {
			t.Fatalf("no block at %d", stack[0])
		}
		target, vars, err := abi.DecodeContext(b)
		if err != nil {
			t.Fatal(err)
		}
		return target, vars
	}
	vars := map[string]string{abi.VarPoint: abi.PointToolBefore, abi.VarToolName: "Bash", "OTHER": "x"}
	tests := []struct {
		name   string
		run    func() *Run
		target string
		vars   map[string]string
	}{
		{"set", func() *Run { r := NewRun(nil, nil, Limits{}); r.SetContext("rm -rf /", vars); return r }, "rm -rf /", vars},
		{"set empty", func() *Run { r := NewRun(nil, nil, Limits{}); r.SetContext("", nil); return r }, "", nil},
		{"not set (pre-initialisation)", func() *Run { return NewRun(nil, nil, Limits{}) }, "", nil},
		{"no run", nil, "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.run != nil {
				ctx = WithRun(ctx, tc.run())
			}
			target, got := decode(t, ctx)
			if target != tc.target || fmt.Sprint(got) != fmt.Sprint(tc.vars) {
				t.Fatalf("got %q %v", target, got)
			}
		})
	}
	t.Run("counts as a host call", func(t *testing.T) {
		run := NewRun(nil, nil, Limits{MaxHostCalls: 2})
		run.SetContext("t", nil)
		ctx := WithRun(context.Background(), run)
		decode(t, ctx)
		decode(t, ctx)
		defer func() {
			if r, _ := recover().(error); !errors.Is(r, ErrHostCallLimit) || !strings.Contains(r.Error(), abi.FnContext) || run.Calls() != 3 {
				t.Fatalf("the 3rd call did not trap: %v (%d calls)", r, run.Calls())
			}
		}()
		decode(t, ctx)
	})
	t.Run("write failure traps", func(t *testing.T) {
		defer func() {
			if r, _ := recover().(error); r == nil || !strings.Contains(r.Error(), "pixie_context: write result") {
				t.Fatalf("recovered %v", r)
			}
		}()
		contextFunc(context.Background(), failingMemory{&memory{}}, []uint64{0})
	})
}

// failingMemory cannot allocate.
type failingMemory struct{ *memory }

func (failingMemory) WriteBytes([]byte) (uint64, error) { return 0, errors.New("out of memory") }

func TestNames(t *testing.T) {
	want := []string{abi.FnAsk, abi.FnJudge, abi.FnLog, abi.FnPetContext, abi.FnContext}
	if fmt.Sprint(Names()) != fmt.Sprint(want) {
		t.Fatalf("%v", Names())
	}
	for _, f := range Funcs() {
		if f.Name == abi.FnContext && (f.Params != 0 || f.Results != 1) {
			t.Fatalf("%s: %d params, %d results", f.Name, f.Params, f.Results)
		}
	}
}

func ExampleABIError() {
	e := ABIError(context.Background(), errs.New(errs.RateLimited, "the run used its 20 helper calls"))
	fmt.Println(e.Code, e.Message)
	// Output: rate_limited the run used its 20 helper calls
}

package helper

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/judge"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// TestOpen drives a helper run opened for a caller outside the gate pipeline (Pet): the
// caller's redaction and system prompt, the target, the real decision engine, the budget, the
// record of calls, and the token's end.
func TestOpen(t *testing.T) {
	jl := newLLM(t, func(c chatCall) (int, string) {
		if strings.Contains(c.User, "Which one") {
			return 200, `{"A": 0.9, "B": 0.1}`
		}
		return 200, `{"yes": 0.8, "no": 0.2}`
	})
	jm, err := model.New(model.Config{Provider: "openai", BaseURL: jl.URL, Model: "judge-test", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	j, err := judge.New(context.Background(), judge.Config{PixieModel: jm})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{judge: j})
	e.svc.SetURL("http://127.0.0.1:7777")
	e.llm.SetReply(answer("hello"))
	const secret = "sekrit-value-42"
	redact := func(s string) string { return strings.ReplaceAll(s, secret, "[$DSH_PET_X]") }
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := e.svc.Open(ctx, Options{Name: "pet:x", Target: "target with " + secret, Redact: redact, AskSystem: "You serve a Skill."})
	defer r.Close()
	if r.URL() != "http://127.0.0.1:7777" || !strings.HasPrefix(r.Token(), "pxr_") {
		t.Fatalf("url %q token prefix %q", r.URL(), r.Token()[:4])
	}

	// Ask: the target, redacted, under the caller's system prompt.
	resp, err := r.Ask(ctx, abi.AskRequest{Instruction: "Say " + secret, UseTarget: true})
	if err != nil || resp.Text != "hello" {
		t.Fatalf("ask: %+v %v", resp, err)
	}
	c := e.llm.Calls()[0]
	if c.System != "You serve a Skill." || !strings.Contains(c.User, "Say [$DSH_PET_X]") || !strings.Contains(c.User, "target with [$DSH_PET_X]") || strings.Contains(c.User, secret) {
		t.Fatalf("ask reached the model as %+v", c)
	}
	// Over HTTP with the token (what a script's `pixie ask` does).
	if _, err := e.svc.Ask(ctx, r.Token(), []byte(`{"instruction":"again `+secret+`"}`)); err != nil {
		t.Fatalf("ask by token: %v", err)
	}
	// Judge through the decision engine: every text redacted, the caller's request untouched.
	q := abi.Question{Type: abi.JudgeSelect, Instructions: "Which one for " + secret + "?",
		Criteria: abi.Criteria{Options: []abi.Option{{Name: "keep", Description: "keep " + secret}, {Name: "drop"}}}}
	req := abi.JudgeRequest{State: "state " + secret, Questions: map[string]abi.Question{"q": q}}
	jr, err := r.Judge(ctx, req)
	if err != nil || jr.Engine != "llm" || jr.Answers["q"].Label == "" {
		t.Fatalf("judge: %+v %v", jr, err)
	}
	if req.Questions["q"].Criteria.Options[0].Description != "keep "+secret || req.State != "state "+secret {
		t.Fatal("the caller's request was modified")
	}
	jc := jl.Calls()
	if len(jc) == 0 {
		t.Fatal("the decision engine was not called")
	}
	for _, c := range jc {
		if strings.Contains(c.System+c.User, secret) || !strings.Contains(c.User, "[$DSH_PET_X]") {
			t.Fatalf("judge prompt %+v", c)
		}
	}
	if _, err := e.svc.Judge(ctx, r.Token(), []byte(`{"useTarget":true,"questions":{"q":{"type":"noul","instructions":"Is it ok?","criteria":{}}}}`)); err != nil {
		t.Fatalf("judge by token: %v", err)
	}
	if last := jl.Calls()[len(jl.Calls())-1]; !strings.Contains(last.User, "target with [$DSH_PET_X]") {
		t.Fatalf("judge on the target: %+v", last)
	}

	// The budget is the gate's: 20 calls, the 21st refused.
	for i := 5; i <= abi.MaxHelperCalls; i++ {
		if _, err := r.Ask(ctx, abi.AskRequest{Instruction: "x"}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if _, err := e.svc.Ask(ctx, r.Token(), []byte(`{"instruction":"x"}`)); !errs.Is(err, errs.RateLimited) {
		t.Fatalf("call 21: %v", err)
	}
	if _, err := r.Ask(ctx, abi.AskRequest{Instruction: strings.Repeat("x", abi.MaxHelperRequestSize)}); !errs.Is(err, errs.TooLarge) {
		t.Fatalf("oversized: %v", err)
	}

	rep := r.Close()
	if len(rep.Calls) != abi.MaxHelperCalls || rep.Calls[2].Type != "judge" || rep.Calls[2].JudgeType != "select" ||
		rep.Calls[2].Label != "keep" || rep.Calls[2].Engine != "llm" || rep.Calls[2].Confidence == nil || rep.Calls[3].Label != "yes" {
		t.Fatalf("report: %d calls %+v", len(rep.Calls), rep.Calls[:4])
	}
	if rep.Usage.InputTokens == 0 {
		t.Fatalf("usage %+v", rep.Usage)
	}
	if _, err := e.svc.Ask(ctx, r.Token(), []byte(`{"instruction":"x"}`)); !errs.Is(err, errs.Unauthorized) {
		t.Fatalf("after Close: %v", err)
	}
	if again := r.Close(); len(again.Calls) != abi.MaxHelperCalls {
		t.Fatalf("a second Close reported %d calls", len(again.Calls))
	}
}

// TestOpenDeadline: calls are bounded by the run's context.
func TestOpenDeadline(t *testing.T) {
	e := newEnv(t, envOptions{})
	slow := make(chan struct{})
	defer close(slow)
	e.llm.SetReply(func(chatCall) (int, string) { <-slow; return 200, "late" })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	r := e.svc.Open(ctx, Options{})
	defer r.Close()
	if _, err := e.svc.Ask(context.Background(), r.Token(), []byte(`{"instruction":"x"}`)); !errs.Is(err, errs.Timeout) {
		t.Fatalf("past the run's deadline: %v", err)
	}
	if r.URL() != "" {
		t.Fatalf("no helper URL configured, got %q", r.URL())
	}
}

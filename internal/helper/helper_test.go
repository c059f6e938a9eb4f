package helper

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// TestHelperBudget drives a run's helper directly, as WASM host functions do
// (runtime.Helper), and through the token routes' entry points (Service.Ask, Service.Judge).
func TestHelperBudget(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.llm.SetReply(answer("hello"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := e.svc.Open(ctx, Options{Name: "g", Target: "THE TARGET"})

	// The target is substituted when no input is given.
	resp, err := h.Ask(ctx, abi.AskRequest{Instruction: "Translate.", UseTarget: true})
	if err != nil || resp.Text != "hello" {
		t.Fatalf("ask: %+v %v", resp, err)
	}
	if c := e.llm.Calls(); !strings.Contains(c[0].User, "THE TARGET") || !strings.Contains(c[0].User, "Translate.") {
		t.Errorf("ask request: %+v", c[0])
	}
	// Refused requests do not count: an empty instruction, an oversized body, bad JSON.
	if _, err := h.Ask(ctx, abi.AskRequest{}); !errs.Is(err, errs.Invalid) {
		t.Errorf("empty instruction: %v", err)
	}
	if _, err := e.svc.Ask(ctx, h.token, []byte(strings.Repeat(" ", abi.MaxHelperRequestSize+1))); !errs.Is(err, errs.TooLarge) {
		t.Errorf("oversized: %v", err)
	}
	if _, err := e.svc.Ask(ctx, h.token, []byte(`{"instruction":"x","extra":1}`)); !errs.Is(err, errs.Invalid) {
		t.Errorf("unknown field: %v", err)
	}
	// No decision engine: 503, and it counts (it was admitted).
	if _, err := e.svc.Judge(ctx, h.token, []byte(`{"state":"s","questions":{"q":{"type":"noul","instructions":"?","criteria":{}}}}`)); !errs.Is(err, errs.Unavailable) {
		t.Errorf("judge without engine: %v", err)
	}
	for i := 3; i <= abi.MaxHelperCalls; i++ {
		if _, err := e.svc.Ask(ctx, h.token, []byte(`{"instruction":"x"}`)); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if _, err := h.Ask(ctx, abi.AskRequest{Instruction: "x"}); !errs.Is(err, errs.RateLimited) {
		t.Errorf("call 21: %v", err)
	}
	if _, err := e.svc.Ask(ctx, "pxr_"+strings.Repeat("A", 43), []byte(`{"instruction":"x"}`)); !errs.Is(err, errs.Unauthorized) {
		t.Errorf("unknown token: %v", err)
	}
	rep := h.Close()
	calls, usage := rep.Calls, rep.Usage
	if len(calls) != abi.MaxHelperCalls || calls[1].Type != "judge" || calls[1].Error == "" || usage.InputTokens != 19*10 {
		t.Errorf("collected %d calls, usage %+v", len(calls), usage)
	}
	if _, err := e.svc.Ask(ctx, h.token, []byte(`{"instruction":"x"}`)); !errs.Is(err, errs.Unauthorized) {
		t.Errorf("after the run: %v", err)
	}
	if _, err := h.Ask(ctx, abi.AskRequest{Instruction: "x"}); !errs.Is(err, errs.Unauthorized) {
		t.Errorf("direct call after the run: %v", err)
	}
}

func TestHelperDeadlineAndModelErrors(t *testing.T) {
	e := newEnv(t, envOptions{})
	slow := make(chan struct{})
	defer close(slow)
	e.llm.SetReply(func(chatCall) (int, string) { <-slow; return http.StatusOK, "late" })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	h := e.svc.Open(ctx, Options{Name: "g"})
	if _, err := h.Ask(context.Background(), abi.AskRequest{Instruction: "x"}); !errs.Is(err, errs.Timeout) {
		t.Errorf("past the run's deadline: %v", err)
	}
	h.Close()

	e.llm.SetReply(func(chatCall) (int, string) { return http.StatusInternalServerError, "" })
	h = e.svc.Open(context.Background(), Options{Name: "g"})
	if _, err := h.Ask(context.Background(), abi.AskRequest{Instruction: "x"}); !errs.Is(err, errs.Upstream) {
		t.Errorf("model 500: %v", err)
	}
	h.Close()

	none := newEnv(t, envOptions{noModel: true})
	h = none.svc.Open(context.Background(), Options{Name: "g"})
	if _, err := h.Ask(context.Background(), abi.AskRequest{Instruction: "x"}); !errs.Is(err, errs.Unavailable) {
		t.Errorf("no model: %v", err)
	}
	h.Close()
}

func TestTokenOwner(t *testing.T) {
	for _, c := range []struct{ tok, want string }{
		{"pxr_0a1b.abc", "0a1b"},
		{"pxr_0A1B.abc", ""},
		{"pxr_.abc", ""},
		{"pxr_abc", ""},
		{"pxr_../x.abc", ""},
		{"Bearer pxr_00.x", ""},
		{"", ""},
	} {
		if got := TokenOwner(c.tok); got != c.want {
			t.Errorf("TokenOwner(%q) = %q, want %q", c.tok, got, c.want)
		}
	}
}

func TestHelperTokens(t *testing.T) {
	r, err := New(context.Background(), Config{Instance: "0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		h := r.Open(context.Background(), Options{Name: "g"})
		if seen[h.token] || len(h.token) != 4+16+1+43 || TokenOwner(h.token) != "0123456789abcdef" {
			t.Fatalf("token %q repeated or malformed", h.token)
		}
		seen[h.token] = true
		if r.lookup(h.token) != h || r.lookup(h.token+"x") != nil || r.lookup(h.token[:len(h.token)-1]) != nil {
			t.Fatal("lookup")
		}
		h.Close()
		if r.lookup(h.token) != nil {
			t.Fatal("a revoked token still resolves")
		}
	}
	if r.lookup("") != nil {
		t.Error("empty token")
	}
}

// An in-process run (a WASM guest's) mints no token and registers nothing: no HTTP call can
// reach it, and it still answers its own caller.
func TestInProcessRun(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.llm.SetReply(answer("hello"))
	before := len(e.svc.byHash)
	r := e.svc.Open(context.Background(), Options{Name: "g", Target: "t", InProcess: true})
	if r.Token() != "" || len(e.svc.byHash) != before {
		t.Fatalf("token %q, %d registered runs (was %d); want none minted, none added", r.Token(), len(e.svc.byHash), before)
	}
	if resp, err := r.Ask(context.Background(), abi.AskRequest{Instruction: "hi", UseTarget: true}); err != nil || resp.Text != "hello" {
		t.Fatalf("ask in process: %+v %v", resp, err)
	}
	if _, err := e.svc.Ask(context.Background(), "", []byte(`{"instruction":"hi"}`)); err == nil {
		t.Fatal("an empty token reached a run")
	}
	r.Close()
	if _, err := r.Ask(context.Background(), abi.AskRequest{Instruction: "hi"}); err == nil {
		t.Fatal("a closed in-process run still answers")
	}
}

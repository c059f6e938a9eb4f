package helper_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/helper"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// A run (here a Pet Skill's Run) opens a helper: it serves host functions (runtime.Helper),
// its token the HTTP helper routes, with the gate's budget; redaction keeps the caller's
// secrets out of what the model sees. Close revokes the token and reports the calls.
func ExampleService_Open() {
	var seen string
	llm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen = string(b)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Bonjour"}}],"usage":{"prompt_tokens":12,"completion_tokens":1,"total_tokens":13}}`)
	}))
	defer llm.Close()
	ctx := context.Background()
	m, _ := model.New(model.Config{Provider: "openai", BaseURL: llm.URL + "/v1", Model: "m", APIKey: "k"})
	s, _ := helper.New(context.Background(), helper.Config{Instance: "0123456789abcdef", Model: m, URL: "http://127.0.0.1:8484"})

	run := s.Open(ctx, helper.Options{Name: "pet:greet", Target: "Hello, I am agent-7.",
		Redact: func(t string) string { return strings.ReplaceAll(t, "agent-7", "[$DSH_PET_NAME]") }})
	resp, err := run.Ask(ctx, abi.AskRequest{Instruction: "Translate into French.", UseTarget: true})
	fmt.Println(resp.Text, err, strings.Contains(seen, "agent-7"), run.URL())
	token := run.Token()
	rep := run.Close()
	fmt.Println(len(rep.Calls), rep.Calls[0].Type, rep.Usage.InputTokens)
	_, err = s.Ask(ctx, token, []byte(`{"instruction":"again"}`))
	fmt.Println(errs.CodeOf(err))
	// Output:
	// Bonjour <nil> false http://127.0.0.1:8484
	// 1 ask 12
	// unauthorized
}

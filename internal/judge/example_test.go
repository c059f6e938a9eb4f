package judge_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/pixie-dev/pixie/internal/judge"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// A bool judgment on an OpenAI-compatible server that returns log-probabilities: the "yes"
// probability comes from the answer token's top alternatives, renormalised over yes and no.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		// P(" Yes") = 0.6, P("yes") = 0.2, P(" No") = 0.2 (logprobs are natural logarithms).
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1717000000,"model":"m",
			"choices":[{"index":0,"finish_reason":"length","message":{"role":"assistant","content":" Yes"},
			"logprobs":{"content":[{"token":" Yes","logprob":-0.5108256,"bytes":[32,89,101,115],"top_logprobs":[
				{"token":" Yes","logprob":-0.5108256,"bytes":[32,89,101,115]},
				{"token":"yes","logprob":-1.6094379,"bytes":[121,101,115]},
				{"token":" No","logprob":-1.6094379,"bytes":[32,78,111]}]}]}}],
			"usage":{"prompt_tokens":90,"completion_tokens":1,"total_tokens":91}}`)
	}))
	defer srv.Close()

	pixie, _ := model.New(model.Config{Provider: "openai", BaseURL: srv.URL + "/v1", Model: "m"})
	s, _ := judge.New(context.Background(), judge.Config{PixieModel: pixie})
	resp, err := s.Judge(context.Background(), abi.JudgeRequest{
		State: "All 42 tests passed.",
		Questions: map[string]abi.Question{
			"passed": {Type: abi.JudgeBool, Instructions: "Does the text report that the tests passed?"},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	a := resp.Answers["passed"]
	fmt.Printf("%s yes=%.4f confidence=%.4f engine=%s\n", a.Label, *a.Yes, a.Confidence, resp.Engine)
	// Output: yes yes=0.8000 confidence=0.2781 engine=llm
}

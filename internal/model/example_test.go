package model_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/pixie-dev/pixie/internal/model"
)

// An OpenAI-compatible server (here a stand-in for vLLM, llama.cpp or Ollama) answers one chat
// completion.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1717000000,
			"model":"qwen2.5-7b-instruct","choices":[{"index":0,"finish_reason":"stop","logprobs":null,
			"message":{"role":"assistant","content":"Paris"}}],
			"usage":{"prompt_tokens":14,"completion_tokens":2,"total_tokens":16}}`)
	}))
	defer srv.Close()

	m, err := model.New(model.Config{Provider: "openai", BaseURL: srv.URL + "/v1", Model: "qwen2.5-7b-instruct"})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := m.Complete(context.Background(), model.Request{
		Messages: []model.Message{{Role: model.RoleUser, Content: "Capital of France? One word."}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Text, resp.Usage.InputTokens, resp.Usage.OutputTokens, resp.Logprobs == nil)

	// No provider configured: a normal state whose calls fail with ErrNoModel.
	none, _ := model.New(model.Config{})
	_, err = none.Complete(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}})
	fmt.Println(none.Info().Configured, errors.Is(err, model.ErrNoModel))
	// Output:
	// Paris 14 2 true
	// false true
}

package agent_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/pixie-dev/pixie/internal/agent"
	"github.com/pixie-dev/pixie/internal/model"
)

// A model (here a chat completions server that lists the root once, then answers) runs with
// the file tools over a directory; the Result holds the answer and every tool call.
func Example() {
	root, _ := os.MkdirTemp("", "agent-example-")
	defer os.RemoveAll(root)
	_ = os.WriteFile(filepath.Join(root, "notes.txt"), []byte("hello\n"), 0o644)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		body, _ := io.ReadAll(r.Body)
		// No tool result in the conversation yet: call list; then answer.
		if !strings.Contains(string(body), `"role":"tool"`) {
			_, _ = fmt.Fprint(w, `{"id":"1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls",
"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"list","arguments":"{}"}}]}}],
"usage":{"prompt_tokens":50,"completion_tokens":5,"total_tokens":55}}`)
			return
		}
		_, _ = fmt.Fprint(w, `{"id":"2","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop",
"message":{"role":"assistant","content":"The root holds notes.txt."}}],"usage":{"prompt_tokens":80,"completion_tokens":7,"total_tokens":87}}`)
	}))
	defer srv.Close()
	m, _ := model.New(model.Config{Provider: "openai", BaseURL: srv.URL + "/v1", Model: "m"})
	tools, _ := agent.FileTools(agent.FileOptions{Root: root})
	res, err := agent.Run(context.Background(), agent.Config{Model: m, System: "You tidy folders.", User: "What is here?", Tools: tools})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Text)
	fmt.Println(res.Steps, "steps,", res.Usage.InputTokens+res.Usage.OutputTokens, "tokens")
	for _, c := range res.Calls {
		fmt.Printf("#%d step %d %s %s -> %q\n", c.N, c.Step, c.Name, c.Input, c.Output)
	}
	// Output:
	// The root holds notes.txt.
	// 2 steps, 142 tokens
	// #1 step 1 list {} -> ". (1 entries)\nnotes.txt  6 B"
}

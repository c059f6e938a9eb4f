package helper

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/pixie-dev/pixie/internal/model"
)

// chatCall is one chat.completions request the test model server received.
type chatCall struct {
	System string
	User   string
}

// llmServer is a test model server speaking the OpenAI chat.completions wire format; the
// real openai-go client (through internal/model) talks to it.
type llmServer struct {
	URL   string
	mu    sync.Mutex
	calls []chatCall
	// reply answers a call: an HTTP status and, for 200, the assistant's content.
	reply func(c chatCall) (int, string)
}

func newLLM(t testing.TB, reply func(c chatCall) (int, string)) *llmServer {
	t.Helper()
	l := &llmServer{reply: reply}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		var body struct {
			Messages []struct {
				Role    string `json:"role"`
				Content any    `json:"content"`
			} `json:"messages"`
		}
		raw, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(raw, &body); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		var c chatCall
		for _, m := range body.Messages {
			text := contentText(m.Content)
			switch m.Role {
			case "system", "developer":
				c.System += text
			case "user":
				c.User += text
			}
		}
		l.mu.Lock()
		l.calls = append(l.calls, c)
		reply := l.reply
		l.mu.Unlock()
		status, content := reply(c)
		w.Header().Set("Content-Type", "application/json")
		if status != http.StatusOK {
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"error":{"message":"upstream says %d","type":"server_error","param":null,"code":null}}`, status)
			return
		}
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1717000000,"model":"pixie-test",
"choices":[{"index":0,"finish_reason":"stop","logprobs":null,"message":{"role":"assistant","content":%s,"refusal":null}}],
"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, mustJSON(content))
	}))
	t.Cleanup(srv.Close)
	l.URL = srv.URL + "/v1"
	return l
}

func contentText(v any) string {
	switch c := v.(type) {
	case string:
		return c
	case []any:
		s := ""
		for _, p := range c {
			if m, ok := p.(map[string]any); ok {
				if t, ok := m["text"].(string); ok {
					s += t
				}
			}
		}
		return s
	}
	return ""
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func (l *llmServer) setReply(f func(c chatCall) (int, string)) {
	l.mu.Lock()
	l.reply = f
	l.mu.Unlock()
}

func (l *llmServer) Calls() []chatCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]chatCall(nil), l.calls...)
}

// answer replies with a fixed content.
func answer(content string) func(chatCall) (int, string) {
	return func(chatCall) (int, string) { return http.StatusOK, content }
}

// testEnv is a Service over a real OpenAI-provider model talking to a test model server.
type testEnv struct {
	svc *Service
	llm *llmServer
}

type envOptions struct {
	noModel bool
	judge   Judge
}

func newEnv(t testing.TB, o envOptions) *testEnv {
	t.Helper()
	e := &testEnv{}
	var m model.Model
	if o.noModel {
		var err error
		if m, err = model.New(model.Config{}); err != nil {
			t.Fatal(err)
		}
	} else {
		e.llm = newLLM(t, answer(`{"verdict":"pass"}`))
		var err error
		m, err = model.New(model.Config{Provider: "openai", BaseURL: e.llm.URL, Model: "pixie-test", APIKey: "sk-test-secret"})
		if err != nil {
			t.Fatal(err)
		}
	}
	svc, err := New(context.Background(), Config{Instance: "0123456789abcdef", Model: m, Judge: o.judge})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	return e
}

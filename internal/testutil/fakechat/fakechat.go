// Package fakechat is a test model server speaking OpenAI's chat.completions wire format, for
// tests that drive the real openai-go client (through internal/model) against it: each call's
// system and user text is recorded, and a reply function chooses the answer.
package fakechat

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Call is one chat.completions request the server received.
type Call struct {
	System string
	User   string
}

// Reply answers a call: an HTTP status and, for 200, the assistant's content.
type Reply func(c Call) (int, string)

// Server is the test model server; URL is its base URL (…/v1), for a model's baseUrl.
type Server struct {
	URL   string
	mu    sync.Mutex
	calls []Call
	reply Reply
}

// New starts a server answering with reply; t's cleanup stops it.
func New(t testing.TB, reply Reply) *Server {
	t.Helper()
	l := &Server{reply: reply}
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
		var c Call
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
		text, _ := json.Marshal(content)
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1717000000,"model":"pixie-test",
"choices":[{"index":0,"finish_reason":"stop","logprobs":null,"message":{"role":"assistant","content":%s,"refusal":null}}],
"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, text)
	}))
	t.Cleanup(srv.Close)
	l.URL = srv.URL + "/v1"
	return l
}

// contentText is a message's text: a string, or the text parts of a content array.
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

// SetReply changes how later calls are answered.
func (l *Server) SetReply(f Reply) {
	l.mu.Lock()
	l.reply = f
	l.mu.Unlock()
}

// Calls returns the calls received so far.
func (l *Server) Calls() []Call {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Call(nil), l.calls...)
}

// Answer replies to every call with a fixed content.
func Answer(content string) Reply {
	return func(Call) (int, string) { return http.StatusOK, content }
}

// Package fakechat is a test model server speaking OpenAI's chat.completions wire format, for
// tests that drive the real openai-go client (through internal/model) against it: each call's
// system and user text, its messages (tool calls, tool results, image parts) and the tools it
// offered are recorded, and a reply function or a script chooses the answer, which may make
// tool calls (tool_calls with finish_reason "tool_calls", as the API answers).
package fakechat

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Call is one chat.completions request the server received.
type Call struct {
	// System and User are the text of the system (or developer) and user messages, joined.
	System string
	User   string
	// Messages are every message as sent, in order.
	Messages []Message
	// Tools are the names of the function tools offered.
	Tools []string
	// Results are the role "tool" messages, oldest first.
	Results []ToolResult
	// Images are the image parts of user messages, decoded from their data URLs.
	Images []Image
	// Raw is the request body.
	Raw []byte
}

// Message is one message of a request.
type Message struct {
	Role string
	// Text is the message's text (its text parts joined).
	Text string
	// ToolCalls are an assistant message's tool calls.
	ToolCalls []ToolCall
	// ToolCallID is a tool message's call id.
	ToolCallID string
}

// ToolCall is a function call: the model's answer, or an assistant message sent back.
type ToolCall struct {
	// ID is the call id; empty in a Turn gets a generated one (call_…).
	ID   string
	Name string
	// Arguments is the JSON text of the arguments.
	Arguments string
}

// ToolResult is a role "tool" message.
type ToolResult struct {
	CallID string
	Output string
}

// Image is an image part of a user message.
type Image struct {
	// URL is the image_url as sent; MediaType and Data are decoded from a base64 data URL.
	URL       string
	MediaType string
	Data      []byte
}

// Turn is a scripted answer.
type Turn struct {
	// Status, when not 200 (or zero), answers with that HTTP status and an error body.
	Status int
	Text   string
	Calls  []ToolCall
	// Finish overrides finish_reason ("stop", or "tool_calls" when there are calls).
	Finish string
	// Raw, when set, is sent as the whole response body (for malformed answers).
	Raw string
}

// Script answers a call.
type Script func(c Call) Turn

// Reply answers a call: an HTTP status and, for 200, the assistant's content.
type Reply func(c Call) (int, string)

// Server is the test model server; URL is its base URL (…/v1), for a model's baseUrl.
type Server struct {
	URL    string
	mu     sync.Mutex
	calls  []Call
	script Script
	ids    int
}

// New starts a server answering with reply; t's cleanup stops it.
func New(t testing.TB, reply Reply) *Server {
	t.Helper()
	return NewScript(t, replyScript(reply))
}

func replyScript(reply Reply) Script {
	return func(c Call) Turn {
		status, content := reply(c)
		return Turn{Status: status, Text: content}
	}
}

// NewScript starts a server answering with script; t's cleanup stops it.
func NewScript(t testing.TB, script Script) *Server {
	t.Helper()
	l := &Server{script: script}
	srv := httptest.NewServer(http.HandlerFunc(l.serve))
	t.Cleanup(srv.Close)
	l.URL = srv.URL + "/v1"
	return l
}

type wireBody struct {
	Messages []struct {
		Role       string `json:"role"`
		Content    any    `json:"content"`
		ToolCallID string `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

func (l *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var body wireBody
	if err := json.Unmarshal(raw, &body); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	c := Call{Raw: raw}
	for _, t := range body.Tools {
		c.Tools = append(c.Tools, t.Function.Name)
	}
	for _, m := range body.Messages {
		text := contentText(m.Content)
		msg := Message{Role: m.Role, Text: text, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		c.Messages = append(c.Messages, msg)
		switch m.Role {
		case "system", "developer":
			c.System += text
		case "user":
			c.User += text
			c.Images = append(c.Images, contentImages(m.Content)...)
		case "tool":
			c.Results = append(c.Results, ToolResult{CallID: m.ToolCallID, Output: text})
		}
	}
	l.mu.Lock()
	l.calls = append(l.calls, c)
	script := l.script
	l.mu.Unlock()
	a := script(c)
	w.Header().Set("Content-Type", "application/json")
	if a.Status != 0 && a.Status != http.StatusOK {
		w.WriteHeader(a.Status)
		fmt.Fprintf(w, `{"error":{"message":"upstream says %d","type":"server_error","param":null,"code":null}}`, a.Status)
		return
	}
	if a.Raw != "" {
		_, _ = io.WriteString(w, a.Raw)
		return
	}
	msg := map[string]any{"role": "assistant", "content": a.Text, "refusal": nil}
	finish := "stop"
	if len(a.Calls) > 0 {
		finish = "tool_calls"
		var calls []any
		for _, tc := range a.Calls {
			id := tc.ID
			if id == "" {
				id = l.nextID()
			}
			calls = append(calls, map[string]any{"id": id, "type": "function",
				"function": map[string]any{"name": tc.Name, "arguments": tc.Arguments}})
		}
		msg["tool_calls"] = calls
		if a.Text == "" {
			msg["content"] = nil
		}
	}
	if a.Finish != "" {
		finish = a.Finish
	}
	out, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 1717000000, "model": "pixie-test",
		"choices": []any{map[string]any{"index": 0, "finish_reason": finish, "logprobs": nil, "message": msg}},
		"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
	})
	_, _ = w.Write(out)
}

func (l *Server) nextID() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ids++
	return fmt.Sprintf("call_%04d", l.ids)
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

// contentImages are the image_url parts of a content array.
func contentImages(v any) []Image {
	parts, _ := v.([]any)
	var out []Image
	for _, p := range parts {
		m, _ := p.(map[string]any)
		if m["type"] != "image_url" {
			continue
		}
		iu, _ := m["image_url"].(map[string]any)
		u, _ := iu["url"].(string)
		img := Image{URL: u}
		if rest, ok := strings.CutPrefix(u, "data:"); ok {
			if mt, data, ok := strings.Cut(rest, ";base64,"); ok {
				img.MediaType = mt
				img.Data, _ = base64.StdEncoding.DecodeString(data)
			}
		}
		out = append(out, img)
	}
	return out
}

// SetReply changes how later calls are answered.
func (l *Server) SetReply(f Reply) { l.SetScript(replyScript(f)) }

// SetScript changes how later calls are answered.
func (l *Server) SetScript(f Script) {
	l.mu.Lock()
	l.script = f
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

// Steps is a script for an agent loop: a call gets steps[n], where n is the number of tool
// results in its conversation (so a retried call gets the same answer), and the last step once
// they run out.
func Steps(steps ...Turn) Script {
	return func(c Call) Turn {
		if len(steps) == 0 {
			return Turn{Text: "ok"}
		}
		n := len(c.Results)
		if n >= len(steps) {
			n = len(steps) - 1
		}
		return steps[n]
	}
}

// Package fakemodel holds fake model APIs for tests that drive real agent CLIs (Claude Code,
// Codex) or real SDKs offline: an Anthropic Messages server and an OpenAI Responses server
// that speak those services' wire formats (JSON and streaming SSE), answer from a script that
// can make tool calls, and record every request body so a test can check what the model was
// sent (for example that a withheld tool result is absent from the next request).
//
// A fake stands in only for the remote service: the client under test is real. Point Claude
// Code at an Anthropic server with ANTHROPIC_BASE_URL=<URL>, and Codex at an OpenAI server
// with a model provider whose base_url is <URL>/v1 and wire_api "responses".
package fakemodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Call is a tool call the model makes.
type Call struct {
	// ID is the call's id; empty gets a generated one (toolu_…, call_…).
	ID string
	// Name is the tool's name as the client offered it (Bash, shell, mcp__pixie__judge, …).
	Name string
	// Input is the call's arguments, a JSON object.
	Input any
}

// Reply is one model answer: text, then tool calls.
type Reply struct {
	Text  string
	Calls []Call
	// Status, when non-zero, answers with that HTTP status and an error body of the
	// service's shape instead of a message.
	Status int
}

// ToolResult is a tool result the client sent back to the model.
type ToolResult struct {
	CallID  string
	Output  string // the result's text (Anthropic blocks joined; OpenAI output string)
	IsError bool
}

// Request is one request a client sent, as recorded.
type Request struct {
	// Index counts the server's requests from 0.
	Index  int
	Method string
	Path   string
	Header http.Header
	// Body is the raw request body.
	Body []byte
	// Model and Stream are read from the body.
	Model  string
	Stream bool
	// Tools lists the names of the tools offered.
	Tools []string
	// Results are every tool result in the conversation, oldest first.
	Results []ToolResult
	// LastUser is the text of the last user message (its text parts joined).
	LastUser string
	// Images are the base64 image blocks of user messages, decoded (Anthropic).
	Images []Image
}

// Image is an image a client sent.
type Image struct {
	MediaType string
	Data      []byte
}

// HasTool reports whether the request offers a tool called name.
func (r Request) HasTool(name string) bool {
	for _, t := range r.Tools {
		if t == name {
			return true
		}
	}
	return false
}

// Contains reports whether the raw body contains s (as JSON-escaped text too, so a string with
// quotes or newlines is found the way it travels).
func (r Request) Contains(s string) bool {
	if strings.Contains(string(r.Body), s) {
		return true
	}
	q, _ := json.Marshal(s)
	return strings.Contains(string(r.Body), strings.Trim(string(q), `"`))
}

// Script decides each answer from the request.
type Script func(Request) Reply

// Steps is a script for an agent loop: a request that offers tools gets steps[n], where n is
// the number of tool results in its conversation (so a retried request gets the same answer),
// and the last step once they run out; a request without tools (a title or summary the client
// asks for on the side) gets the text "ok".
func Steps(steps ...Reply) Script {
	return func(r Request) Reply {
		if len(r.Tools) == 0 || len(steps) == 0 {
			return Reply{Text: "ok"}
		}
		n := len(r.Results)
		if n >= len(steps) {
			n = len(steps) - 1
		}
		return steps[n]
	}
}

// Server is a running fake model API.
type Server struct {
	// URL is the server's base URL (no trailing slash, no /v1).
	URL string

	srv    *httptest.Server
	script Script
	mu     sync.Mutex
	reqs   []Request
	calls  int
}

// Requests returns a copy of every request recorded so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// ModelRequests returns the recorded requests to the model endpoint that offered tools (the
// agent loop's own requests, not side requests such as titles or token counts).
func (s *Server) ModelRequests() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Method == http.MethodPost && len(r.Tools) > 0 && (strings.HasSuffix(r.Path, "/messages") || strings.HasSuffix(r.Path, "/responses")) {
			out = append(out, r)
		}
	}
	return out
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

func (s *Server) record(r *http.Request, body []byte, fill func(*Request)) Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	req := Request{Index: len(s.reqs), Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	if fill != nil {
		fill(&req)
	}
	s.reqs = append(s.reqs, req)
	return req
}

func (s *Server) nextID(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	return fmt.Sprintf("%s%04d", prefix, s.calls)
}

func start(t testing.TB, script Script, h func(s *Server) http.Handler) *Server {
	t.Helper()
	if script == nil {
		script = Steps()
	}
	s := &Server{script: script}
	s.srv = httptest.NewServer(h(s))
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

func readBody(r *http.Request) []byte {
	b, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	return b
}

// sse writes one server-sent event and flushes it.
func sse(w http.ResponseWriter, event string, data any) {
	raw, _ := json.Marshal(data)
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", raw)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// inputJSON is a call's arguments as a JSON object text.
func inputJSON(v any) string {
	switch x := v.(type) {
	case nil:
		return "{}"
	case string:
		return x
	case json.RawMessage:
		return string(x)
	case []byte:
		return string(x)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return "{}"
	}
	return string(raw)
}

// chunks splits s into pieces of at most n bytes on rune boundaries (streams deliver text in
// deltas; a client must join them).
func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		i := n
		for i > 0 && !isRuneStart(s[i]) {
			i--
		}
		if i == 0 {
			i = n
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

package fakemodel

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// NewOpenAI starts a fake OpenAI Responses API: POST /v1/responses (JSON, or SSE when the body
// asks for "stream": true) and GET /v1/models. A call to a tool the request offers as a
// "custom" tool (free-form input, such as Codex's apply_patch) is sent as a custom_tool_call
// whose input is Call.Input (a string); every other call is a function_call, carrying the
// "namespace" of the namespace tool that lists it, if any. Every other path
// answers 404 with OpenAI's error shape. It is closed at test end.
func NewOpenAI(t testing.TB, script Script) *Server {
	return start(t, script, func(s *Server) http.Handler {
		return http.HandlerFunc(s.serveOpenAI)
	})
}

type openaiBody struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
	// Input is a string (one user message) or a list of items.
	Input json.RawMessage `json:"input"`
	Tools []struct {
		Type string `json:"type"`
		Name string `json:"name"`
		// Namespace tools (MCP servers grouped by some clients) list their functions.
		Tools []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tools"`
	} `json:"tools"`
}

type openaiItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	CallID  string          `json:"call_id"`
	Output  json.RawMessage `json:"output"`
}

func openaiError(w http.ResponseWriter, status int, kind, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	raw, _ := json.Marshal(map[string]any{"error": map[string]any{"type": kind, "message": msg, "param": nil, "code": nil}})
	_, _ = w.Write(raw)
}

// openaiText is the text of a content or output value: a string, or parts with "text".
func openaiText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func (s *Server) serveOpenAI(w http.ResponseWriter, r *http.Request) {
	body := readBody(r)
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models") {
		s.record(r, body, nil)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"list","data":[]}`))
		return
	}
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/responses") {
		s.record(r, body, nil)
		openaiError(w, http.StatusNotFound, "invalid_request_error", "not found: "+r.URL.Path)
		return
	}
	var in openaiBody
	if err := json.Unmarshal(body, &in); err != nil {
		s.record(r, body, nil)
		openaiError(w, http.StatusBadRequest, "invalid_request_error", "body is not JSON: "+err.Error())
		return
	}
	custom := map[string]bool{}
	namespace := map[string]string{}
	req := s.record(r, body, func(q *Request) {
		q.Model, q.Stream = in.Model, in.Stream
		for _, t := range in.Tools {
			name := t.Name
			if name == "" {
				name = t.Type
			}
			q.Tools = append(q.Tools, name)
			if t.Type == "custom" {
				custom[name] = true
			}
			for _, sub := range t.Tools {
				q.Tools = append(q.Tools, sub.Name)
				namespace[sub.Name] = t.Name
			}
		}
		var items []json.RawMessage
		if text, ok := stringValue(in.Input); ok {
			q.LastUser = text
		} else {
			_ = json.Unmarshal(in.Input, &items)
		}
		for _, raw := range items {
			var it openaiItem
			if json.Unmarshal(raw, &it) != nil {
				continue
			}
			switch it.Type {
			case "function_call_output", "custom_tool_call_output", "mcp_tool_call_output":
				q.Results = append(q.Results, ToolResult{CallID: it.CallID, Output: openaiText(it.Output)})
			case "message", "":
				if it.Role == "user" {
					q.LastUser = openaiText(it.Content)
				}
			}
		}
	})
	rep := s.script(req)
	if rep.Status != 0 {
		openaiError(w, rep.Status, "server_error", "scripted failure")
		return
	}
	respID := s.nextID("resp_")
	var output []map[string]any
	if rep.Text != "" || len(rep.Calls) == 0 {
		output = append(output, map[string]any{
			"id": s.nextID("msg_"), "type": "message", "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": rep.Text, "annotations": []any{}}},
		})
	}
	for _, c := range rep.Calls {
		id := c.ID
		if id == "" {
			id = s.nextID("call_")
		}
		if custom[c.Name] {
			in, _ := c.Input.(string)
			output = append(output, map[string]any{"id": s.nextID("ctc_"), "type": "custom_tool_call", "status": "completed", "call_id": id, "name": c.Name, "input": in})
			continue
		}
		item := map[string]any{"id": s.nextID("fc_"), "type": "function_call", "status": "completed", "call_id": id, "name": c.Name, "arguments": inputJSON(c.Input)}
		if ns := namespace[c.Name]; ns != "" {
			item["namespace"] = ns // a function of a namespace tool (Codex's multi_agent_v1, MCP servers)
		}
		output = append(output, item)
	}
	inTok := len(body)/4 + 1
	usage := map[string]any{"input_tokens": inTok, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": 10, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": inTok + 10}
	now := time.Now().Unix()
	resp := func(status string, out []map[string]any) map[string]any {
		m := map[string]any{"id": respID, "object": "response", "created_at": now, "status": status, "model": in.Model,
			"output": out, "parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{}, "error": nil, "incomplete_details": nil}
		if status == "completed" {
			m["usage"] = usage
		}
		return m
	}
	if !in.Stream {
		w.Header().Set("Content-Type", "application/json")
		raw, _ := json.Marshal(resp("completed", output))
		_, _ = w.Write(raw)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	seq := 0
	ev := func(typ string, m map[string]any) {
		m["type"] = typ
		m["sequence_number"] = seq
		seq++
		sse(w, typ, m)
	}
	ev("response.created", map[string]any{"response": resp("in_progress", []map[string]any{})})
	ev("response.in_progress", map[string]any{"response": resp("in_progress", []map[string]any{})})
	for i, item := range output {
		id := item["id"]
		switch item["type"] {
		case "message":
			text := item["content"].([]any)[0].(map[string]any)["text"].(string)
			ev("response.output_item.added", map[string]any{"output_index": i, "item": map[string]any{"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []any{}}})
			ev("response.content_part.added", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
			for _, part := range chunks(text, 40) {
				ev("response.output_text.delta", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "delta": part})
			}
			ev("response.output_text.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "text": text})
			ev("response.content_part.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "part": map[string]any{"type": "output_text", "text": text, "annotations": []any{}}})
		case "function_call":
			added := map[string]any{}
			for k, v := range item {
				added[k] = v
			}
			added["status"], added["arguments"] = "in_progress", ""
			ev("response.output_item.added", map[string]any{"output_index": i, "item": added})
			for _, part := range chunks(item["arguments"].(string), 30) {
				ev("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": i, "delta": part})
			}
			ev("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": i, "arguments": item["arguments"]})
		case "custom_tool_call":
			added := map[string]any{}
			for k, v := range item {
				added[k] = v
			}
			added["status"], added["input"] = "in_progress", ""
			ev("response.output_item.added", map[string]any{"output_index": i, "item": added})
			for _, part := range chunks(item["input"].(string), 30) {
				ev("response.custom_tool_call_input.delta", map[string]any{"item_id": id, "output_index": i, "delta": part})
			}
			ev("response.custom_tool_call_input.done", map[string]any{"item_id": id, "output_index": i, "input": item["input"]})
		}
		ev("response.output_item.done", map[string]any{"output_index": i, "item": item})
	}
	ev("response.completed", map[string]any{"response": resp("completed", output)})
}

func stringValue(raw json.RawMessage) (string, bool) {
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err == nil
}

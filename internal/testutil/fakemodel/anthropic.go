package fakemodel

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// NewAnthropic starts a fake Anthropic Messages API: POST /v1/messages (JSON, or SSE when the
// body asks for "stream": true) and POST /v1/messages/count_tokens. Every other path answers
// 404 with Anthropic's error shape. It is closed at test end.
func NewAnthropic(t testing.TB, script Script) *Server {
	return start(t, script, func(s *Server) http.Handler {
		return http.HandlerFunc(s.serveAnthropic)
	})
}

type anthropicBody struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Source    struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	} `json:"source"`
}

func anthropicError(w http.ResponseWriter, status int, kind, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	raw, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": kind, "message": msg}})
	_, _ = w.Write(raw)
}

// blocks decodes a message content: a string is one text block.
func blocks(raw json.RawMessage) []anthropicBlock {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []anthropicBlock{{Type: "text", Text: s}}
	}
	var bs []anthropicBlock
	_ = json.Unmarshal(raw, &bs)
	return bs
}

func (s *Server) serveAnthropic(w http.ResponseWriter, r *http.Request) {
	body := readBody(r)
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1/messages") {
		s.record(r, body, nil)
		anthropicError(w, http.StatusNotFound, "not_found_error", "not found: "+r.URL.Path)
		return
	}
	var in anthropicBody
	if err := json.Unmarshal(body, &in); err != nil {
		s.record(r, body, nil)
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "body is not JSON: "+err.Error())
		return
	}
	req := s.record(r, body, func(q *Request) {
		q.Model, q.Stream = in.Model, in.Stream
		for _, t := range in.Tools {
			q.Tools = append(q.Tools, t.Name)
		}
		for _, m := range in.Messages {
			bs := blocks(m.Content)
			var texts []string
			for _, b := range bs {
				switch b.Type {
				case "tool_result":
					res := ToolResult{CallID: b.ToolUseID, IsError: b.IsError}
					for _, c := range blocks(b.Content) {
						if c.Type == "text" {
							res.Output += c.Text
						}
					}
					q.Results = append(q.Results, res)
				case "text":
					texts = append(texts, b.Text)
				case "image":
					if m.Role == "user" && b.Source.Type == "base64" {
						data, _ := base64.StdEncoding.DecodeString(b.Source.Data)
						q.Images = append(q.Images, Image{MediaType: b.Source.MediaType, Data: data})
					}
				}
			}
			if m.Role == "user" && len(texts) > 0 {
				q.LastUser = strings.Join(texts, "\n")
			}
		}
	})
	if strings.HasSuffix(r.URL.Path, "/count_tokens") {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"input_tokens":` + itoa(len(body)/4+1) + `}`))
		return
	}
	rep := s.script(req)
	if rep.Status != 0 {
		anthropicError(w, rep.Status, "api_error", "scripted failure")
		return
	}
	msgID := s.nextID("msg_")
	type block = map[string]any
	var content []block
	if rep.Text != "" || len(rep.Calls) == 0 {
		content = append(content, block{"type": "text", "text": rep.Text})
	}
	for _, c := range rep.Calls {
		id := c.ID
		if id == "" {
			id = s.nextID("toolu_")
		}
		var input any
		_ = json.Unmarshal([]byte(inputJSON(c.Input)), &input)
		content = append(content, block{"type": "tool_use", "id": id, "name": c.Name, "input": input})
	}
	stop := "end_turn"
	if len(rep.Calls) > 0 {
		stop = "tool_use"
	}
	inTok, outTok := len(body)/4+1, 1
	for _, b := range content {
		outTok += len(inputJSON(b))/4 + 1
	}
	if !in.Stream {
		w.Header().Set("Content-Type", "application/json")
		raw, _ := json.Marshal(map[string]any{
			"id": msgID, "type": "message", "role": "assistant", "model": in.Model,
			"content": content, "stop_reason": stop, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": inTok, "output_tokens": outTok},
		})
		_, _ = w.Write(raw)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": in.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": inTok, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	}})
	sse(w, "ping", map[string]any{"type": "ping"})
	for i, b := range content {
		switch b["type"] {
		case "text":
			sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, part := range chunks(b["text"].(string), 40) {
				sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": part}})
			}
		case "tool_use":
			sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			args, _ := json.Marshal(b["input"])
			for _, part := range chunks(string(args), 30) {
				sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
			}
		}
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": outTok}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}

func itoa(n int) string {
	raw, _ := json.Marshal(n)
	return string(raw)
}

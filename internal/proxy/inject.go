package proxy

import (
	"encoding/json"
	"fmt"
	"strings"
)

// inject returns body with message added to the request's latest user turn, in the endpoint's
// wire format, touching nothing else:
//
//   - Messages (Anthropic): a text block appended to the last message whose role is "user" (a
//     string content becomes two text blocks, the original first). In a tool loop that message
//     holds the tool results, so the hint comes after them, where the model reads it next.
//   - Responses (OpenAI): a string input becomes one user message with two input_text parts; in
//     an item array, an input_text part is appended to the last item when it is a user message,
//     and otherwise (the last items are tool outputs) a user message item is appended after it.
//   - Chat Completions: the hint is appended to the last message's content when that message is
//     the user's (a string gets a blank line and the hint; parts get a text part), and otherwise
//     (tool results) a user message is appended.
//
// It fails when the body has no place for a hint (no user message, an unexpected shape); the
// caller then forwards the original bytes and returns the hints to the queue.
func inject(ep endpoint, body []byte, message string) ([]byte, error) {
	if !json.Valid(body) {
		return nil, fmt.Errorf("proxy: the request body is not valid JSON")
	}
	top, err := objectMembers(body, span{0, len(body)})
	if err != nil {
		return nil, err
	}
	msg := jsonString(message)
	switch ep {
	case epMessages:
		return injectMessages(body, top, msg)
	case epResponses:
		return injectResponses(body, top, msg)
	case epChat:
		return injectChat(body, top, msg)
	}
	return nil, fmt.Errorf("proxy: this endpoint takes no hints")
}

func injectMessages(body []byte, top []member, msg []byte) ([]byte, error) {
	ms, ok := lastMember(top, "messages")
	if !ok || kindOf(body, ms) != '[' {
		return nil, fmt.Errorf("proxy: no messages array")
	}
	elems, err := arrayElems(body, ms)
	if err != nil {
		return nil, err
	}
	block := concat(`{"type":"text","text":`, msg, `}`)
	for i := len(elems) - 1; i >= 0; i-- {
		if kindOf(body, elems[i]) != '{' {
			continue
		}
		fields, err := objectMembers(body, elems[i])
		if err != nil {
			return nil, err
		}
		if role, _ := stringField(body, fields, "role"); role != "user" {
			continue
		}
		c, ok := lastMember(fields, "content")
		if !ok {
			return nil, fmt.Errorf("proxy: the last user message has no content")
		}
		switch kindOf(body, c) {
		case '"':
			return splice(body, c, []byte(`[{"type":"text","text":`), body[c.start:c.end], []byte(`},`), block, []byte(`]`)), nil
		case '[':
			parts, err := arrayElems(body, c)
			if err != nil {
				return nil, err
			}
			return appendToArray(body, c, len(parts) == 0, block), nil
		}
		return nil, fmt.Errorf("proxy: the last user message's content is neither a string nor blocks")
	}
	return nil, fmt.Errorf("proxy: no user message")
}

func injectResponses(body []byte, top []member, msg []byte) ([]byte, error) {
	in, ok := lastMember(top, "input")
	if !ok {
		return nil, fmt.Errorf("proxy: no input")
	}
	part := concat(`{"type":"input_text","text":`, msg, `}`)
	switch kindOf(body, in) {
	case '"':
		return splice(body, in, []byte(`[{"type":"message","role":"user","content":[{"type":"input_text","text":`),
			body[in.start:in.end], []byte(`},`), part, []byte(`]}]`)), nil
	case '[':
	default:
		return nil, fmt.Errorf("proxy: input is neither a string nor items")
	}
	items, err := arrayElems(body, in)
	if err != nil {
		return nil, err
	}
	item := concat(`{"type":"message","role":"user","content":[`, part, `]}`)
	if len(items) == 0 {
		return appendToArray(body, in, true, item), nil
	}
	last := items[len(items)-1]
	if kindOf(body, last) == '{' {
		fields, err := objectMembers(body, last)
		if err != nil {
			return nil, err
		}
		role, _ := stringField(body, fields, "role")
		typ, hasType := stringField(body, fields, "type")
		if role == "user" && (!hasType || typ == "message") {
			if c, ok := lastMember(fields, "content"); ok {
				switch kindOf(body, c) {
				case '"':
					return splice(body, c, []byte(`[{"type":"input_text","text":`), body[c.start:c.end], []byte(`},`), part, []byte(`]`)), nil
				case '[':
					parts, err := arrayElems(body, c)
					if err != nil {
						return nil, err
					}
					return appendToArray(body, c, len(parts) == 0, part), nil
				}
			}
		}
	}
	return appendToArray(body, in, false, item), nil
}

func injectChat(body []byte, top []member, msg []byte) ([]byte, error) {
	ms, ok := lastMember(top, "messages")
	if !ok || kindOf(body, ms) != '[' {
		return nil, fmt.Errorf("proxy: no messages array")
	}
	elems, err := arrayElems(body, ms)
	if err != nil {
		return nil, err
	}
	if len(elems) == 0 {
		return nil, fmt.Errorf("proxy: no messages")
	}
	newMsg := concat(`{"role":"user","content":`, msg, `}`)
	last := elems[len(elems)-1]
	if kindOf(body, last) == '{' {
		fields, err := objectMembers(body, last)
		if err != nil {
			return nil, err
		}
		if role, _ := stringField(body, fields, "role"); role == "user" {
			if c, ok := lastMember(fields, "content"); ok {
				switch kindOf(body, c) {
				case '"':
					orig, _ := stringAt(body, c)
					var m string
					_ = json.Unmarshal(msg, &m)
					return splice(body, c, jsonString(orig+"\n\n"+m)), nil
				case '[':
					parts, err := arrayElems(body, c)
					if err != nil {
						return nil, err
					}
					return appendToArray(body, c, len(parts) == 0, concat(`{"type":"text","text":`, msg, `}`)), nil
				}
			}
		}
	}
	return appendToArray(body, ms, false, newMsg), nil
}

// stringField decodes the last member key when it is a string.
func stringField(b []byte, ms []member, key string) (string, bool) {
	s, ok := lastMember(ms, key)
	if !ok {
		return "", false
	}
	return stringAt(b, s)
}

func concat(a string, mid []byte, z string) []byte {
	out := make([]byte, 0, len(a)+len(mid)+len(z))
	out = append(out, a...)
	out = append(out, mid...)
	return append(out, z...)
}

// compactionMarker is what Claude Code's compaction prompt asks (its last user message); a hint
// in that request would be summarised into the compacted history.
const compactionMarker = "create a detailed summary of the conversation so far"

// sideQuery tells, from the body, why a request is not a step of the session's main agent
// (empty: it is one, as far as the body shows). Claude Code sends its side queries (session
// titles, quota probes) to the same endpoint with the same session header but without tools or
// with a structured-output format, and its compaction request ends with a summary instruction.
// A Responses request that continues a stored conversation (previous_response_id, conversation)
// cannot take a hint without it entering the upstream's stored history.
func sideQuery(ep endpoint, h host, body []byte) string {
	if !json.Valid(body) {
		return "the body is not valid JSON"
	}
	top, err := objectMembers(body, span{0, len(body)})
	if err != nil {
		return "the body is not a JSON object"
	}
	switch ep {
	case epMessages:
		if h != hostClaudeCode {
			return ""
		}
		tools, ok := lastMember(top, "tools")
		if !ok || kindOf(body, tools) != '[' {
			return "a Claude Code side query (no tools)"
		}
		if elems, err := arrayElems(body, tools); err != nil || len(elems) == 0 {
			return "a Claude Code side query (no tools)"
		}
		if oc, ok := lastMember(top, "output_config"); ok && kindOf(body, oc) == '{' {
			if fields, err := objectMembers(body, oc); err == nil {
				if f, ok := lastMember(fields, "format"); ok && kindOf(body, f) != 'n' {
					return "a Claude Code side query (structured output)"
				}
			}
		}
		if strings.Contains(lastUserText(body, top), compactionMarker) {
			return "a Claude Code compaction"
		}
	case epResponses:
		for _, k := range []string{"previous_response_id", "conversation"} {
			if s, ok := lastMember(top, k); ok && kindOf(body, s) != 'n' {
				return "a stored Responses conversation (" + k + ")"
			}
		}
	}
	return ""
}

// lastUserText is the text of the last user message of a Messages body (string content, or its
// text blocks joined).
func lastUserText(body []byte, top []member) string {
	ms, ok := lastMember(top, "messages")
	if !ok || kindOf(body, ms) != '[' {
		return ""
	}
	elems, err := arrayElems(body, ms)
	if err != nil {
		return ""
	}
	for i := len(elems) - 1; i >= 0; i-- {
		if kindOf(body, elems[i]) != '{' {
			continue
		}
		fields, err := objectMembers(body, elems[i])
		if err != nil {
			return ""
		}
		if role, _ := stringField(body, fields, "role"); role != "user" {
			continue
		}
		c, ok := lastMember(fields, "content")
		if !ok {
			return ""
		}
		if s, ok := stringAt(body, c); ok {
			return s
		}
		var blocks []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(body[c.start:c.end], &blocks) != nil {
			return ""
		}
		var sb strings.Builder
		for _, b := range blocks {
			if b.Type == "text" {
				sb.WriteString(b.Text)
				sb.WriteByte('\n')
			}
		}
		return sb.String()
	}
	return ""
}

// bodySession finds a session id in the body, for a request whose headers name none: Anthropic's
// metadata.user_id (Claude Code puts a JSON object with session_id there; older versions a
// "…_session_<id>" string), OpenAI's client_metadata.session_id (Codex) or metadata.session_id.
func bodySession(ep endpoint, body []byte) string {
	var v struct {
		Metadata struct {
			UserID    string `json:"user_id"`
			SessionID string `json:"session_id"`
		} `json:"metadata"`
		ClientMetadata struct {
			SessionID string `json:"session_id"`
		} `json:"client_metadata"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	switch ep {
	case epMessages:
		return sessionFromUserID(v.Metadata.UserID)
	case epResponses:
		if v.ClientMetadata.SessionID != "" {
			return v.ClientMetadata.SessionID
		}
	}
	return v.Metadata.SessionID
}

// sessionFromUserID reads the session out of Claude Code's metadata.user_id.
func sessionFromUserID(uid string) string {
	uid = strings.TrimSpace(uid)
	if strings.HasPrefix(uid, "{") {
		var v struct {
			SessionID string `json:"session_id"`
		}
		if json.Unmarshal([]byte(uid), &v) == nil {
			return v.SessionID
		}
		return ""
	}
	if i := strings.LastIndex(uid, "_session_"); i >= 0 {
		return uid[i+len("_session_"):]
	}
	return ""
}

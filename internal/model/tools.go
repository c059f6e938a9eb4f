package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/pixie-dev/pixie/internal/errs"
)

// Tools and content parts: a Request may offer tools, and a Message may carry content parts
// besides plain text (images, an assistant's tool calls, the results of those calls). Both
// providers map them to their own wire format: OpenAI-compatible chat completions `tools`,
// `tool_calls` and role `tool` messages, images as `image_url` data URLs; Anthropic Messages
// `tool_use` / `tool_result` blocks and base64 `image` blocks.

// Tool is a tool offered to the model.
type Tool struct {
	// Name is how the model calls the tool: 1 to 64 letters, digits, '_' or '-' (the set both
	// providers accept).
	Name string `json:"name"`
	// Description tells the model what the tool does and when to use it.
	Description string `json:"description,omitempty"`
	// Schema is the JSON Schema of the tool's input: an object schema ({"type":"object",…});
	// empty means an object with no properties.
	Schema json.RawMessage `json:"schema,omitempty"`
}

// PartType is the type of a content part.
type PartType string

// Part types.
const (
	PartText       PartType = "text"
	PartImage      PartType = "image"       // user messages only
	PartToolCall   PartType = "tool_call"   // assistant messages only
	PartToolResult PartType = "tool_result" // user messages only
)

// Part is one content part of a message. Exactly the field of its type is set.
type Part struct {
	Type PartType `json:"type"`
	// Text is a text part's text.
	Text string `json:"text,omitempty"`
	// Image is an image part.
	Image *Image `json:"image,omitempty"`
	// ToolCall is a tool call the assistant made (as a Response returned it).
	ToolCall *ToolCall `json:"toolCall,omitempty"`
	// ToolResult is the result of an earlier tool call.
	ToolResult *ToolResult `json:"toolResult,omitempty"`
}

// Image is an image sent to the model.
type Image struct {
	// MediaType is image/png, image/jpeg, image/gif or image/webp.
	MediaType string `json:"mediaType"`
	// Data is the image's bytes (at most MaxImageSize).
	Data []byte `json:"data"`
}

// ToolCall is one call of an offered tool.
type ToolCall struct {
	// ID identifies the call; its result names it.
	ID   string `json:"id"`
	Name string `json:"name"`
	// Input is the call's arguments, a JSON object.
	Input json.RawMessage `json:"input"`
}

// ToolResult is what a tool call produced.
type ToolResult struct {
	// CallID is the ToolCall.ID this answers.
	CallID string `json:"callId"`
	Text   string `json:"text"`
	// IsError marks a failed call (the text says why).
	IsError bool `json:"isError,omitempty"`
}

// TextPart, ImagePart, ToolCallPart and ToolResultPart build parts.
func TextPart(text string) Part { return Part{Type: PartText, Text: text} }

// ImagePart is an image part.
func ImagePart(mediaType string, data []byte) Part {
	return Part{Type: PartImage, Image: &Image{MediaType: mediaType, Data: data}}
}

// ToolCallPart is an assistant's tool call.
func ToolCallPart(c ToolCall) Part { return Part{Type: PartToolCall, ToolCall: &c} }

// ToolResultPart is a tool call's result.
func ToolResultPart(r ToolResult) Part { return Part{Type: PartToolResult, ToolResult: &r} }

// StopReason is why the model stopped.
type StopReason string

// Stop reasons.
const (
	StopEndTurn   StopReason = "end_turn"   // the model finished its answer
	StopToolUse   StopReason = "tool_use"   // the model wants the tool calls run
	StopMaxTokens StopReason = "max_tokens" // the answer hit MaxTokens
	StopOther     StopReason = "other"      // anything else (a content filter, a refusal, a stop sequence)
)

// Limits of requests with content parts.
const (
	// MaxImageSize caps one image, in bytes (before base64).
	MaxImageSize = 5 << 20
	// MaxImages caps the images of one request.
	MaxImages = 20
	// MaxTools caps the tools of one request.
	MaxTools = 64
	// MaxToolSchemaSize caps one tool's input schema, in bytes.
	MaxToolSchemaSize = 64 << 10
)

// imageTypes are the media types both providers take.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ValidToolName reports whether name can name a tool at both providers.
func ValidToolName(name string) bool { return toolName.MatchString(name) }

// parts returns a message's content as parts: Content as a text part (when not empty), then
// Parts.
func (m Message) parts() []Part {
	if m.Content == "" && len(m.Parts) == 0 {
		return []Part{TextPart("")}
	}
	if m.Content == "" {
		return m.Parts
	}
	return append([]Part{TextPart(m.Content)}, m.Parts...)
}

// schemaObject decodes a tool's input schema into a JSON object; an empty schema is an object
// with no properties.
func schemaObject(raw json.RawMessage) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{"type": "object", "properties": map[string]any{}}, nil
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	if t, ok := obj["type"]; ok && t != "object" {
		return nil, fmt.Errorf("its type is %v, not \"object\"", t)
	}
	obj["type"] = "object"
	return obj, nil
}

// jsonObject reports whether raw is one JSON object.
func jsonObject(raw []byte) bool {
	var obj map[string]json.RawMessage
	return json.Unmarshal(raw, &obj) == nil && obj != nil
}

// validateTools checks a request's tools.
func validateTools(tools []Tool) error {
	if len(tools) > MaxTools {
		return errs.New(errs.Invalid, "a model request offers at most %d tools, not %d", MaxTools, len(tools))
	}
	seen := map[string]bool{}
	for i, t := range tools {
		if !ValidToolName(t.Name) {
			return errs.New(errs.Invalid, "tool %d: the name %q is not 1 to 64 letters, digits, '_' or '-' (both providers refuse it)", i, t.Name)
		}
		if seen[t.Name] {
			return errs.New(errs.Invalid, "tool %q is offered twice", t.Name)
		}
		seen[t.Name] = true
		if len(t.Schema) > MaxToolSchemaSize {
			return errs.New(errs.TooLarge, "tool %q: the input schema is %d bytes; the limit is %d", t.Name, len(t.Schema), MaxToolSchemaSize)
		}
		if _, err := schemaObject(t.Schema); err != nil {
			return errs.New(errs.Invalid, "tool %q: the input schema is not an object schema: %v", t.Name, err)
		}
	}
	return nil
}

// validateParts checks the content parts of every message: each part fits its role, images are
// of a known type and within the caps, tool calls have an id, a name and an object input, and
// every tool result answers a call the assistant made earlier in the conversation.
func validateParts(msgs []Message) error {
	calls := map[string]bool{}
	images := 0
	for i, m := range msgs {
		for j, p := range m.parts() {
			where := fmt.Sprintf("message %d part %d", i, j)
			switch p.Type {
			case PartText:
			case PartImage:
				if m.Role != RoleUser {
					return errs.New(errs.Invalid, "%s: images go in user messages only", where)
				}
				if p.Image == nil || !imageTypes[p.Image.MediaType] {
					mt := ""
					if p.Image != nil {
						mt = p.Image.MediaType
					}
					return errs.New(errs.Invalid, "%s: image media type %q is not image/png, image/jpeg, image/gif or image/webp", where, mt)
				}
				if len(p.Image.Data) == 0 {
					return errs.New(errs.Invalid, "%s: the image is empty", where)
				}
				if len(p.Image.Data) > MaxImageSize {
					return errs.New(errs.TooLarge, "%s: the image is %d bytes; the limit is %d", where, len(p.Image.Data), MaxImageSize)
				}
				if images++; images > MaxImages {
					return errs.New(errs.TooLarge, "a model request carries at most %d images", MaxImages)
				}
			case PartToolCall:
				c := p.ToolCall
				if m.Role != RoleAssistant {
					return errs.New(errs.Invalid, "%s: tool calls go in assistant messages only", where)
				}
				switch {
				case c == nil || c.ID == "":
					return errs.New(errs.Invalid, "%s: a tool call needs an id", where)
				case !ValidToolName(c.Name):
					return errs.New(errs.Invalid, "%s: the tool call's name %q is not a tool name", where, c.Name)
				case !jsonObject(c.Input):
					return errs.New(errs.Invalid, "%s: the input of tool call %s is not a JSON object", where, c.ID)
				case calls[c.ID]:
					return errs.New(errs.Invalid, "%s: tool call id %s is used twice", where, c.ID)
				}
				calls[c.ID] = true
			case PartToolResult:
				r := p.ToolResult
				if m.Role != RoleUser {
					return errs.New(errs.Invalid, "%s: tool results go in user messages only", where)
				}
				if r == nil || r.CallID == "" {
					return errs.New(errs.Invalid, "%s: a tool result needs the id of its call", where)
				}
				if !calls[r.CallID] {
					return errs.New(errs.Invalid, "%s: the tool result answers %s, which no earlier assistant message called", where, r.CallID)
				}
			default:
				return errs.New(errs.Invalid, "%s: unknown part type %q", where, p.Type)
			}
		}
	}
	return nil
}

// checkCalls validates the tool calls a model returned: each has an id, the name of an offered
// tool and an object input (an empty input is {}). key is redacted from messages.
func checkCalls(provider, key string, calls []ToolCall, tools []Tool) ([]ToolCall, error) {
	offered := map[string]bool{}
	for _, t := range tools {
		offered[t.Name] = true
	}
	for i := range calls {
		c := &calls[i]
		if len(bytes.TrimSpace(c.Input)) == 0 {
			c.Input = json.RawMessage("{}")
		}
		switch {
		case c.ID == "":
			return nil, fail(ErrBadResponse, 0, key, fmt.Sprintf("model returned a tool call with no id (%s)", provider), "tool call without id")
		case !offered[c.Name]:
			return nil, fail(ErrBadResponse, 0, key, fmt.Sprintf("model called the tool %q, which was not offered (%s)", clipName(c.Name), provider), "unknown tool")
		case !jsonObject(c.Input):
			return nil, fail(ErrBadResponse, 0, key, fmt.Sprintf("model returned malformed arguments for the tool %s: not a JSON object (%s)", c.Name, provider), "bad tool arguments")
		}
		c.Input = compact(c.Input)
	}
	return calls, nil
}

func clipName(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// compact returns raw without insignificant whitespace (raw is valid JSON).
func compact(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

package pet

import (
	"encoding/json"
	"strings"

	"github.com/pixie-dev/pixie/internal/clip"
)

// Caps of the tool calls a Run keeps.
const (
	// MaxToolCallText caps a tool call's input and output as recorded, in bytes.
	MaxToolCallText = 16 << 10
	// MaxToolCalls caps the tool calls a Run records; later ones are counted, not kept.
	MaxToolCalls = 500
)

// recordInput turns a tool call's arguments into the recorded Input: every string in it
// redacted (the JSON decoded first, so a value is found however it was escaped), and, past
// MaxToolCallText, the clipped JSON text as one JSON string, so the record stays valid JSON.
func recordInput(raw []byte, red redactor) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("{}")
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		// Not JSON (a free-form tool's input): recorded as a string.
		out, _ := json.Marshal(clip.Bytes(red.clean(string(raw)), MaxToolCallText))
		return out
	}
	v = redactValue(v, red)
	out, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("{}")
	}
	if len(out) > MaxToolCallText {
		out, _ = json.Marshal(clip.Bytes(string(out), MaxToolCallText))
	}
	return out
}

func redactValue(v any, red redactor) any {
	switch t := v.(type) {
	case string:
		return red.clean(t)
	case []any:
		for i := range t {
			t[i] = redactValue(t[i], red)
		}
	case map[string]any:
		for k, x := range t {
			t[k] = redactValue(x, red)
		}
	}
	return v
}

// recordOutput is a tool result as recorded: redacted, then clipped.
func recordOutput(s string, red redactor) string {
	return clip.Bytes(red.clean(strings.ToValidUTF8(s, "\uFFFD")), MaxToolCallText)
}

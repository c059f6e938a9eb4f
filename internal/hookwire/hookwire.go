// Package hookwire holds what the command hook adapter (internal/hookcmd: `pixie hook` and the
// small pixie-hook program) and the server's hook route (server, internal/hooks) agree on: the
// host and event names, the adapter's headers, the input limit, the preset rule and the
// system-message answer. It imports almost nothing, so that the adapter's own binary starts in
// a few milliseconds; internal/hooks and server take these names from here.
package hookwire

import (
	"bytes"
	"encoding/json"

	"github.com/pixie-dev/pixie/internal/errs"
)

// Hosts Pixie answers.
const (
	HostClaudeCode = "claude-code"
	HostCodex      = "codex"
)

// Hook event names handled by Pixie.
const (
	EventUserPromptSubmit = "UserPromptSubmit"
	EventPreToolUse       = "PreToolUse"
	EventPostToolUse      = "PostToolUse"
	EventStop             = "Stop"
	EventSubagentStop     = "SubagentStop"
)

// MaxInputSize caps a hook input in bytes; tool results can be large.
const MaxInputSize = 8 << 20

// AdapterHeader marks a hook call from the command adapter, which wants error statuses as they
// are (an http hook without a valid token gets a 200 with a systemMessage instead).
const AdapterHeader = "X-Pixie-Hook-Adapter"

// HintHoldHeader ("1") asks the route to leave open the take of the hints its answer carries,
// and HintTakeHeader names that take in the answer: the caller confirms it (POST
// /v1/hints/confirm) once the answer reached the host, or rolls it back. The command adapter
// uses it, so that a hint is not consumed when the adapter cannot write its answer.
const (
	HintHoldHeader = "X-Pixie-Hint-Hold"
	HintTakeHeader = "X-Pixie-Hint-Take"
)

// IsHandled reports whether Pixie gates the hook event name.
func IsHandled(name string) bool {
	switch name {
	case EventUserPromptSubmit, EventPreToolUse, EventPostToolUse, EventStop, EventSubagentStop:
		return true
	}
	return false
}

// CheckPreset validates a preset name from a hook call (empty means the default preset): what
// ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$ matches, written as a loop (a regexp compiled at every
// start of the adapter costs more than the rest of its initialisation).
func CheckPreset(p string) error {
	if p != "" && !validPreset(p) {
		return errs.New(errs.Invalid, "preset %q is not a valid name (letters, digits, '.', '_', '-'; at most 64)", p)
	}
	return nil
}

func validPreset(p string) bool {
	if len(p) > 64 {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		alnum := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return false
		}
	}
	return true
}

// SystemMessage is the hook answer that only shows msg to the user: {"systemMessage":msg},
// encoded as internal/hooks encodes every answer (no HTML escaping).
func SystemMessage(msg string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(struct {
		SystemMessage string `json:"systemMessage"`
	}{msg})
	return bytes.TrimRight(b.Bytes(), "\n")
}

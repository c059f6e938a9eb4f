package gate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/pixie-dev/pixie/sdk/abi"
)

// Verdicts.
const (
	VerdictPass = "pass"
	VerdictStop = "stop"
)

// ErrBadScriptOutput is the error of an exit 11 whose stdout is not gate output JSON.
var ErrBadScriptOutput error = &failure{msg: "Hook script exit 11 needs a gate output JSON"}

// rawOutput decodes the five fields strictly: strings or null, nothing else.
type rawOutput struct {
	Verdict *string `json:"verdict"`
	Reason  *string `json:"reason"`
	Replace *string `json:"replace"`
	Append  *string `json:"append"`
	Note    *string `json:"note"`
}

// decodeOutput decodes exactly one JSON object with only the five fields.
func decodeOutput(b []byte) (abi.GateOutput, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return abi.GateOutput{}, errors.New("not a JSON object")
	}
	var r rawOutput
	if decodeOutputFast(b, &r) { // a rule's usual output, without reflection
		return checkOutput(r)
	}
	r = rawOutput{}
	if err := abi.DecodeStrict(b, &r); errors.Is(err, abi.ErrTrailingData) {
		return abi.GateOutput{}, errors.New("text after the JSON object")
	} else if err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return abi.GateOutput{}, fmt.Errorf("field %q must be a string", te.Field)
		}
		return abi.GateOutput{}, err
	}
	return checkOutput(r)
}

// checkOutput is the gate output of the five fields decoded: the verdict normalised and checked.
func checkOutput(r rawOutput) (abi.GateOutput, error) {
	get := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	o := abi.GateOutput{Verdict: strings.ToLower(strings.TrimSpace(get(r.Verdict))), Reason: get(r.Reason),
		Replace: get(r.Replace), Append: get(r.Append), Note: get(r.Note)}
	if o.Verdict != "" && o.Verdict != VerdictPass && o.Verdict != VerdictStop {
		return abi.GateOutput{}, fmt.Errorf("verdict must be %q or %q, not %q", VerdictPass, VerdictStop, o.Verdict)
	}
	return o, nil
}

// ParseScriptOutput parses the stdout of a rule that exited 11: exactly one JSON object with
// the optional string fields verdict (pass or stop), reason, replace, append and note. Any
// other content is an error wrapping ErrBadScriptOutput.
func ParseScriptOutput(stdout string) (abi.GateOutput, error) {
	o, err := decodeOutput([]byte(stdout))
	if err != nil {
		return abi.GateOutput{}, fmt.Errorf("%w: %v", ErrBadScriptOutput, err)
	}
	return o, nil
}

// ParseModelOutput parses the Pixie model's answer: strict about the object (only the five
// fields, strings, a known verdict) but tolerant about its wrapping: code fences and prose
// around it are ignored, and the first balanced JSON object that decodes as a JSON object is
// used.
func ParseModelOutput(text string) (abi.GateOutput, error) {
	var candidates []string
	// Fenced blocks first, in order.
	rest := text
	for {
		i := strings.Index(rest, "```")
		if i < 0 {
			break
		}
		body := rest[i+3:]
		j := strings.Index(body, "```")
		if j < 0 {
			break
		}
		block := body[:j]
		// Drop the info string (```json).
		if nl := strings.IndexByte(block, '\n'); nl >= 0 && !strings.Contains(block[:nl], "{") {
			block = block[nl+1:]
		}
		candidates = append(candidates, block)
		rest = body[j+3:]
	}
	candidates = append(candidates, text)
	for _, c := range candidates {
		for _, obj := range balancedObjects(c) {
			if !json.Valid([]byte(obj)) {
				continue
			}
			o, err := decodeOutput([]byte(obj))
			if err != nil {
				return abi.GateOutput{}, failf(err, "Pixie's answer is not gate output JSON: %v", err)
			}
			return o, nil
		}
	}
	return abi.GateOutput{}, failf(nil, "Pixie's answer is not gate output JSON: no JSON object found")
}

// balancedObjects returns every top-level balanced {…} span of s, in order, minding JSON
// strings.
func balancedObjects(s string) []string {
	var out []string
	for start := 0; start < len(s); {
		i := strings.IndexByte(s[start:], '{')
		if i < 0 {
			break
		}
		i += start
		end := matchBrace(s, i)
		if end < 0 {
			start = i + 1
			continue
		}
		obj := s[i : end+1]
		if json.Valid([]byte(obj)) {
			out = append(out, obj)
			start = end + 1
		} else {
			// Not JSON (prose braces): look inside for a real object.
			start = i + 1
		}
	}
	return out
}

// matchBrace returns the index of the brace closing the one at i, or -1.
func matchBrace(s string, i int) int {
	depth, inStr, esc := 0, false, false
	for j := i; j < len(s); j++ {
		c := s[j]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return -1
}

// failure is a run failure whose message is shown as it is: the spec's messages ("Hook script
// exit 11 needs a gate output JSON", …) start with a capital letter.
type failure struct {
	msg string
	err error
}

func (f *failure) Error() string { return f.msg }
func (f *failure) Unwrap() error { return f.err }

// failf returns a failure with a formatted message wrapping err (which may be nil).
func failf(err error, format string, args ...any) error {
	return &failure{msg: fmt.Sprintf(format, args...), err: err}
}

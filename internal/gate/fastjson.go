// Reflection-free JSON for the evaluate route's hot path: the request, a rule's gate output and the
// answer, each exact or falling back to encoding/json (see DecodeEvalFast).

package gate

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// DecodeEvalFast decodes body into r without reflection, for the request shape agent hosts
// send, and reports whether it did. It decodes exactly what abi.DecodeStrict would decode into
// a zero EvalRequest; anything it does not handle itself (an unknown, repeated or differently
// cased field name, a null, a number that is not a plain integer, a string escape of a
// surrogate, bytes that are not UTF-8, anything after the object, malformed JSON) makes it
// answer false, and the caller decodes the body with abi.DecodeStrict into a zero
// EvalRequest instead, for the same result or the same error. FuzzDecodeEvalFast holds the two
// to each other.
//
// Why: encoding/json's reflection walks type metadata and code that an idle server no longer
// has in its CPU caches; decoding the request was about 65 µs of an idle decision (9 µs warm),
// the largest share after the rule's own call (docs/runtime.md, "Where a decision's time goes").
func DecodeEvalFast(body []byte, r *EvalRequest) bool {
	d := fastDecoder{b: body}
	if !d.object(d.evalField(r)) {
		return false
	}
	d.space()
	return d.i == len(d.b)
}

type fastDecoder struct {
	b []byte
	i int
}

func (d *fastDecoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *fastDecoder) peek() byte {
	d.space()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// object reads an object, calling field for each member with its name; field reads the value
// and answers false when it cannot (or when the name is unknown or repeated).
func (d *fastDecoder) object(field func(name string) bool) bool {
	if d.peek() != '{' {
		return false
	}
	d.i++
	if d.peek() == '}' {
		d.i++
		return true
	}
	for {
		if d.peek() != '"' {
			return false
		}
		name, ok := d.key()
		if !ok || d.peek() != ':' {
			return false
		}
		d.i++
		d.space()
		if !field(name) {
			return false
		}
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return true
		default:
			return false
		}
	}
}

// key reads a member name with no escape in it (a name with one is not one of ours as written).
func (d *fastDecoder) key() (string, bool) {
	start := d.i + 1
	for j := start; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			d.i = j + 1
			return string(d.b[start:j]), true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return "", false
		}
	}
	return "", false
}

// seen tracks the members of one object, so that a repeated one falls back (encoding/json
// keeps the last, and merges repeated objects).
type seen uint32

func (s *seen) first(bit uint) bool {
	if *s&(1<<bit) != 0 {
		return false
	}
	*s |= 1 << bit
	return true
}

func (d *fastDecoder) evalField(r *EvalRequest) func(string) bool {
	var s seen
	return func(name string) bool {
		switch name {
		case "point":
			return s.first(0) && d.str(&r.Point)
		case "session":
			return s.first(1) && d.object(d.sessionField(&r.Session))
		case "agent":
			return s.first(2) && d.str(&r.Agent)
		case "turn":
			return s.first(3) && d.int(&r.Turn)
		case "tool":
			if !s.first(4) || d.peek() != '{' {
				return false // null (a nil Tool) and the rest: encoding/json's
			}
			r.Tool = &Tool{}
			return d.object(d.toolField(r.Tool))
		case "messageId":
			return s.first(5) && d.str(&r.MessageID)
		case "target":
			return s.first(6) && d.str(&r.Target)
		case "structured":
			return s.first(7) && d.bool(&r.Structured)
		case "rejected":
			return s.first(8) && d.bool(&r.Rejected)
		case "host":
			return s.first(9) && d.str(&r.Host)
		case "replaceStructured":
			return s.first(10) && d.bool(&r.ReplaceStructured)
		}
		return false
	}
}

func (d *fastDecoder) sessionField(ss *Session) func(string) bool {
	var s seen
	return func(name string) bool {
		switch name {
		case "id":
			return s.first(0) && d.str(&ss.ID)
		case "preset":
			return s.first(1) && d.str(&ss.Preset)
		case "cwd":
			return s.first(2) && d.str(&ss.Cwd)
		case "policy":
			var p string
			ok := s.first(3) && d.str(&p)
			ss.Policy = runtime.Policy(p)
			return ok
		}
		return false
	}
}

func (d *fastDecoder) toolField(t *Tool) func(string) bool {
	var s seen
	return func(name string) bool {
		switch name {
		case "name":
			return s.first(0) && d.str(&t.Name)
		case "args":
			return s.first(1) && d.raw(&t.Args)
		case "callId":
			return s.first(2) && d.str(&t.CallID)
		}
		return false
	}
}

// str reads a string value.
func (d *fastDecoder) str(out *string) bool {
	if d.peek() != '"' {
		return false
	}
	start := d.i + 1
	j := start
	wide := false
	for ; j < len(d.b); j++ {
		c := d.b[j]
		if c == '"' {
			break
		}
		if c == '\\' {
			return d.escaped(start, out)
		}
		if c < 0x20 {
			return false
		}
		if c >= 0x80 {
			wide = true
		}
	}
	if j >= len(d.b) || wide && !utf8.Valid(d.b[start:j]) {
		return false
	}
	*out = string(d.b[start:j])
	d.i = j + 1
	return true
}

// escaped reads a string with escapes, from its first byte at start.
func (d *fastDecoder) escaped(start int, out *string) bool {
	buf := make([]byte, 0, 64)
	wide := false
	for j := start; j < len(d.b); j++ {
		c := d.b[j]
		switch {
		case c == '"':
			if wide && !utf8.Valid(buf) {
				return false
			}
			*out = string(buf)
			d.i = j + 1
			return true
		case c < 0x20:
			return false
		case c != '\\':
			if c >= 0x80 {
				wide = true
			}
			buf = append(buf, c)
			continue
		}
		if j+1 >= len(d.b) {
			return false
		}
		j++
		switch d.b[j] {
		case '"', '\\', '/':
			buf = append(buf, d.b[j])
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			if j+4 >= len(d.b) {
				return false
			}
			v, err := strconv.ParseUint(string(d.b[j+1:j+5]), 16, 16)
			if err != nil || v >= 0xD800 && v <= 0xDFFF {
				return false // surrogates: encoding/json pairs or replaces them
			}
			buf = utf8.AppendRune(buf, rune(v))
			j += 4
		default:
			return false
		}
	}
	return false
}

// int reads a plain integer (no fraction, no exponent) that fits an int.
func (d *fastDecoder) int(out *int) bool {
	start := d.i
	j := start
	if j < len(d.b) && d.b[j] == '-' {
		j++
	}
	digits := j
	for j < len(d.b) && d.b[j] >= '0' && d.b[j] <= '9' {
		j++
	}
	if j == digits || d.b[digits] == '0' && j-digits > 1 {
		return false
	}
	if j < len(d.b) {
		switch d.b[j] {
		case '.', 'e', 'E':
			return false
		}
	}
	n, err := strconv.ParseInt(string(d.b[start:j]), 10, strconv.IntSize)
	if err != nil {
		return false
	}
	*out = int(n)
	d.i = j
	return true
}

func (d *fastDecoder) bool(out *bool) bool {
	switch {
	case d.lit("true"):
		*out = true
	case d.lit("false"):
		*out = false
	default:
		return false
	}
	return true
}

// lit reads the literal word, which must not run on into more letters.
func (d *fastDecoder) lit(word string) bool {
	end := d.i + len(word)
	if end > len(d.b) || string(d.b[d.i:end]) != word {
		return false
	}
	if end < len(d.b) {
		if c := d.b[end]; c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			return false
		}
	}
	d.i = end
	return true
}

// raw reads any value other than null, as encoding/json keeps a json.RawMessage: its bytes as
// written. The extent is found by skip and checked with json.Valid, so that a value skip would
// misread falls back rather than being kept.
func (d *fastDecoder) raw(out *json.RawMessage) bool {
	d.space()
	start := d.i
	if d.peek() == 'n' || !d.skip(0) {
		return false
	}
	v := d.b[start:d.i]
	if !json.Valid(v) {
		return false
	}
	*out = append(json.RawMessage(nil), v...)
	return true
}

// maxSkipDepth bounds the nesting skip follows; deeper values fall back.
const maxSkipDepth = 64

// skip moves past one value.
func (d *fastDecoder) skip(depth int) bool {
	if depth > maxSkipDepth {
		return false
	}
	switch c := d.peek(); {
	case c == '{' || c == '[':
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		d.i++
		if d.peek() == end {
			d.i++
			return true
		}
		for {
			if c == '{' {
				if d.peek() != '"' || !d.anyString() || d.peek() != ':' {
					return false
				}
				d.i++
			}
			if !d.skip(depth + 1) {
				return false
			}
			switch d.peek() {
			case ',':
				d.i++
			case end:
				d.i++
				return true
			default:
				return false
			}
		}
	case c == '"':
		return d.anyString()
	case c == 't':
		return d.lit("true")
	case c == 'f':
		return d.lit("false")
	case c == 'n':
		return d.lit("null")
	case c == '-' || c >= '0' && c <= '9':
		d.i++
		for d.i < len(d.b) && numberByte(d.b[d.i]) {
			d.i++
		}
		return true // json.Valid checks the number itself
	}
	return false
}

func numberByte(b byte) bool {
	return b >= '0' && b <= '9' || b == '.' || b == 'e' || b == 'E' || b == '+' || b == '-'
}

// anyString skips a string of any content, escapes included (json.Valid checks them).
func (d *fastDecoder) anyString() bool {
	for j := d.i + 1; j < len(d.b); j++ {
		switch d.b[j] {
		case '\\':
			j++
		case '"':
			d.i = j + 1
			return true
		}
	}
	return false
}

// AppendJSON appends r as JSON, byte for byte what encoding/json's Marshal writes for it
// (TestResultAppendJSON and FuzzResultAppendJSON check this), without reflection: the answer
// of every evaluation, encoded where an idle server's caches are cold, like the request.
func (r Result) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"action":`...)
	dst = abi.AppendJSONString(dst, r.Action)
	dst = append(dst, `,"text":`...)
	dst = abi.AppendJSONString(dst, r.Text)
	dst = appendOptional(dst, `,"addition":`, r.Addition)
	dst = appendOptional(dst, `,"reason":`, r.Reason)
	dst = appendOptional(dst, `,"suggestion":`, r.Suggestion)
	dst = append(dst, `,"notes":`...)
	if r.Notes == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i, n := range r.Notes {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = abi.AppendJSONString(dst, n)
		}
		dst = append(dst, ']')
	}
	dst = appendOptional(dst, `,"concludedBy":`, r.ConcludedBy)
	dst = appendOptional(dst, `,"runId":`, r.RunID)
	dst = appendOptional(dst, `,"gate":`, r.Gate)
	dst = appendOptional(dst, `,"skipped":`, r.Skipped)
	dst = appendOptional(dst, `,"error":`, r.Error)
	if r.ShowInChat {
		dst = append(dst, `,"showInChat":true`...)
	}
	dst = append(dst, `,"usage":{"inputTokens":`...)
	dst = strconv.AppendInt(dst, int64(r.Usage.InputTokens), 10)
	dst = append(dst, `,"outputTokens":`...)
	dst = strconv.AppendInt(dst, int64(r.Usage.OutputTokens), 10)
	return append(dst, "}}"...)
}

// appendOptional appends name and the quoted value, unless the value is empty (omitempty).
func appendOptional(dst []byte, name, value string) []byte {
	if value == "" {
		return dst
	}
	return abi.AppendJSONString(append(dst, name...), value)
}

// decodeOutputFast is DecodeEvalFast for a rule's gate output: the five string fields, each at
// most once. A null, another field or anything else answers false, for abi.DecodeStrict.
func decodeOutputFast(b []byte, r *rawOutput) bool {
	d := fastDecoder{b: b}
	var s seen
	field := func(bit uint, p **string) bool {
		var v string
		if !s.first(bit) || !d.str(&v) {
			return false
		}
		*p = &v
		return true
	}
	ok := d.object(func(name string) bool {
		switch name {
		case "verdict":
			return field(0, &r.Verdict)
		case "reason":
			return field(1, &r.Reason)
		case "replace":
			return field(2, &r.Replace)
		case "append":
			return field(3, &r.Append)
		case "note":
			return field(4, &r.Note)
		}
		return false
	})
	d.space()
	return ok && d.i == len(d.b)
}

package proxy

import (
	"encoding/json"
	"errors"
	"strings"
)

// The injection edits a request body by splicing: it finds the byte span of the one value it
// changes (a message's content, the end of the input array) and replaces only that span, so every
// other byte the client sent (key order, number spelling, whitespace, escapes) reaches the
// upstream as it was. The scanner below assumes input that json.Valid accepted; it only finds
// where values start and end.

var errShape = errors.New("proxy: unexpected JSON shape")

// span is a value's bytes [start, end) in the body.
type span struct{ start, end int }

// member is one member of an object: its decoded key and its value's span.
type member struct {
	key string
	val span
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipValue returns the end of the value starting at b[i] (no leading space).
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errShape
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				end, err := skipString(b, i)
				if err != nil {
					return 0, err
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
			i++
		}
		return 0, errShape
	default:
		j := i
		for j < len(b) && !isSpace(b[j]) && b[j] != ',' && b[j] != ']' && b[j] != '}' {
			j++
		}
		if j == i {
			return 0, errShape
		}
		return j, nil
	}
}

func skipString(b []byte, i int) (int, error) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, errShape
}

// objectMembers lists the members of the object whose span is s, in order.
func objectMembers(b []byte, s span) ([]member, error) {
	i := skipSpace(b, s.start)
	if i >= s.end || b[i] != '{' {
		return nil, errShape
	}
	var out []member
	i = skipSpace(b, i+1)
	if i < s.end && b[i] == '}' {
		return out, nil
	}
	for i < s.end {
		kend, err := skipString(b, i)
		if err != nil || b[i] != '"' {
			return nil, errShape
		}
		key, err := decodeKey(b[i:kend])
		if err != nil {
			return nil, err
		}
		i = skipSpace(b, kend)
		if i >= s.end || b[i] != ':' {
			return nil, errShape
		}
		i = skipSpace(b, i+1)
		vend, err := skipValue(b, i)
		if err != nil {
			return nil, err
		}
		out = append(out, member{key: key, val: span{i, vend}})
		i = skipSpace(b, vend)
		if i < s.end && b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		if i < s.end && b[i] == '}' {
			return out, nil
		}
		return nil, errShape
	}
	return nil, errShape
}

// arrayElems lists the element spans of the array whose span is s.
func arrayElems(b []byte, s span) ([]span, error) {
	i := skipSpace(b, s.start)
	if i >= s.end || b[i] != '[' {
		return nil, errShape
	}
	var out []span
	i = skipSpace(b, i+1)
	if i < s.end && b[i] == ']' {
		return out, nil
	}
	for i < s.end {
		vend, err := skipValue(b, i)
		if err != nil {
			return nil, err
		}
		out = append(out, span{i, vend})
		i = skipSpace(b, vend)
		if i < s.end && b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		if i < s.end && b[i] == ']' {
			return out, nil
		}
		return nil, errShape
	}
	return nil, errShape
}

func decodeKey(raw []byte) (string, error) {
	if !strings.ContainsRune(string(raw), '\\') {
		return string(raw[1 : len(raw)-1]), nil
	}
	var k string
	if err := json.Unmarshal(raw, &k); err != nil {
		return "", errShape
	}
	return k, nil
}

// lastMember returns the span of the last member named key (JSON decoders keep the last of
// duplicate keys, so the upstream reads that one).
func lastMember(ms []member, key string) (span, bool) {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].key == key {
			return ms[i].val, true
		}
	}
	return span{}, false
}

// kindOf tells what JSON value starts the span: '"', '{', '[', 'n' (null), or another byte.
func kindOf(b []byte, s span) byte {
	if s.start >= s.end {
		return 0
	}
	return b[s.start]
}

// stringAt decodes the JSON string at s.
func stringAt(b []byte, s span) (string, bool) {
	if kindOf(b, s) != '"' {
		return "", false
	}
	var v string
	if err := json.Unmarshal(b[s.start:s.end], &v); err != nil {
		return "", false
	}
	return v, true
}

// splice returns b with the span s replaced by repl.
func splice(b []byte, s span, repl ...[]byte) []byte {
	n := len(b) - (s.end - s.start)
	for _, r := range repl {
		n += len(r)
	}
	out := make([]byte, 0, n)
	out = append(out, b[:s.start]...)
	for _, r := range repl {
		out = append(out, r...)
	}
	return append(out, b[s.end:]...)
}

// appendToArray returns b with item added as the last element of the array at s.
func appendToArray(b []byte, s span, empty bool, item []byte) []byte {
	// The closing ']' is the span's last byte; insert before it.
	at := span{s.end - 1, s.end - 1}
	if empty {
		return splice(b, at, item)
	}
	return splice(b, at, []byte{','}, item)
}

// jsonString encodes s as a JSON string without HTML escaping.
func jsonString(s string) []byte {
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return []byte(strings.TrimSuffix(sb.String(), "\n"))
}

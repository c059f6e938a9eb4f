package main

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// command returns the shell command in the tool arguments JSON, as the bash twin's jq program
// does: the top-level object's "command", or its "cmd" when "command" is missing, null or
// false; a string is the command, an array of strings is joined with spaces, anything else
// (and arguments that are not JSON) is no command. Keys are matched exactly and the last of
// repeated keys wins, as in jq.
//
// It is a small JSON reader rather than encoding/json for the reason given in patterns.go; its
// test checks it against encoding/json under fuzzing.
func command(args string) string {
	r := jsonReader{s: args}
	r.ws()
	var cmdVal, cmdAlt span
	if r.peek() == '{' {
		r.object(0, func(key string, v span) {
			switch key {
			case "command":
				cmdVal = v
			case "cmd":
				cmdAlt = v
			}
		})
	} else {
		r.value(0)
	}
	r.ws()
	if !r.ok() || r.i != len(r.s) {
		return ""
	}
	raw := cmdVal.of(args)
	if raw == "" || raw == "null" || raw == "false" {
		raw = cmdAlt.of(args)
	}
	return commandValue(raw)
}

// commandValue is a string value's text, or an array of strings joined with spaces; raw is a
// valid JSON value.
func commandValue(raw string) string {
	r := jsonReader{s: raw}
	switch r.peek() {
	case '"':
		s, _ := r.str()
		return s
	case '[':
		var parts []string
		r.i++
		r.ws()
		if r.eat(']') {
			return ""
		}
		for {
			if r.peek() != '"' {
				return ""
			}
			s, _ := r.str()
			parts = append(parts, s)
			r.ws()
			if r.eat(']') {
				return strings.Join(parts, " ")
			}
			r.eat(',')
			r.ws()
		}
	}
	return ""
}

type span struct{ from, to int }

func (p span) of(s string) string { return s[p.from:p.to] }

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

// jsonReader reads RFC 8259 JSON from s; after the first error, i is past the end and ok is
// false.
type jsonReader struct {
	s string
	i int
}

func (r *jsonReader) ok() bool { return r.i <= len(r.s) }
func (r *jsonReader) fail()    { r.i = len(r.s) + 1 }

func (r *jsonReader) peek() byte {
	if r.i < len(r.s) {
		return r.s[r.i]
	}
	return 0
}

func (r *jsonReader) eat(c byte) bool {
	if r.peek() == c && r.i < len(r.s) {
		r.i++
		return true
	}
	return false
}

func (r *jsonReader) ws() {
	for r.i < len(r.s) && (r.s[r.i] == ' ' || r.s[r.i] == '\t' || r.s[r.i] == '\n' || r.s[r.i] == '\r') {
		r.i++
	}
}

// value reads one value at nesting depth (the number of arrays and objects around it).
func (r *jsonReader) value(depth int) {
	switch c := r.peek(); {
	case (c == '{' || c == '[') && depth >= maxDepth:
		r.fail()
	case c == '{':
		r.object(depth, nil)
	case c == '[':
		r.array(depth)
	case c == '"':
		if _, ok := r.str(); !ok {
			r.fail()
		}
	case c == '-' || isDigit(c):
		r.number()
	case hasPrefixAt(r.s, r.i, "true"):
		r.i += 4
	case hasPrefixAt(r.s, r.i, "false"):
		r.i += 5
	case hasPrefixAt(r.s, r.i, "null"):
		r.i += 4
	default:
		r.fail()
	}
}

// object reads an object at depth (r is at its '{'), calling member, when not nil, with each
// key and the span of its value.
func (r *jsonReader) object(depth int, member func(key string, v span)) {
	r.i++
	r.ws()
	if r.eat('}') {
		return
	}
	for r.ok() {
		key, ok := r.str()
		r.ws()
		if !ok || !r.eat(':') {
			r.fail()
			return
		}
		r.ws()
		start := r.i
		r.value(depth + 1)
		if member != nil && r.ok() {
			member(key, span{start, r.i})
		}
		if !r.next('}') {
			return
		}
	}
}

// array reads an array at depth (r is at its '[').
func (r *jsonReader) array(depth int) {
	r.i++
	r.ws()
	if r.eat(']') {
		return
	}
	for r.ok() {
		r.value(depth + 1)
		if !r.next(']') {
			return
		}
	}
}

// next reads what follows an element of an object or array: a comma (true: another element
// follows) or end (false); anything else fails.
func (r *jsonReader) next(end byte) bool {
	r.ws()
	if r.eat(',') {
		r.ws()
		return true
	}
	if !r.eat(end) {
		r.fail()
	}
	return false
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (r *jsonReader) number() {
	r.eat('-')
	switch {
	case r.eat('0'):
	case r.i < len(r.s) && r.s[r.i] >= '1' && r.s[r.i] <= '9':
		r.digits()
	default:
		r.fail()
		return
	}
	if r.eat('.') && !r.digits() {
		r.fail()
		return
	}
	if r.eat('e') || r.eat('E') {
		if !r.eat('+') {
			r.eat('-')
		}
		if !r.digits() {
			r.fail()
		}
	}
}

func (r *jsonReader) digits() bool {
	start := r.i
	for r.i < len(r.s) && isDigit(r.s[r.i]) {
		r.i++
	}
	return r.i > start
}

// str reads a string and returns its value, decoded as encoding/json does: invalid UTF-8 and
// unpaired surrogates become U+FFFD.
func (r *jsonReader) str() (string, bool) {
	if !r.eat('"') {
		return "", false
	}
	start := r.i
	// The common case: no escapes, no control characters, valid UTF-8.
	for r.i < len(r.s) {
		c := r.s[r.i]
		if c == '"' {
			s := r.s[start:r.i]
			if !utf8.ValidString(s) {
				break
			}
			r.i++
			return s, true
		}
		if c == '\\' || c < 0x20 {
			break
		}
		r.i++
	}
	r.i = start
	var b strings.Builder
	for r.i < len(r.s) {
		c := r.s[r.i]
		switch {
		case c == '"':
			r.i++
			return b.String(), true
		case c < 0x20:
			return "", false
		case c == '\\':
			if r.i+1 >= len(r.s) {
				return "", false
			}
			e := r.s[r.i+1]
			r.i += 2
			switch e {
			case '"', '\\', '/':
				b.WriteByte(e)
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'u':
				c1, ok := r.hex4()
				if !ok {
					return "", false
				}
				if utf16.IsSurrogate(c1) {
					save := r.i
					if hasPrefixAt(r.s, r.i, `\u`) {
						r.i += 2
						if c2, ok := r.hex4(); ok {
							if d := utf16.DecodeRune(c1, c2); d != utf8.RuneError {
								b.WriteRune(d)
								continue
							}
						}
					}
					r.i = save
					c1 = utf8.RuneError
				}
				b.WriteRune(c1)
			default:
				return "", false
			}
		case c < utf8.RuneSelf:
			b.WriteByte(c)
			r.i++
		default:
			d, n := utf8.DecodeRuneInString(r.s[r.i:])
			b.WriteRune(d) // RuneError for an invalid byte, as encoding/json
			r.i += n
		}
	}
	return "", false
}

// hex4 reads four hex digits.
func (r *jsonReader) hex4() (rune, bool) {
	if len(r.s)-r.i < 4 {
		return 0, false
	}
	var v rune
	for _, c := range []byte(r.s[r.i : r.i+4]) {
		switch {
		case isDigit(c):
			v = v<<4 | rune(c-'0')
		case c|0x20 >= 'a' && c|0x20 <= 'f':
			v = v<<4 | rune(c|0x20-'a'+10)
		default:
			return 0, false
		}
	}
	r.i += 4
	return v, true
}

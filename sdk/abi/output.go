package abi

import "unicode/utf8"

// AppendJSON appends o as JSON, byte for byte what encoding/json's Marshal writes for it
// (output_test.go checks this under fuzzing), without reflection: a guest concluding a run
// encodes one GateOutput, and in an instance that serves one run encoding/json's first use
// reads tables that are cold in the CPU's caches.
func (o GateOutput) AppendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	first := true
	for _, f := range [...]struct{ name, value string }{
		{`"verdict":`, o.Verdict}, {`"reason":`, o.Reason}, {`"replace":`, o.Replace}, {`"append":`, o.Append}, {`"note":`, o.Note},
	} {
		if f.value == "" {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, f.name...)
		dst = AppendJSONString(dst, f.value)
	}
	return append(dst, '}')
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s quoted as encoding/json's Marshal quotes it, with HTML escaping:
// <, > and & as \u00XX, control characters as short escapes where JSON has them, invalid
// UTF-8 as \ufffd, and U+2028 and U+2029 escaped. The host encodes its own hot answers with
// it (internal/gate's Result.AppendJSON).
func AppendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '\\', '"':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// Package clip owns cutting text to a limit without splitting a character: every "at most n"
// of Pixie's records, logs, replies and terminal lines goes through one of its functions, each
// named for one semantic (bytes or code points or UTF-16 units; from the start or from the
// end; a marker added after the limit or counted within it).
//
// Every function returns s itself when it is within the limit, and never splits a UTF-8
// sequence: a cut lands on a rune boundary at or before the limit (at or after it, for Tail).
// s is treated as UTF-8; invalid bytes count as one-byte runes.
package clip

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Bytes is s cut to at most n bytes.
func Bytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:boundaryBefore(s, n)]
}

// BytesMark is s cut to at most n bytes, followed by mark when anything was cut: the result
// can be up to len(mark) bytes longer than n (the limit is on what is kept of s).
func BytesMark(s string, n int, mark string) string {
	if len(s) <= n {
		return s
	}
	return s[:boundaryBefore(s, n)] + mark
}

// BytesWithin is s cut so that it and mark together hold at most n bytes, mark ending it when
// anything was cut. A limit shorter than mark yields mark alone.
func BytesWithin(s string, n int, mark string) string {
	if len(s) <= n {
		return s
	}
	return s[:boundaryBefore(s, max(n-len(mark), 0))] + mark
}

// Tail is the end of s, at most n bytes, starting on a rune boundary.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - max(n, 0)
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// Runes is s cut to at most n code points.
func Runes(s string, n int) string {
	if i, cut := runeOffset(s, max(n, 0)); cut {
		return s[:i]
	}
	return s
}

// RunesWithin is s cut so that it and mark together hold at most n code points, mark ending it
// when anything was cut. A limit shorter than mark yields mark alone.
func RunesWithin(s string, n int, mark string) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i, _ := runeOffset(s, max(n-utf8.RuneCountInString(mark), 0))
	return s[:i] + mark
}

// UTF16Within is s cut so that it and mark together hold at most n UTF-16 code units (the
// length JavaScript sees), mark ending it when anything was cut. Invalid UTF-8 in s counts as
// U+FFFD.
func UTF16Within(s string, n int, mark string) string {
	if UTF16Len(s) <= n {
		return s
	}
	budget := n - UTF16Len(mark)
	units := 0
	for i, r := range s {
		w := utf16.RuneLen(r)
		if units+w > budget {
			return s[:i] + mark
		}
		units += w
	}
	return s + mark // unreachable: s is longer than n
}

// UTF16Len is the length of s in UTF-16 code units.
func UTF16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// OneLine is s with every run of white space (newlines included) folded into one space, and
// none at either end.
func OneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// boundaryBefore is the largest rune boundary of s at or before n (0 <= n < len(s)).
func boundaryBefore(s string, n int) int {
	if n < 0 {
		return 0
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// runeOffset is the byte offset of s's n-th code point and whether s has more than n of them.
func runeOffset(s string, n int) (int, bool) {
	i := 0
	for j := range s {
		if i == n {
			return j, true
		}
		i++
	}
	return len(s), false
}

package clip

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClip(t *testing.T) {
	const (
		e    = "é" // 2 bytes, 1 code point, 1 UTF-16 unit
		han  = "字" // 3 bytes, 1 code point, 1 UTF-16 unit
		face = "😀" // 4 bytes, 1 code point, 2 UTF-16 units
		dots = "…" // 3 bytes, 1 code point
	)
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"Bytes/within", Bytes("abc", 3), "abc"},
		{"Bytes/cut", Bytes("abcdef", 4), "abcd"},
		{"Bytes/zero", Bytes("abc", 0), ""},
		{"Bytes/negative", Bytes("abc", -1), ""},
		{"Bytes/empty", Bytes("", 0), ""},
		{"Bytes/boundary before a 2-byte rune", Bytes("a"+e+"b", 2), "a"},
		{"Bytes/just after a 2-byte rune", Bytes("a"+e+"b", 3), "a" + e},
		{"Bytes/inside a 4-byte rune", Bytes(face+face, 6), face},
		{"Bytes/inside the first rune", Bytes(han, 2), ""},
		{"Bytes/invalid bytes count as runes", Bytes("\xff\xfe\xfd", 2), "\xff\xfe"},

		{"BytesMark/within keeps no mark", BytesMark("abc", 3, dots), "abc"},
		{"BytesMark/mark goes after the limit", BytesMark("abcdef", 3, dots), "abc" + dots},
		{"BytesMark/rune boundary", BytesMark(han+han, 4, dots), han + dots},
		{"BytesMark/zero", BytesMark("abc", 0, "[cut]"), "[cut]"},

		{"BytesWithin/within", BytesWithin("abcdef", 6, "..."), "abcdef"},
		{"BytesWithin/mark counts", BytesWithin("abcdefgh", 6, "..."), "abc..."},
		{"BytesWithin/rune boundary", BytesWithin(han+han+han, 7, "."), han + han + "."},
		{"BytesWithin/limit shorter than mark", BytesWithin("abcdefgh", 2, "..."), "..."},

		{"Tail/within", Tail("abc", 3), "abc"},
		{"Tail/cut", Tail("abcdef", 2), "ef"},
		{"Tail/starts after a split rune", Tail(han+"ab", 4), "ab"},
		{"Tail/keeps a whole rune", Tail("x"+han+"ab", 5), han + "ab"},
		{"Tail/zero", Tail("abc", 0), ""},

		{"Runes/within", Runes(han+han, 2), han + han},
		{"Runes/cut", Runes(han+e+face+"a", 3), han + e + face},
		{"Runes/zero", Runes("abc", 0), ""},
		{"Runes/negative", Runes("abc", -2), ""},
		{"Runes/empty", Runes("", 5), ""},

		{"RunesWithin/within", RunesWithin(han+han+han, 3, dots), han + han + han},
		{"RunesWithin/mark counts as its runes", RunesWithin(han+han+han+han, 3, dots), han + han + dots},
		{"RunesWithin/longer mark", RunesWithin("abcdefgh", 5, "[..]"), "a[..]"},
		{"RunesWithin/limit shorter than mark", RunesWithin("abcdefgh", 2, "[..]"), "[..]"},

		{"UTF16Within/within", UTF16Within(face+face, 4, "!"), face + face},
		{"UTF16Within/a pair is two units", UTF16Within(face+face+face, 5, "!"), face + face + "!"},
		{"UTF16Within/never half a pair", UTF16Within("a"+face+face, 3, "!"), "a" + "!"},
		{"UTF16Within/mark counts its units", UTF16Within("abcdef", 5, face), "abc" + face},
		{"UTF16Within/limit shorter than mark", UTF16Within("abcdef", 1, "!!"), "!!"},

		{"OneLine/folds", OneLine("  a\n\tb   c \r\n"), "a b c"},
		{"OneLine/empty", OneLine(" \n "), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestUTF16Len(t *testing.T) {
	for s, want := range map[string]int{"": 0, "abc": 3, "é字": 2, "😀": 2, "a😀b": 4, "\xff": 1} {
		if got := UTF16Len(s); got != want {
			t.Errorf("UTF16Len(%q) = %d, want %d", s, got, want)
		}
	}
}

// TestNeverSplitsARune cuts a mixed text at every limit with every function: each result is
// valid UTF-8 and within its limit.
func TestNeverSplitsARune(t *testing.T) {
	s := strings.Repeat("aé字😀", 5)
	for n := 0; n <= len(s)+1; n++ {
		for name, got := range map[string]string{
			"Bytes": Bytes(s, n), "BytesMark": BytesMark(s, n, "…"), "BytesWithin": BytesWithin(s, n, "…"),
			"Tail": Tail(s, n), "Runes": Runes(s, n), "RunesWithin": RunesWithin(s, n, "…"),
			"UTF16Within": UTF16Within(s, n, "…"),
		} {
			if !utf8.ValidString(got) {
				t.Fatalf("%s(s, %d) = %q is not valid UTF-8", name, n, got)
			}
		}
		if got := Bytes(s, n); len(got) > n || !strings.HasPrefix(s, got) {
			t.Fatalf("Bytes(s, %d) = %q", n, got)
		}
		if got := Tail(s, n); len(got) > n || !strings.HasSuffix(s, got) {
			t.Fatalf("Tail(s, %d) = %q", n, got)
		}
		if got := BytesWithin(s, n, "…"); n >= len("…") && len(got) > n {
			t.Fatalf("BytesWithin(s, %d) = %q is %d bytes", n, got, len(got))
		}
		if got := Runes(s, n); utf8.RuneCountInString(got) > n {
			t.Fatalf("Runes(s, %d) = %q", n, got)
		}
		if got := UTF16Within(s, n, "…"); n >= 1 && UTF16Len(got) > n {
			t.Fatalf("UTF16Within(s, %d) = %q is %d units", n, got, UTF16Len(got))
		}
	}
}

func Example() {
	s := "Pixie gates 字字字"
	fmt.Printf("%q\n", Bytes(s, 14))    // at most 14 bytes: not two thirds of 字
	fmt.Println(BytesMark(s, 5, "…"))   // the mark after the limit
	fmt.Println(BytesWithin(s, 8, "…")) // the mark within the limit (3 bytes)
	fmt.Println(Runes(s, 13))           // 13 code points
	fmt.Println(RunesWithin(s, 8, "…")) // 8 code points with the mark
	fmt.Println(Tail(s, 7))             // the end: 7 bytes hold two 字
	fmt.Println(OneLine(" a\n  b "))
	// Output:
	// "Pixie gates "
	// Pixie…
	// Pixie…
	// Pixie gates 字
	// Pixie g…
	// 字字
	// a b
}

package abi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
)

// u32s is little-endian u32s, for building blocks by hand.
func u32s(vs ...uint32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	return b
}

// block builds a context block around body with a correct header and padding.
func block(version uint32, body ...[]byte) []byte {
	b := join(body)
	size := contextHeader + len(b)
	out := append([]byte(contextMagic), u32s(uint32(size), version)...)
	out = append(out, b...)
	return append(out, make([]byte, pad8(size)-size)...)
}

func join(parts [][]byte) []byte { return bytes.Join(parts, nil) }

func TestContextRoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		target string
		vars   map[string]string
	}{
		{"empty", "", nil},
		{"target only", `{"command":"rm -rf ~/"}`, nil},
		{"vars", "hello", map[string]string{VarPoint: PointToolBefore, VarToolName: "Bash", VarTurn: "3"}},
		{"empty key and values", "x", map[string]string{"": "", "A": ""}},
		{"unicode and NULs", "é\x00ü", map[string]string{"KEY\x00": "vé\x00"}},
		{"target of 8 bytes", "12345678", map[string]string{"K": "12345678"}},
		{"large", strings.Repeat("t", 1<<20), map[string]string{VarToolArgs: strings.Repeat("a", 70000)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := EncodeContext(tc.target, tc.vars)
			if err != nil {
				t.Fatal(err)
			}
			if len(b)%8 != 0 {
				t.Fatalf("%d bytes is not a multiple of 8", len(b))
			}
			n, err := ContextSize(b[:8])
			if err != nil || n != len(b) {
				t.Fatalf("ContextSize = %d, %v; the block is %d bytes", n, err, len(b))
			}
			target, vars, err := DecodeContext(b)
			if err != nil {
				t.Fatal(err)
			}
			if target != tc.target || !maps.Equal(vars, tc.vars) {
				t.Fatalf("got %q %q", target[:min(len(target), 40)], vars)
			}
		})
	}
}

func TestContextLayout(t *testing.T) {
	got, err := EncodeContext("hi", map[string]string{"B": "2", "A": "1"})
	if err != nil {
		t.Fatal(err)
	}
	// 12 header + 4+2 target + 4 count + 2×(4+1+4+1) vars = 42, padded to 48.
	want := join([][]byte{
		[]byte("PXCT"), u32s(42, 1),
		u32s(2), []byte("hi"),
		u32s(2),
		u32s(1), []byte("A"), u32s(1), []byte("1"),
		u32s(1), []byte("B"), u32s(1), []byte("2"),
		make([]byte, 6),
	})
	if !bytes.Equal(got, want) {
		t.Fatalf("\n got %q\nwant %q", got, want)
	}
	for range 20 { // map order must not matter
		again, _ := EncodeContext("hi", map[string]string{"A": "1", "B": "2"})
		if !bytes.Equal(again, want) {
			t.Fatalf("not deterministic: %q", again)
		}
	}
}

func TestContextPadding(t *testing.T) {
	for n := range 17 {
		b, err := EncodeContext(strings.Repeat("x", n), nil)
		if err != nil {
			t.Fatal(err)
		}
		size := contextMin + n
		if len(b) != pad8(size) || len(b)-size > 7 || !bytes.Equal(b[size:], make([]byte, len(b)-size)) {
			t.Fatalf("target of %d bytes: block of %d bytes for size %d: %q", n, len(b), size, b[size:])
		}
	}
}

func TestDecodeContextRejects(t *testing.T) {
	good := block(1, u32s(3), []byte("hi!"), u32s(1), u32s(1), []byte("K"), u32s(1), []byte("v")) // size 33, padded 40
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	setSize := func(b []byte, size uint32) []byte { binary.LittleEndian.PutUint32(b[4:], size); return b }
	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"nil", nil, "header needs 8"},
		{"empty", []byte{}, "header needs 8"},
		{"short header", []byte("PXCT\x14\x00\x00"), "header needs 8"},
		{"bad magic", mutate(func(b []byte) []byte { b[0] = 'Q'; return b }), "bad magic"},
		{"size below the minimum", mutate(func(b []byte) []byte { return setSize(b, contextMin-1) }), "below the minimum"},
		{"header only", []byte("PXCT\x14\x00\x00\x00"), "size 20 padded to 8 is 24"},
		{"truncated by 8", good[:len(good)-8], "32 bytes; size 33 padded to 8 is 40"},
		{"truncated by 1", good[:len(good)-1], "39 bytes"},
		{"padding missing", good[:33], "33 bytes"},
		{"padding too long", append(bytes.Clone(good), make([]byte, 8)...), "48 bytes"},
		{"padding not zero", mutate(func(b []byte) []byte { b[len(b)-1] = ' '; return b }), "padding is not zero"},
		{"unknown version", mutate(func(b []byte) []byte { b[8] = 2; return b }), "version 2"},
		{"target length past the end", mutate(func(b []byte) []byte { b[12] = 200; return b }), "200-byte target at byte 16 runs past the end"},
		{"target length past size into padding", mutate(func(b []byte) []byte { b[12] = 24; return b }), "runs past the end"},
		{"value length past the end", block(1, u32s(0), u32s(1), u32s(1), []byte("K"), u32s(9), []byte("v")), "9-byte value"},
		{"count past the end", block(1, u32s(0), u32s(3), u32s(1), []byte("K"), u32s(1), []byte("v")), "3 variables cannot fit"},
		{"huge count", block(1, u32s(0), u32s(0xffffffff)), "4294967295 variables"},
		{"count missing", block(1, u32s(4), []byte("abcd")), "variable count at byte 20 is past the end"},
		{"value length cut", block(1, u32s(0), u32s(1), []byte{1, 0, 0, 0, 'K', 0, 0, 0}), "value length at byte 25 is past the end"},
		{"left over bytes", block(1, u32s(0), u32s(0), []byte("xyz")), "3 bytes left over"},
		{"keys out of order", block(1, u32s(0), u32s(2), u32s(1), []byte("B"), u32s(0), u32s(1), []byte("A"), u32s(0)), `key "A" is out of order`},
		{"repeated key", block(1, u32s(0), u32s(2), u32s(1), []byte("A"), u32s(0), u32s(1), []byte("A"), u32s(0)), `key "A" is out of order or repeated`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			target, vars, err := DecodeContext(tc.b)
			if !errors.Is(err, ErrContext) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want %q", err, tc.want)
			}
			if target != "" || vars != nil {
				t.Fatalf("a failed decode returned %q %v", target, vars)
			}
		})
	}
	if _, _, err := DecodeContext(good); err != nil {
		t.Fatalf("the unmutated block: %v", err)
	}
}

func FuzzDecodeContext(f *testing.F) {
	for _, s := range []string{"", "hi", "12345678"} {
		b, _ := EncodeContext(s, map[string]string{"A": s, "B": ""})
		f.Add(b)
	}
	f.Add([]byte("PXCT\x14\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		target, vars, err := DecodeContext(b)
		if err != nil {
			return
		}
		// Whatever decodes is canonical: encoding it again gives the same bytes.
		again, err := EncodeContext(target, vars)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("re-encoded %q, %v; decoded from %q", again, err, b)
		}
	})
}

func TestPadJSON(t *testing.T) {
	for n := range 17 {
		b := []byte(strings.Repeat("x", n))
		p := PadJSON(b)
		if len(p)%8 != 0 || len(p)-n > 7 || !bytes.HasPrefix(p, b) || strings.Trim(string(p[n:]), " ") != "" {
			t.Fatalf("%d bytes padded to %q", n, p)
		}
		if n > 0 && n%8 == 0 && &p[0] != &b[0] {
			t.Fatalf("%d bytes were copied", n)
		}
	}
}

func ExampleEncodeContext() {
	b, _ := EncodeContext(`{"command":"ls"}`, map[string]string{VarPoint: PointToolBefore, VarToolName: "Bash"})
	head, _ := ContextSize(b[:8])
	target, vars, _ := DecodeContext(b)
	fmt.Println(len(b), head, target, vars[VarToolName], vars[VarPoint])
	// Output: 96 96 {"command":"ls"} Bash tool-before
}

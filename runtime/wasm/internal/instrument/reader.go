package instrument

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnsupported wraps every refusal: the module is malformed, invalid in a way the rewriter
// checks, or uses something the rewriter does not handle. A refused module is never run.
var ErrUnsupported = errors.New("the module cannot be instrumented")

// refusal is an ErrUnsupported with its reason.
type refusal struct{ reason string }

func (r *refusal) Error() string { return ErrUnsupported.Error() + ": " + r.reason }
func (r *refusal) Unwrap() error { return ErrUnsupported }

func fail(format string, args ...any) error { return &refusal{reason: fmt.Sprintf(format, args...)} }

// Reason returns the reason of a refusal without ErrUnsupported's text.
func Reason(err error) string {
	var r *refusal
	if errors.As(err, &r) {
		return strings.Replace(err.Error(), r.Error(), r.reason, 1)
	}
	return err.Error()
}

var errTruncated = fail("truncated")

// reader reads the binary format's encodings strictly: an integer with more bytes than its
// type allows, or with unused bits set in its last byte, is malformed (as the specification
// says, and as wazero refuses it).
type reader struct {
	b   []byte
	off int
}

func (r *reader) done() bool { return r.off >= len(r.b) }

func (r *reader) byte() (byte, error) {
	if r.off >= len(r.b) {
		return 0, errTruncated
	}
	c := r.b[r.off]
	r.off++
	return c, nil
}

func (r *reader) bytes(n int) ([]byte, error) {
	if n < 0 || n > len(r.b)-r.off {
		return nil, errTruncated
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s, nil
}

// u32 reads an unsigned LEB128 of at most 32 bits (5 bytes; the fifth may carry 4 bits).
func (r *reader) u32() (uint32, error) {
	var v uint32
	for i := 0; i < 5; i++ {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		if i == 4 && c&0xF0 != 0 {
			return 0, fail("an unsigned 32-bit integer has unused bits set")
		}
		v |= uint32(c&0x7F) << (7 * i)
		if c&0x80 == 0 {
			return v, nil
		}
	}
	return 0, fail("an integer is longer than 5 bytes")
}

// sleb reads a signed LEB128 of at most bits bits (32, 33 or 64), checking that the unused bits
// of its last possible byte are the sign's extension.
func (r *reader) sleb(bits int) (int64, error) {
	maxBytes := (bits + 6) / 7
	var v int64
	for i := 0; i < maxBytes; i++ {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		shift := 7 * i
		if i == maxBytes-1 {
			if c&0x80 != 0 {
				return 0, fail("a signed integer is longer than %d bytes", maxBytes)
			}
			// used bits of this byte: bits - shift; the rest (up to bit 6) must equal the sign
			used := bits - shift
			if used < 7 {
				sign := (c >> (used - 1)) & 1
				rest := c >> used // bits used..6
				want := byte(0)
				if sign == 1 {
					want = byte(1<<(7-used)) - 1
				}
				if rest != want {
					return 0, fail("a signed %d-bit integer has unused bits that are not its sign", bits)
				}
			}
		}
		v |= int64(c&0x7F) << shift
		if c&0x80 == 0 {
			if shift+7 < 64 && c&0x40 != 0 {
				v |= -1 << (shift + 7)
			}
			return v, nil
		}
	}
	return 0, fail("a signed integer is longer than %d bytes", maxBytes)
}

func (r *reader) name() (string, error) {
	n, err := r.u32()
	if err != nil {
		return "", err
	}
	b, err := r.bytes(int(n))
	return string(b), err
}

// Value types of WebAssembly 2.0.
const (
	valI32       = 0x7F
	valI64       = 0x7E
	valF32       = 0x7D
	valF64       = 0x7C
	valV128      = 0x7B
	valFuncref   = 0x70
	valExternref = 0x6F
	blockEmpty   = 0x40
)

func isValType(c byte) bool {
	switch c {
	case valI32, valI64, valF32, valF64, valV128, valFuncref, valExternref:
		return true
	}
	return false
}

func (r *reader) valType() (byte, error) {
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	if !isValType(c) {
		return 0, fail("unknown value type 0x%02x", c)
	}
	return c, nil
}

// limits reads table or memory limits: flags (bit 0: a maximum follows; bit 1: shared),
// minimum and maximum.
func (r *reader) limits() error {
	_, err := r.limitsMin()
	return err
}

// limitsMin reads limits and returns their minimum.
func (r *reader) limitsMin() (uint32, error) {
	flags, err := r.byte()
	if err != nil {
		return 0, err
	}
	if flags > 3 {
		return 0, fail("unknown limits flags %d", flags)
	}
	min, err := r.u32()
	if err != nil {
		return 0, err
	}
	if flags&1 != 0 {
		if _, err := r.u32(); err != nil {
			return 0, err
		}
	}
	return min, nil
}

func appendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

// appendS64 appends v as a signed LEB128.
func appendS64(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendName(b []byte, s string) []byte {
	return append(appendU32(b, uint32(len(s))), s...)
}

func appendSection(out []byte, id byte, payload []byte) []byte {
	out = append(out, id)
	out = appendU32(out, uint32(len(payload)))
	return append(out, payload...)
}

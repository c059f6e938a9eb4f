package abi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// The context block: what pixie_context (FnContext) returns, so that a guest learns its whole
// run (the target and every variable) with one host call instead of one Extism input read and
// one config_get per variable. Extism's kernel calls (alloc, length, load_u8, store_u8,
// input_load_u8, config_get's allocations, …) each cost microseconds in the Go host, while
// load_u64 is cheap, so the block is padded to a multiple of 8 bytes and carries its own
// length: a guest reads it with load_u64 alone.
//
// Layout, every integer a little-endian u32:
//
//	offset 0  magic "PXCT"
//	offset 4  size: the length of the encoding without its padding, header included
//	offset 8  version (ContextVersion)
//	offset 12 target length, target bytes
//	          variable count, then per variable, keys in strictly increasing byte order:
//	          key length, key bytes, value length, value bytes
//	          zero bytes up to a multiple of 8 (size rounded up)
//
// The first 8 bytes (magic and size) keep their meaning in every version, so a reader can
// always size the block from them; what follows depends on the version.

// ContextVersion is the version of the context block this package writes and reads.
const ContextVersion = 1

const (
	contextMagic  = "PXCT"
	contextHeader = 12                    // magic, size, version
	contextMin    = contextHeader + 4 + 4 // plus an empty target and no variables
)

// ErrContext is wrapped by every error decoding a context block.
var ErrContext = errors.New("malformed context block")

// EncodeContext encodes the run's target and variables as a context block, zero-padded to a
// multiple of 8 bytes. The encoding is deterministic (variables sorted by key). It fails only
// when a field or the whole block is over 4 GiB, which no Wasm32 guest could receive anyway.
func EncodeContext(target string, vars map[string]string) ([]byte, error) {
	size := contextMin + len(target)
	for k, v := range vars {
		size += 8 + len(k) + len(v)
	}
	if uint64(size) > math.MaxUint32 {
		return nil, fmt.Errorf("abi: the context is %d bytes; a context block holds at most %d", size, uint32(math.MaxUint32))
	}
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b := make([]byte, 0, pad8(size))
	b = append(b, contextMagic...)
	b = binary.LittleEndian.AppendUint32(b, uint32(size))
	b = binary.LittleEndian.AppendUint32(b, ContextVersion)
	b = appendField(b, target)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(keys)))
	for _, k := range keys {
		b = appendField(b, k)
		b = appendField(b, vars[k])
	}
	return b[:pad8(size)], nil // the capacity past size is zeroed by make
}

func appendField(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func pad8(n int) int { return (n + 7) &^ 7 }

// ContextSize returns the length of a context block, padding included, from its first 8 bytes
// (the magic and the size), so that a guest holding only the block's offset knows how much to
// read. It checks the magic and that the size is possible; DecodeContext checks the rest.
func ContextSize(head []byte) (int, error) {
	if len(head) < 8 {
		return 0, fmt.Errorf("%w: %d bytes; the header needs 8", ErrContext, len(head))
	}
	if string(head[:4]) != contextMagic {
		return 0, fmt.Errorf("%w: bad magic %q", ErrContext, head[:4])
	}
	size := binary.LittleEndian.Uint32(head[4:8])
	if size < contextMin {
		return 0, fmt.Errorf("%w: size %d is below the minimum %d", ErrContext, size, contextMin)
	}
	return pad8(int(size)), nil
}

// DecodeContext decodes a context block written by EncodeContext. It rejects anything else: a
// short or truncated block, a bad magic or an unknown version, a length past the end, keys out
// of order or repeated, bytes left over, and padding that is missing, too long or not zero.
func DecodeContext(b []byte) (target string, vars map[string]string, err error) {
	target, list, err := DecodeContextVars(b)
	if err != nil {
		return "", nil, err
	}
	if len(list) > 0 {
		vars = make(map[string]string, len(list))
	}
	for _, v := range list {
		vars[v.Key] = v.Value
	}
	return target, vars, nil
}

// Var is one variable of a context block.
type Var struct{ Key, Value string }

// DecodeContextVars is DecodeContext with the variables as a list in the block's order (keys
// increasing), which a guest searches without building a map. The target, keys and values
// share one copy of the block: decoding allocates twice, whatever the number of variables.
func DecodeContextVars(b []byte) (target string, vars []Var, err error) {
	padded, err := ContextSize(b)
	if err != nil {
		return "", nil, err
	}
	size := int(binary.LittleEndian.Uint32(b[4:8]))
	if len(b) != padded {
		return "", nil, fmt.Errorf("%w: %d bytes; size %d padded to 8 is %d", ErrContext, len(b), size, padded)
	}
	for _, c := range b[size:] {
		if c != 0 {
			return "", nil, fmt.Errorf("%w: the padding is not zero", ErrContext)
		}
	}
	if v := binary.LittleEndian.Uint32(b[8:12]); v != ContextVersion {
		return "", nil, fmt.Errorf("%w: version %d; this reader knows version %d", ErrContext, v, ContextVersion)
	}
	r := reader{b: string(b[:size]), off: contextHeader}
	target = r.field("target")
	n := r.u32("variable count", false)
	if r.err == nil && uint64(n) > uint64(len(r.b)-r.off)/8 { // every variable takes 8 bytes at least
		r.err = fmt.Errorf("%w: %d variables cannot fit in %d bytes", ErrContext, n, len(r.b)-r.off)
	}
	if r.err == nil && n > 0 {
		vars = make([]Var, 0, n)
	}
	for i := uint32(0); i < n && r.err == nil; i++ {
		k := r.field("key")
		v := r.field("value")
		if r.err == nil && i > 0 && k <= vars[i-1].Key {
			r.err = fmt.Errorf("%w: key %q is out of order or repeated", ErrContext, k)
		}
		vars = append(vars, Var{k, v})
	}
	if r.err == nil && r.off != len(r.b) {
		r.err = fmt.Errorf("%w: %d bytes left over", ErrContext, len(r.b)-r.off)
	}
	if r.err != nil {
		return "", nil, r.err
	}
	return target, vars, nil
}

// reader reads u32-prefixed fields, keeping the first error.
type reader struct {
	b   string
	off int
	err error
}

// u32 reads the integer called what, or what+" length" for the length of a field (the
// name is put together only for an error: concatenating on every read would allocate).
func (r *reader) u32(what string, length bool) uint32 {
	if r.err != nil {
		return 0
	}
	if len(r.b)-r.off < 4 {
		if length {
			what += " length"
		}
		r.err = fmt.Errorf("%w: the %s at byte %d is past the end", ErrContext, what, r.off)
		return 0
	}
	b := r.b[r.off:]
	v := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
	r.off += 4
	return v
}

func (r *reader) field(what string) string {
	n := r.u32(what, true)
	if r.err != nil {
		return ""
	}
	if uint64(n) > uint64(len(r.b)-r.off) {
		r.err = fmt.Errorf("%w: the %d-byte %s at byte %d runs past the end", ErrContext, n, what, r.off)
		return ""
	}
	s := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return s
}

// PadJSON returns b followed by spaces up to a multiple of 8 bytes: JSON whitespace, so the
// text means the same, and the block holding it can be copied with 8-byte loads and stores
// alone. The host pads what it writes for guests (HostResult, pet_context) and the SDK pads
// its requests. b is returned as is when no padding is needed.
func PadJSON(b []byte) []byte {
	n := pad8(len(b))
	if n == len(b) {
		return b
	}
	out := make([]byte, n)
	copy(out, b)
	for i := len(b); i < n; i++ {
		out[i] = ' '
	}
	return out
}

package wasm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"unsafe"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero/api"
)

// Interrupting a guest.
//
// A rule has a time limit, and a guest that spins must be stopped without stopping the
// server. wazero's own way, RuntimeConfig.WithCloseOnContextDone, compiles a call from every
// loop header to a Go function that checks whether the module was closed. A Go guest runs its
// code as loops (the Go wasm backend dispatches a function's blocks from a loop), so that
// check runs constantly: measured on this machine, a plain counting loop in a Go guest ran 10×
// slower with it, encoding/json 4× slower, and a whole block-risky-commands run about half as
// fast.
//
// Pixie compiles each module with a cheaper check of its own instead, the way wasmtime's epoch
// interruption and fuel work: instrument adds two mutable i32 globals, a fuel counter and the
// interrupt flag (exported as interruptExport), and inserts at the start of every loop body
//
//	global.get $fuel
//	i32.eqz
//	if                      ;; once every fuelPerCheck iterations:
//	  global.get $interrupt
//	  if
//	    unreachable         ;; the run's context ended: trap
//	  end
//	  i32.const 0
//	  memory.grow 0         ;; a call into Go (see below)
//	  drop
//	  i32.const fuelPerCheck
//	  global.set $fuel
//	end
//	global.get $fuel
//	i32.const 1
//	i32.sub
//	global.set $fuel
//
// a few loads, a store and a branch that is rarely taken. The executor sets the interrupt
// global from another goroutine when the run's context ends (instance.arm); the guest traps at
// most fuelPerCheck iterations later, and the executor reports the trap as the timeout.
//
// The periodic memory.grow by zero pages is there for the Go scheduler: wazero runs a grow in
// Go, and Go code is where a goroutine can be stopped. Machine code compiled from wasm cannot
// be preempted, and the garbage collector's stop-the-world waits for every goroutine; a guest
// spinning with no call into Go would hold the whole process in that wait, including the
// goroutine that is about to set its interrupt flag: a deadlock (observed before the grow was
// added). With it, a spinning guest lets the world stop every fuelPerCheck iterations (tens of
// microseconds). Code without a loop cannot run for long: it ends, or calls deeper until the
// stack is exhausted, which traps.
//
// The rewrite is a single pass over the binary: sections are copied as they are, except the
// global and export sections (entries added, the sections created when absent) and the code
// section, whose instructions are decoded only as far as needed to find every loop. A module
// that uses an instruction the decoder does not know, has no memory to grow or has a start
// function (which runs while the module is instantiated, before it can be interrupted) is not
// instrumented; it is compiled with wazero's check instead (engine.prepare), so it still runs
// and can still be interrupted, just slower.

// fuelPerCheck is how many loop iterations run between two checks of the interrupt flag.
const fuelPerCheck = 1 << 16

// interruptExport is the name under which an instrumented module exports its interrupt global.
const interruptExport = "pixie:interrupt"

// Section ids, import kinds and opcodes of the WebAssembly binary format.
const (
	secCustom     = 0
	secImport     = 2
	secGlobal     = 6
	secExport     = 7
	secCode       = 10
	secTag        = 13
	kindGlobal    = 3
	opUnreachable = 0x00
	opIf          = 0x04
	opEnd         = 0x0B
	opGlobalGet   = 0x23
	opGlobalSet   = 0x24
	opDrop        = 0x1A
	opI32Eqz      = 0x45
	opI32Sub      = 0x6B
	opMemGrow     = 0x40
	kindMemory    = 2
	secMemory     = 5
	secStart      = 8
	blockEmpty    = 0x40
	valI32        = 0x7F
	opI32Const    = 0x41
)

// sectionRank is the position of each known non-custom section in the required order (tags,
// from the exception-handling proposal, sit between memory and global).
var sectionRank = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, secTag: 6, secGlobal: 7, secExport: 8, 8: 9, 9: 10, 12: 11, secCode: 12, 11: 13}

var errNotInstrumentable = errors.New("the module cannot be instrumented")

// instrument returns a copy of the module wasm with the interrupt global and a check of it at
// the start of every loop, and the number of loops instrumented.
func instrument(wasm []byte) ([]byte, int, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" || binary.LittleEndian.Uint32(wasm[4:8]) != 1 {
		return nil, 0, fmt.Errorf("%w: not a WebAssembly 1.0 binary", errNotInstrumentable)
	}
	out := make([]byte, 0, len(wasm)+len(wasm)/16)
	out = append(out, wasm[:8]...)
	r := &reader{b: wasm, off: 8}

	importedGlobals, definedGlobals := uint32(0), uint32(0)
	haveGlobal, haveExport, haveMemory := false, false, false
	loops := 0
	globalIndex := func() uint32 { return importedGlobals + definedGlobals }
	// insertMissing adds the global and export sections before the first section that must
	// follow them, when the module has none.
	insertMissing := func(rank int) {
		if !haveGlobal && rank > sectionRank[secGlobal] {
			out = appendSection(out, secGlobal, appendNewGlobals(appendU32(nil, 2)))
			haveGlobal = true
		}
		if !haveExport && rank > sectionRank[secExport] {
			out = appendSection(out, secExport, appendNewExport(appendU32(nil, 1), globalIndex()+1))
			haveExport = true
		}
	}
	for !r.done() {
		id, err := r.byte()
		if err != nil {
			return nil, 0, err
		}
		size, err := r.u32()
		if err != nil {
			return nil, 0, err
		}
		payload, err := r.bytes(int(size))
		if err != nil {
			return nil, 0, err
		}
		if id != secCustom {
			rank, ok := sectionRank[id]
			if !ok {
				return nil, 0, fmt.Errorf("%w: unknown section %d", errNotInstrumentable, id)
			}
			insertMissing(rank)
		}
		switch id {
		case secStart:
			// A start function runs while the module is instantiated, before an instance
			// exists to interrupt; wazero's check covers it (through the context).
			return nil, 0, fmt.Errorf("%w: it has a start function", errNotInstrumentable)
		case secImport:
			n, mems, err := countImports(payload)
			if err != nil {
				return nil, 0, err
			}
			importedGlobals = n
			haveMemory = haveMemory || mems > 0
			out = appendSection(out, id, payload)
		case secMemory:
			n, err := (&reader{b: payload}).u32()
			if err != nil {
				return nil, 0, err
			}
			haveMemory = haveMemory || n > 0
			out = appendSection(out, id, payload)
		case secGlobal:
			pr := &reader{b: payload}
			n, err := pr.u32()
			if err != nil {
				return nil, 0, err
			}
			definedGlobals = n
			body := appendU32(nil, n+2)
			body = append(body, payload[pr.off:]...)
			out = appendSection(out, id, appendNewGlobals(body))
			haveGlobal = true
		case secExport:
			body, err := addExport(payload, globalIndex()+1)
			if err != nil {
				return nil, 0, err
			}
			out = appendSection(out, id, body)
			haveExport = true
		case secCode:
			if !haveMemory {
				return nil, 0, fmt.Errorf("%w: it has no memory (the check grows memory 0 by zero pages)", errNotInstrumentable)
			}
			body, n, err := instrumentCode(payload, globalIndex())
			if err != nil {
				return nil, 0, err
			}
			loops += n
			out = appendSection(out, id, body)
		default:
			out = appendSection(out, id, payload)
		}
	}
	insertMissing(len(sectionRank) + 1)
	return out, loops, nil
}

// appendNewGlobals appends the fuel global, (mut i32) initialised to fuelPerCheck, and the
// interrupt global, (mut i32) initialised to 0.
func appendNewGlobals(b []byte) []byte {
	b = append(b, valI32, 0x01, opI32Const)
	b = appendS32(b, fuelPerCheck)
	b = append(b, opEnd)
	return append(b, valI32, 0x01, opI32Const, 0x00, opEnd)
}

// appendNewExport appends the export of global idx as interruptExport.
func appendNewExport(b []byte, idx uint32) []byte {
	b = appendU32(b, uint32(len(interruptExport)))
	b = append(b, interruptExport...)
	b = append(b, kindGlobal)
	return appendU32(b, idx)
}

// addExport returns the export section payload with the interrupt global's export added; a
// module that already exports the name cannot be instrumented.
func addExport(payload []byte, idx uint32) ([]byte, error) {
	r := &reader{b: payload}
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	entries := r.off
	for range n {
		name, err := r.name()
		if err != nil {
			return nil, err
		}
		if name == interruptExport {
			return nil, fmt.Errorf("%w: it already exports %q", errNotInstrumentable, interruptExport)
		}
		if _, err := r.byte(); err != nil {
			return nil, err
		}
		if _, err := r.u32(); err != nil {
			return nil, err
		}
	}
	if !r.done() {
		return nil, fmt.Errorf("%w: trailing bytes in the export section", errNotInstrumentable)
	}
	body := appendU32(nil, n+1)
	body = append(body, payload[entries:]...)
	return appendNewExport(body, idx), nil
}

// countImports counts the global imports, which come first in the global index space, and the
// memory imports.
func countImports(payload []byte) (globals, memories uint32, err error) {
	r := &reader{b: payload}
	n, err := r.u32()
	if err != nil {
		return 0, 0, err
	}
	for range n {
		if _, err := r.name(); err != nil {
			return 0, 0, err
		}
		if _, err := r.name(); err != nil {
			return 0, 0, err
		}
		kind, err := r.byte()
		if err != nil {
			return 0, 0, err
		}
		switch kind {
		case 0: // function: type index
			_, err = r.u32()
		case 1: // table: reference type, limits
			if _, err = r.byte(); err == nil {
				err = r.limits()
			}
		case kindMemory: // memory: limits
			memories++
			err = r.limits()
		case kindGlobal: // value type, mutability
			globals++
			if _, err = r.byte(); err == nil {
				_, err = r.byte()
			}
		case 4: // tag: attribute, type index
			if _, err = r.byte(); err == nil {
				_, err = r.u32()
			}
		default:
			err = fmt.Errorf("%w: unknown import kind %d", errNotInstrumentable, kind)
		}
		if err != nil {
			return 0, 0, err
		}
	}
	return globals, memories, nil
}

// instrumentCode rewrites the code section: every function body with the check after each loop
// header. fuel is the index of the fuel global; the interrupt global follows it.
func instrumentCode(payload []byte, fuel uint32) ([]byte, int, error) {
	r := &reader{b: payload}
	n, err := r.u32()
	if err != nil {
		return nil, 0, err
	}
	check := loopCheck(fuel)
	out := appendU32(make([]byte, 0, len(payload)+len(payload)/16), n)
	loops := 0
	var body []byte
	for i := range n {
		size, err := r.u32()
		if err != nil {
			return nil, 0, err
		}
		fn, err := r.bytes(int(size))
		if err != nil {
			return nil, 0, err
		}
		body, err = instrumentBody(body[:0], fn, check, fuel, &loops)
		if err != nil {
			return nil, 0, fmt.Errorf("function body %d: %w", i, err)
		}
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	if !r.done() {
		return nil, 0, fmt.Errorf("%w: trailing bytes in the code section", errNotInstrumentable)
	}
	return out, loops, nil
}

// loopCheck is the code inserted at the start of every loop body (see the top of this file).
func loopCheck(fuel uint32) []byte {
	get := func(b []byte, idx uint32) []byte { return appendU32(append(b, opGlobalGet), idx) }
	set := func(b []byte, idx uint32) []byte { return appendU32(append(b, opGlobalSet), idx) }
	b := get(nil, fuel)
	b = append(b, opI32Eqz, opIf, blockEmpty)
	b = get(b, fuel+1)
	b = append(b, opIf, blockEmpty, opUnreachable, opEnd)
	b = append(b, opI32Const, 0x00, opMemGrow, 0x00, opDrop)
	b = appendS32(append(b, opI32Const), fuelPerCheck)
	b = set(b, fuel)
	b = append(b, opEnd)
	b = get(b, fuel)
	b = append(b, opI32Const, 0x01, opI32Sub)
	return set(b, fuel)
}

// instrumentBody appends fn (one function body: locals, then instructions) to out with check
// inserted after every loop's block type.
//
// The module's own code may use only its own globals, below fuel: once the globals are added,
// an index at or above it would be valid and would let a crafted module reset its fuel or
// clear its interrupt flag (the original module would not have compiled). Such a module is not
// instrumented, and is then refused as it is: it does not compile.
func instrumentBody(out, fn, check []byte, fuel uint32, loops *int) ([]byte, error) {
	r := &reader{b: fn}
	groups, err := r.u32()
	if err != nil {
		return nil, err
	}
	for range groups {
		if _, err := r.u32(); err != nil {
			return nil, err
		}
		if err := r.valType(); err != nil {
			return nil, err
		}
	}
	out = append(out, fn[:r.off]...)
	for !r.done() {
		start := r.off
		op, err := r.byte()
		if err != nil {
			return nil, err
		}
		if op == opGlobalGet || op == opGlobalSet {
			idx, err := r.u32()
			if err != nil {
				return nil, err
			}
			if idx >= fuel {
				return nil, fmt.Errorf("%w: global %d does not exist", errNotInstrumentable, idx)
			}
		} else if err := r.immediates(op); err != nil {
			return nil, err
		}
		out = append(out, fn[start:r.off]...)
		if op == 0x03 { // loop
			out = append(out, check...)
			*loops++
		}
	}
	return out, nil
}

// immediates skips the immediate operands of the instruction op (the opcode already read).
func (r *reader) immediates(op byte) error {
	var err error
	switch {
	case op == 0x00, op == 0x01, op == 0x05, op == 0x0B, op == 0x0F, op == 0x1A, op == 0x1B, op == 0xD1:
		// unreachable, nop, else, end, return, drop, select, ref.is_null: none
	case op == 0x02, op == 0x03, op == 0x04: // block, loop, if
		err = r.blockType()
	case op == 0x0C, op == 0x0D, op == 0x10, op == 0x12, op == 0xD2,
		op >= 0x20 && op <= 0x26: // br, br_if, call, return_call, ref.func, local.*, global.*, table.get/set
		_, err = r.u32()
	case op == 0x0E: // br_table
		var n uint32
		if n, err = r.u32(); err == nil {
			for i := uint32(0); i <= n && err == nil; i++ {
				_, err = r.u32()
			}
		}
	case op == 0x11, op == 0x13: // call_indirect, return_call_indirect: type, table
		if _, err = r.u32(); err == nil {
			_, err = r.u32()
		}
	case op == 0x1C: // select with types
		var n uint32
		if n, err = r.u32(); err == nil {
			for i := uint32(0); i < n && err == nil; i++ {
				err = r.valType()
			}
		}
	case op >= 0x28 && op <= 0x3E: // loads and stores
		err = r.memArg()
	case op == 0x3F, op == 0x40: // memory.size, memory.grow: memory index
		_, err = r.u32()
	case op == 0x41: // i32.const
		_, err = r.sleb(32)
	case op == 0x42: // i64.const
		_, err = r.sleb(64)
	case op == 0x43:
		_, err = r.bytes(4)
	case op == 0x44:
		_, err = r.bytes(8)
	case op >= 0x45 && op <= 0xC4: // numeric and sign-extension: none
	case op == 0xD0: // ref.null: reference type
		_, err = r.byte()
	case op == 0xFC:
		err = r.miscImmediates()
	case op == 0xFD:
		err = r.simdImmediates()
	case op == 0xFE:
		err = r.atomicImmediates()
	default:
		err = fmt.Errorf("%w: unknown instruction 0x%02x", errNotInstrumentable, op)
	}
	return err
}

// miscImmediates: the 0xFC prefix (saturating truncation, bulk memory, tables).
func (r *reader) miscImmediates() error {
	sub, err := r.u32()
	if err != nil {
		return err
	}
	n := 0
	switch {
	case sub <= 7: // trunc_sat
	case sub == 8, sub == 10, sub == 12, sub == 14: // memory.init, memory.copy, table.init, table.copy
		n = 2
	case sub == 9, sub == 11, sub == 13, sub == 15, sub == 16, sub == 17: // data.drop … table.fill
		n = 1
	default:
		return fmt.Errorf("%w: unknown instruction 0xfc %d", errNotInstrumentable, sub)
	}
	for range n {
		if _, err := r.u32(); err != nil {
			return err
		}
	}
	return nil
}

// simdImmediates: the 0xFD prefix (fixed-width and relaxed SIMD).
func (r *reader) simdImmediates() error {
	sub, err := r.u32()
	if err != nil {
		return err
	}
	switch {
	case sub <= 11, sub == 92, sub == 93: // loads, store, load zero
		return r.memArg()
	case sub == 12, sub == 13: // v128.const, i8x16.shuffle
		_, err = r.bytes(16)
	case sub >= 21 && sub <= 34: // extract/replace lane
		_, err = r.byte()
	case sub >= 84 && sub <= 91: // load/store lane
		if err = r.memArg(); err == nil {
			_, err = r.byte()
		}
	case sub <= 0x113: // every other SIMD instruction has no immediate
	default:
		return fmt.Errorf("%w: unknown instruction 0xfd %d", errNotInstrumentable, sub)
	}
	return err
}

// atomicImmediates: the 0xFE prefix (threads).
func (r *reader) atomicImmediates() error {
	sub, err := r.u32()
	if err != nil {
		return err
	}
	switch {
	case sub == 3: // atomic.fence
		_, err = r.byte()
		return err
	case sub <= 0x4E:
		return r.memArg()
	}
	return fmt.Errorf("%w: unknown instruction 0xfe %d", errNotInstrumentable, sub)
}

// reader reads the binary format's encodings.
type reader struct {
	b   []byte
	off int
}

var errTruncated = fmt.Errorf("%w: truncated", errNotInstrumentable)

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

// u32 reads an unsigned LEB128 of at most 32 bits.
func (r *reader) u32() (uint32, error) {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		v |= uint32(c&0x7F) << shift
		if c&0x80 == 0 {
			return v, nil
		}
	}
	return 0, fmt.Errorf("%w: an integer is longer than 5 bytes", errNotInstrumentable)
}

// sleb reads a signed LEB128 of at most bits bits (its value is not needed).
func (r *reader) sleb(bits int) (int64, error) {
	var v int64
	shift := 0
	for {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		v |= int64(c&0x7F) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v, nil
		}
		if shift >= bits+7 {
			return 0, fmt.Errorf("%w: an integer is too long", errNotInstrumentable)
		}
	}
}

func (r *reader) name() (string, error) {
	n, err := r.u32()
	if err != nil {
		return "", err
	}
	b, err := r.bytes(int(n))
	return string(b), err
}

// blockType reads a block type: empty (0x40), a value type (one byte), or a type index (a
// signed LEB128 of 33 bits, non-negative).
func (r *reader) blockType() error {
	if r.off >= len(r.b) {
		return errTruncated
	}
	switch r.b[r.off] {
	case blockEmpty, 0x7F, 0x7E, 0x7D, 0x7C, 0x7B, 0x70, 0x6F:
		r.off++
		return nil
	}
	v, err := r.sleb(33)
	if err == nil && v < 0 {
		err = fmt.Errorf("%w: unknown block type", errNotInstrumentable)
	}
	return err
}

// valType reads a value type: numeric, vector or reference, each one byte.
func (r *reader) valType() error {
	c, err := r.byte()
	if err != nil {
		return err
	}
	switch c {
	case 0x7F, 0x7E, 0x7D, 0x7C, 0x7B, 0x70, 0x6F:
		return nil
	}
	return fmt.Errorf("%w: unknown value type 0x%02x", errNotInstrumentable, c)
}

// memArg reads a memory argument: alignment flags (bit 6: a memory index follows), offset.
func (r *reader) memArg() error {
	flags, err := r.u32()
	if err != nil {
		return err
	}
	if flags&0x40 != 0 {
		if _, err := r.u32(); err != nil {
			return err
		}
	}
	_, err = r.sleb(64) // a 64-bit memory's offset has up to 64 bits; only its length matters
	return err
}

// limits reads table or memory limits: flags, minimum and, with flag bit 0, maximum.
func (r *reader) limits() error {
	flags, err := r.byte()
	if err != nil {
		return err
	}
	if flags > 7 {
		return fmt.Errorf("%w: unknown limits flags %d", errNotInstrumentable, flags)
	}
	n := 1
	if flags&1 != 0 {
		n = 2
	}
	for range n {
		if flags&4 != 0 { // 64-bit memory
			if _, err := r.sleb(64); err != nil {
				return err
			}
		} else if _, err := r.u32(); err != nil {
			return err
		}
	}
	return nil
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

// appendS32 appends v as a signed LEB128.
func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendSection(out []byte, id byte, payload []byte) []byte {
	out = append(out, id)
	out = appendU32(out, uint32(len(payload)))
	return append(out, payload...)
}

// guestModule returns the wazero module of p's guest. extism does not expose it (only its
// kernel's memory), and the interrupt global is an export of the guest, so it is read from the
// plug-in's field by reflection. canReachGuest checks once that the field is there with the
// expected type; a test pins it, so an extism upgrade that renames it fails the build's tests
// instead of silently running every module with wazero's slower check.
func guestModule(p *extism.Plugin) api.Module {
	f := reflect.ValueOf(p).Elem().FieldByName(guestField)
	if !f.IsValid() || f.Type() != reflect.TypeFor[api.Module]() {
		return nil
	}
	m, _ := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(api.Module)
	return m
}

// guestField is the extism.Plugin field holding the guest module (extism/go-sdk v1.7.1).
const guestField = "mainModule"

func canReachGuest() bool {
	f, ok := reflect.TypeFor[extism.Plugin]().FieldByName(guestField)
	return ok && f.Type == reflect.TypeFor[api.Module]()
}

// interruptOf returns the interrupt global of an instrumented instance.
func interruptOf(p *extism.Plugin) (api.MutableGlobal, error) {
	m := guestModule(p)
	if m == nil {
		return nil, errors.New("the guest module of the plug-in cannot be reached")
	}
	g, ok := m.ExportedGlobal(interruptExport).(api.MutableGlobal)
	if !ok {
		return nil, fmt.Errorf("the module does not export the mutable global %q", interruptExport)
	}
	return g, nil
}

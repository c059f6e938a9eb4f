package instrument

import "fmt"

// Opcodes the rewrite reads or writes.
const (
	opUnreachable  = 0x00
	opBlock        = 0x02
	opLoop         = 0x03
	opIf           = 0x04
	opEnd          = 0x0B
	opCall         = 0x10
	opCallIndirect = 0x11
	opReturnCall   = 0x12
	opReturnCallIn = 0x13
	opLocalGet     = 0x20
	opLocalSet     = 0x21
	opLocalTee     = 0x22
	opGlobalGet    = 0x23
	opGlobalSet    = 0x24
	opTableSet     = 0x26
	opI32Const     = 0x41
	opI64Const     = 0x42
	opI64LtS       = 0x53
	opI64Sub       = 0x7D
	opI64ShrU      = 0x88
	opI64ExtendU   = 0xAD
	opRefFunc      = 0xD2
	opPrefixFC     = 0xFC
	opPrefixFD     = 0xFD
)

// Sub-opcodes of the 0xFC prefix.
const (
	fcMemoryInit = 8
	fcDataDrop   = 9
	fcMemoryCopy = 10
	fcMemoryFill = 11
	fcTableInit  = 12
	fcElemDrop   = 13
	fcTableCopy  = 14
	fcTableGrow  = 15
	fcTableFill  = 17
)

// Shifts applied to a bulk instruction's length operand to get its fuel.
const (
	memoryShift = 4 // bytes
	tableShift  = 2 // elements
)

// code rewrites the code section: every function body with the checks (see the package
// comment) and its function indices renumbered.
func (m *module) code(payload []byte) ([]byte, error) {
	r := &reader{b: payload}
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	if n != m.funcs-m.funcImports {
		return nil, fail("%d function bodies for %d functions", n, m.funcs-m.funcImports)
	}
	out := appendU32(make([]byte, 0, len(payload)+len(payload)/4), n)
	var body []byte
	for i := range n {
		size, err := r.u32()
		if err != nil {
			return nil, err
		}
		fn, err := r.bytes(int(size))
		if err != nil {
			return nil, err
		}
		params := m.params[m.funcTypes[m.funcImports+i]]
		body, err = m.body(body[:0], fn, params)
		if err != nil {
			return nil, fmt.Errorf("function body %d: %w", i, err)
		}
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
		m.res.Functions++
	}
	if !r.done() {
		return nil, fail("trailing bytes in the code section")
	}
	return out, nil
}

// body appends fn (one function body: locals, then instructions) rewritten to out. It adds two
// locals, an i32 and an i64 the checks use.
func (m *module) body(out, fn []byte, params uint32) ([]byte, error) {
	r := &reader{b: fn}
	groups, err := r.u32()
	if err != nil {
		return nil, err
	}
	gstart := r.off
	total := uint64(params)
	for range groups {
		c, err := r.u32()
		if err != nil {
			return nil, err
		}
		if _, err := r.valType(); err != nil {
			return nil, err
		}
		total += uint64(c)
	}
	if total > MaxLocals {
		return nil, fail("a function has %d locals; the limit is %d", total, MaxLocals)
	}
	s32, s64 := uint32(total), uint32(total+1)
	out = appendU32(out, groups+2)
	out = append(out, fn[gstart:r.off]...)
	out = append(out, 0x01, valI32, 0x01, valI64)

	code := fn[r.off:]
	cr := &reader{b: code}
	out = m.event(out, len(code), s64)
	for !cr.done() {
		start := cr.off
		op, err := cr.byte()
		if err != nil {
			return nil, err
		}
		switch op {
		case opCall, opReturnCall, opRefFunc:
			idx, err := cr.u32()
			if err != nil {
				return nil, err
			}
			if idx, err = m.shift(idx); err != nil {
				return nil, err
			}
			out = appendU32(append(out, op), idx)
			continue
		case opLocalGet, opLocalSet, opLocalTee:
			idx, err := cr.u32()
			if err != nil {
				return nil, err
			}
			if uint64(idx) >= total {
				return nil, fail("local %d does not exist", idx)
			}
		case opGlobalGet, opGlobalSet:
			idx, err := cr.u32()
			if err != nil {
				return nil, err
			}
			if idx >= m.globals {
				return nil, fail("global %d does not exist", idx)
			}
		case opCallIndirect, opReturnCallIn:
			t, err := cr.u32()
			if err != nil {
				return nil, err
			}
			if t >= m.checkType {
				return nil, fail("type %d does not exist", t)
			}
			if _, err := cr.u32(); err != nil {
				return nil, err
			}
		case opBlock, opLoop, opIf:
			if err := m.blockType(cr); err != nil {
				return nil, err
			}
		case opTableSet:
			if _, err := cr.u32(); err != nil {
				return nil, err
			}
			m.notResettable("it changes a table (table.set)")
		case opPrefixFC:
			sub, err := cr.u32()
			if err != nil {
				return nil, err
			}
			if err := cr.fcImmediates(sub); err != nil {
				return nil, err
			}
			switch sub {
			case fcMemoryInit, fcMemoryCopy, fcMemoryFill:
				out = m.charge(out, memoryShift, s32)
			case fcTableInit, fcTableCopy, fcTableFill, fcTableGrow:
				out = m.charge(out, tableShift, s32)
			}
			switch sub {
			case fcMemoryInit:
				m.segIndexed = true
			case fcDataDrop:
				m.segIndexed = true
				m.notResettable("it drops a data segment (data.drop)")
			case fcElemDrop:
				m.notResettable("it drops an element segment (elem.drop)")
			case fcTableInit, fcTableCopy, fcTableFill, fcTableGrow:
				m.notResettable("it changes a table (table.init, table.copy, table.fill or table.grow)")
			}
		default:
			if err := cr.immediates(op); err != nil {
				return nil, err
			}
		}
		out = append(out, code[start:cr.off]...)
		if op == opLoop {
			out = m.event(out, len(code)-cr.off, s64)
			m.res.Loops++
		}
	}
	if len(code) == 0 || code[len(code)-1] != opEnd {
		return nil, fail("a function body does not end with end")
	}
	return out, nil
}

// event appends the code that spends weight units of fuel and calls the check when the fuel
// is spent:
//
//	global.get $fuel  i64.const weight  i64.sub  local.tee $s64  global.set $fuel
//	local.get $s64  i64.const 0  i64.lt_s
//	if  call $check  global.set $fuel  end
func (m *module) event(out []byte, weight int, s64 uint32) []byte {
	if weight < 1 {
		weight = 1
	}
	out = appendU32(append(out, opGlobalGet), m.fuel)
	out = appendS64(append(out, opI64Const), int64(weight))
	out = append(out, opI64Sub)
	out = appendU32(append(out, opLocalTee), s64)
	out = appendU32(append(out, opGlobalSet), m.fuel)
	out = appendU32(append(out, opLocalGet), s64)
	out = append(out, opI64Const, 0x00, opI64LtS, opIf, blockEmpty)
	out = appendU32(append(out, opCall), m.checkFunc)
	out = appendU32(append(out, opGlobalSet), m.fuel)
	return append(out, opEnd)
}

// charge appends, before a bulk instruction whose last operand (an i32) is its length, the code
// that spends the length shifted right by shift; the operand stays on the stack:
//
//	local.set $s32  global.get $fuel  local.get $s32  i64.extend_i32_u  i64.const shift
//	i64.shr_u  i64.sub  global.set $fuel  local.get $s32
//
// The next event sees the fuel spent.
func (m *module) charge(out []byte, shift int64, s32 uint32) []byte {
	out = appendU32(append(out, opLocalSet), s32)
	out = appendU32(append(out, opGlobalGet), m.fuel)
	out = appendU32(append(out, opLocalGet), s32)
	out = append(out, opI64ExtendU, opI64Const)
	out = appendS64(out, shift)
	out = append(out, opI64ShrU, opI64Sub)
	out = appendU32(append(out, opGlobalSet), m.fuel)
	return appendU32(append(out, opLocalGet), s32)
}

// blockType reads a block type: empty, a value type, or a type index (a non-negative signed
// LEB128 of 33 bits), which must exist.
func (m *module) blockType(r *reader) error {
	if r.off >= len(r.b) {
		return errTruncated
	}
	if c := r.b[r.off]; c == blockEmpty || isValType(c) {
		r.off++
		return nil
	}
	v, err := r.sleb(33)
	if err != nil {
		return err
	}
	if v < 0 || v >= int64(m.checkType) {
		return fail("block type %d does not exist", v)
	}
	return nil
}

// immediates skips the immediate operands of the instruction op (the opcode already read).
// Instructions the rewrite reads itself (calls, globals, blocks, the 0xFC prefix) are not
// here.
func (r *reader) immediates(op byte) error {
	var err error
	switch {
	case op == 0x00, op == 0x01, op == 0x05, op == 0x0B, op == 0x0F, op == 0x1A, op == 0x1B, op == 0xD1:
		// unreachable, nop, else, end, return, drop, select, ref.is_null: none
	case op == 0x02, op == 0x03, op == 0x04:
		return fail("internal: block types are read by the caller")
	case op == 0x0C, op == 0x0D, op == 0x20, op == 0x21, op == 0x22, op == 0x25:
		// br, br_if, local.get/set/tee, table.get
		_, err = r.u32()
	case op == 0x23, op == 0x24:
		_, err = r.u32() // global.get/set in constant expressions
	case op == 0x0E: // br_table
		var n uint32
		if n, err = r.u32(); err == nil {
			for i := uint64(0); i <= uint64(n) && err == nil; i++ {
				_, err = r.u32()
			}
		}
	case op == 0x1C: // select with types
		var n uint32
		if n, err = r.u32(); err == nil {
			for i := uint32(0); i < n && err == nil; i++ {
				_, err = r.valType()
			}
		}
	case op >= 0x28 && op <= 0x3E: // loads and stores
		err = r.memArg()
	case op == 0x3F, op == 0x40: // memory.size, memory.grow: a zero byte
		err = r.zeroByte()
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
		var c byte
		if c, err = r.byte(); err == nil && c != valFuncref && c != valExternref {
			err = fail("unknown reference type 0x%02x", c)
		}
	case op == opPrefixFD:
		err = r.simdImmediates()
	default:
		err = fail("unknown instruction 0x%02x", op)
	}
	return err
}

func (r *reader) zeroByte() error {
	c, err := r.byte()
	if err == nil && c != 0 {
		err = fail("a memory index other than 0")
	}
	return err
}

// fcImmediates reads the immediates of the 0xFC instruction sub.
func (r *reader) fcImmediates(sub uint32) error {
	n := 0
	switch {
	case sub <= 7: // trunc_sat
	case sub == fcMemoryInit: // data index, memory 0
		if _, err := r.u32(); err != nil {
			return err
		}
		return r.zeroByte()
	case sub == fcMemoryCopy:
		if err := r.zeroByte(); err != nil {
			return err
		}
		return r.zeroByte()
	case sub == fcMemoryFill:
		return r.zeroByte()
	case sub == fcTableInit, sub == fcTableCopy:
		n = 2
	case sub == fcDataDrop, sub == fcElemDrop, sub == fcTableGrow, sub == 16, sub == fcTableFill: // 16: table.size
		n = 1
	default:
		return fail("unknown instruction 0xfc %d", sub)
	}
	for range n {
		if _, err := r.u32(); err != nil {
			return err
		}
	}
	return nil
}

// simdImmediates reads the immediates of a 0xFD (SIMD) instruction.
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
		return fail("unknown instruction 0xfd %d", sub)
	}
	return err
}

// memArg reads a memory argument: alignment, offset (memory 0 only).
func (r *reader) memArg() error {
	align, err := r.u32()
	if err != nil {
		return err
	}
	if align&0x40 != 0 {
		return fail("a memory index other than 0")
	}
	_, err = r.u32()
	return err
}

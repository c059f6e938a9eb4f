// Package instrument rewrites a WebAssembly module so that no code in it can run past its time
// limit, and so that an instance of it can be reset to a snapshot. It is the one place where
// Pixie changes a module's bytes; runtime/wasm compiles only what Rewrite returns, and only
// after the uploaded bytes themselves compiled in plain wazero (runtime/wasm's validator).
//
// # The time limit
//
// Rewrite adds an import, CheckModule.CheckName of type () -> i64, and a mutable i64 global,
// the fuel, initialised to Budget. Code spends fuel at every event, and calls the check when
// the fuel is spent:
//
//   - at the start of every function body (this covers recursion without a loop, direct,
//     mutual or through call_indirect, and a deep call tree);
//   - at the start of every loop body (every backward branch lands there);
//   - before every bulk memory or table instruction (memory.fill, memory.copy, memory.init,
//     table.fill, table.copy, table.init, table.grow), which do work proportional to an operand
//     without any loop.
//
// An event spends its weight: at a function's start the size of the function's code in bytes,
// at a loop the bytes from the loop to the end of the function, and at a bulk instruction its
// length operand shifted right (by 4 for memory bytes, by 2 for table elements). Between two
// events of one function activation control only moves forward (a backward branch is a loop, a
// call returns to the next instruction), so it runs at most the code that follows the last
// event, each instruction at most once; what a callee runs is charged by the callee's own
// events. The fuel spent is therefore at least the number of instruction bytes executed, and
// the check runs at least once every Budget bytes of code executed (plus bulk work) — about a
// millisecond of straight-line code on this machine, whatever the module does. The check is a
// call into Go: it looks at the run's context and deadline (and ends the guest with a trap
// when they are over), it is where the Go scheduler and garbage collector can stop the
// goroutine (machine code compiled from WebAssembly cannot be preempted), and it returns the
// next budget.
//
// # Reset
//
// Rewrite exports every mutable global it did not add under GlobalExport(index), and its fuel
// as FuelExport, so that the host can read and restore them through wazero's API; it reports
// whether an instance can be reset to a snapshot at all (Result.Resettable): a module that can
// change its tables or its segments (table.set, table.grow, table.fill, table.copy,
// table.init, elem.drop, data.drop), or has a mutable v128 global, cannot be restored through
// the API, and runs on fresh instances instead. (A mutable reference global can be restored
// only to null: the host checks its snapshot's value.)
//
// # Faithfulness
//
// Apart from the added import, global, exports and locals, the module is unchanged: sections
// are copied, function indices of defined functions move up by one (the import comes first)
// everywhere they appear (calls, ref.func, exports, the start function, element segments, the
// name section), and instructions are copied byte for byte. The reader is strict: an integer
// encoded with unused bits, an index past what the module defines, a reserved name, or an
// instruction the reader does not know is refused, so that adding things to an index space
// never makes an invalid reference valid. Tests check the rewrite against the WebAssembly spec
// suite (every assertion the same on the original and on the rewritten module) and under
// fuzzing.
package instrument

import (
	"strconv"
	"strings"
)

// Names the rewritten module uses. A module that already uses ReservedPrefix in an export, or
// imports from CheckModule, is refused.
const (
	CheckModule    = "pixie:rt"
	CheckName      = "check"
	FuelExport     = "pixie:fuel"
	ReservedPrefix = "pixie:"
	globalPrefix   = "pixie:global:"
)

// Budget is the fuel the module starts with, and what the check normally returns: units of
// roughly one byte of code executed.
const Budget = 1 << 20

// MaxLocals caps the locals (parameters included) of one function. wazero allocates a
// function's locals by their declared count before reading them, so a module of a few bytes
// declaring billions of locals would make it allocate gigabytes; no real function has more than
// a few thousand.
const MaxLocals = 50000

// GlobalExport is the name under which the rewritten module exports its mutable global idx.
func GlobalExport(idx uint32) string { return globalPrefix + strconv.FormatUint(uint64(idx), 10) }

// Global is a mutable global of the original module.
type Global struct {
	Index  uint32
	Type   byte // value type
	Export string
}

// IsRef reports whether the global holds a reference (funcref or externref).
func (g Global) IsRef() bool { return g.Type == valFuncref || g.Type == valExternref }

// Result is a rewritten module and what the host needs to know about it.
type Result struct {
	Wasm []byte
	// Functions and Loops count the function bodies and the loops instrumented.
	Functions, Loops int
	// Globals are the mutable globals the module defines (each exported as Export).
	Globals []Global
	// Resettable reports whether an instance can be reset to a snapshot through wazero's API;
	// when it cannot, NotResettable says why.
	Resettable    bool
	NotResettable string
	// HasMemory reports whether the module defines a memory.
	HasMemory bool
}

// Section ids.
const (
	secCustom   = 0
	secType     = 1
	secImport   = 2
	secFunction = 3
	secTable    = 4
	secMemory   = 5
	secGlobal   = 6
	secExport   = 7
	secStart    = 8
	secElement  = 9
	secCode     = 10
	secData     = 11
	secDataCnt  = 12
	secTag      = 13
)

// rank is each section's position in the required order.
var rank = map[byte]int{secType: 1, secImport: 2, secFunction: 3, secTable: 4, secMemory: 5, secTag: 6,
	secGlobal: 7, secExport: 8, secStart: 9, secElement: 10, secDataCnt: 11, secCode: 12, secData: 13}

// Export and import kinds.
const (
	kindFunc   = 0
	kindTable  = 1
	kindMemory = 2
	kindGlobal = 3
	kindTag    = 4
)

type section struct {
	id      byte
	payload []byte
	name    string // custom sections
}

// module is what the rewrite needs to know about the original module.
type module struct {
	params      []uint32 // param count of each type
	funcImports uint32
	globals     uint32 // imported and defined
	funcTypes   []uint32
	funcs       uint32 // imported and defined
	checkType   uint32
	checkFunc   uint32
	fuel        uint32
	res         *Result
	// ready: scan is done, indices can be checked and renumbered.
	ready bool
	// What data.go needs to know before it may join data segments: the initial size of the
	// module's own memory (memPages, when memDefined), and whether anything names a data
	// segment by its index (segIndexed: memory.init or data.drop in the code, a data count
	// section, data segment names); codeDone is set once the code section was rewritten.
	memDefined, segIndexed, codeDone bool
	memPages                         uint32
}

// shift renumbers a function index of the original module.
func (m *module) shift(idx uint32) (uint32, error) {
	if idx >= m.funcs {
		return 0, fail("function %d does not exist", idx)
	}
	if idx >= m.funcImports {
		return idx + 1, nil
	}
	return idx, nil
}

// Rewrite returns the instrumented module (see the package comment).
func Rewrite(wasm []byte) (*Result, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" || string(wasm[4:8]) != "\x01\x00\x00\x00" {
		return nil, fail("not a WebAssembly 1.0 binary")
	}
	secs, err := split(wasm[8:])
	if err != nil {
		return nil, err
	}
	res := &Result{Resettable: true}
	m := &module{res: res}
	if err := m.scan(secs); err != nil {
		return nil, err
	}

	out := make([]byte, 0, len(wasm)+len(wasm)/8)
	out = append(out, wasm[:8]...)
	have := map[byte]bool{}
	for _, s := range secs {
		have[s.id] = true
	}
	m.codeDone = !have[secCode] // no code: nothing can name a data segment
	emitted := map[byte]bool{}
	// insertMissing adds the sections the rewrite needs, when the module has none, before the
	// first section that must follow them.
	insertMissing := func(next int) {
		for _, id := range []byte{secType, secImport, secGlobal, secExport} {
			if !have[id] && !emitted[id] && rank[id] < next {
				out = appendSection(out, id, m.newSection(id))
				emitted[id] = true
			}
		}
	}
	for _, s := range secs {
		if s.id != secCustom {
			insertMissing(rank[s.id])
		}
		var payload []byte
		switch s.id {
		case secCustom:
			payload = s.payload
			if s.name == "name" {
				if payload = m.names(s.payload); payload == nil {
					return nil, fail("a malformed name section")
				}
			}
		case secType:
			payload = append(append([]byte(nil), appendU32(nil, m.checkType+1)...), m.rest(s.payload)...)
			payload = append(payload, 0x60, 0x00, 0x01, valI64)
		case secImport:
			payload, err = m.imports(s.payload)
		case secGlobal:
			payload, err = m.globalSection(s.payload)
		case secExport:
			payload, err = m.exports(s.payload)
		case secStart:
			payload, err = m.start(s.payload)
		case secElement:
			payload, err = m.elements(s.payload)
		case secCode:
			payload, err = m.code(s.payload)
			m.codeDone = true
		case secData:
			payload, err = m.data(s.payload)
		default:
			payload = s.payload
		}
		if err != nil {
			return nil, err
		}
		out = appendSection(out, s.id, payload)
		emitted[s.id] = true
	}
	insertMissing(len(rank) + 2)
	res.Wasm = out
	return res, nil
}

// split cuts the module's body into sections.
func split(b []byte) ([]section, error) {
	r := &reader{b: b}
	var secs []section
	for !r.done() {
		id, err := r.byte()
		if err != nil {
			return nil, err
		}
		size, err := r.u32()
		if err != nil {
			return nil, err
		}
		payload, err := r.bytes(int(size))
		if err != nil {
			return nil, err
		}
		s := section{id: id, payload: payload}
		switch {
		case id == secTag:
			return nil, fail("it has a tag section (exception handling is not supported)")
		case id == secCustom:
			pr := &reader{b: payload}
			if s.name, err = pr.name(); err != nil {
				return nil, err
			}
		case rank[id] == 0:
			return nil, fail("unknown section %d", id)
		}
		secs = append(secs, s)
	}
	return secs, nil
}

// rest returns a vector's payload without its count.
func (m *module) rest(payload []byte) []byte {
	r := &reader{b: payload}
	_, _ = r.u32()
	return payload[r.off:]
}

// scan reads what the rewrite needs: types, imports, functions and globals.
func (m *module) scan(secs []section) error {
	defined := uint32(0)
	for _, s := range secs {
		r := &reader{b: s.payload}
		switch s.id {
		case secDataCnt:
			m.segIndexed = true
		case secCustom:
			if s.name == "name" && namesData(s.payload) {
				m.segIndexed = true
			}
		case secType:
			n, err := r.u32()
			if err != nil {
				return err
			}
			for range n {
				form, err := r.byte()
				if err != nil {
					return err
				}
				if form != 0x60 {
					return fail("unknown type form 0x%02x", form)
				}
				np, err := r.u32()
				if err != nil {
					return err
				}
				for range np {
					if _, err := r.valType(); err != nil {
						return err
					}
				}
				nr, err := r.u32()
				if err != nil {
					return err
				}
				for range nr {
					if _, err := r.valType(); err != nil {
						return err
					}
				}
				m.params = append(m.params, np)
			}
			if !r.done() {
				return fail("trailing bytes in the type section")
			}
		case secImport:
			n, err := r.u32()
			if err != nil {
				return err
			}
			for range n {
				mod, err := r.name()
				if err != nil {
					return err
				}
				if _, err := r.name(); err != nil {
					return err
				}
				if mod == CheckModule {
					return fail("it imports from %q, a name reserved for Pixie", CheckModule)
				}
				kind, err := r.byte()
				if err != nil {
					return err
				}
				switch kind {
				case kindFunc:
					idx, err := r.u32()
					if err != nil {
						return err
					}
					m.funcTypes = append(m.funcTypes, idx)
					m.funcImports++
				case kindTable:
					if _, err := r.valType(); err != nil {
						return err
					}
					if err := r.limits(); err != nil {
						return err
					}
				case kindMemory:
					if err := r.limits(); err != nil {
						return err
					}
				case kindGlobal:
					if _, err := r.valType(); err != nil {
						return err
					}
					if _, err := r.byte(); err != nil {
						return err
					}
					m.globals++
				default:
					return fail("unknown import kind %d", kind)
				}
			}
			if !r.done() {
				return fail("trailing bytes in the import section")
			}
		case secFunction:
			n, err := r.u32()
			if err != nil {
				return err
			}
			for range n {
				idx, err := r.u32()
				if err != nil {
					return err
				}
				m.funcTypes = append(m.funcTypes, idx)
			}
			defined = n
			if !r.done() {
				return fail("trailing bytes in the function section")
			}
		case secTable:
			n, err := r.u32()
			if err != nil {
				return err
			}
			for range n {
				if _, err := r.valType(); err != nil {
					return err
				}
				if err := r.limits(); err != nil {
					return err
				}
			}
			if !r.done() {
				return fail("trailing bytes in the table section")
			}
		case secMemory:
			n, err := r.u32()
			if err != nil {
				return err
			}
			for k := range n {
				min, err := r.limitsMin()
				if err != nil {
					return err
				}
				if k == 0 {
					m.memPages = min
				}
			}
			if !r.done() {
				return fail("trailing bytes in the memory section")
			}
			m.memDefined = n == 1
			m.res.HasMemory = m.res.HasMemory || n > 0
		case secGlobal:
			n, err := r.u32()
			if err != nil {
				return err
			}
			for range n {
				t, err := r.valType()
				if err != nil {
					return err
				}
				mut, err := r.byte()
				if err != nil {
					return err
				}
				if mut > 1 {
					return fail("unknown global mutability %d", mut)
				}
				if err := m.skipConst(r); err != nil {
					return err
				}
				if mut == 1 {
					idx := m.globals
					m.res.Globals = append(m.res.Globals, Global{Index: idx, Type: t, Export: GlobalExport(idx)})
					if t == valV128 {
						// wazero's API sets the low 64 bits of a global only.
						m.notResettable("it has a mutable v128 global")
					}
				}
				m.globals++
			}
			if !r.done() {
				return fail("trailing bytes in the global section")
			}
		}
	}
	m.funcs = uint32(len(m.funcTypes))
	for _, t := range m.funcTypes {
		if t >= uint32(len(m.params)) {
			return fail("type %d does not exist", t)
		}
	}
	if defined != 0 && uint32(len(m.funcTypes)) != m.funcImports+defined {
		return fail("inconsistent function counts")
	}
	m.checkType = uint32(len(m.params))
	m.checkFunc = m.funcImports
	m.fuel = m.globals
	m.ready = true
	return nil
}

func (m *module) notResettable(why string) {
	if m.res.Resettable {
		m.res.Resettable, m.res.NotResettable = false, why
	}
}

// newSection returns the payload of a section the module lacks.
func (m *module) newSection(id byte) []byte {
	switch id {
	case secType:
		return []byte{0x01, 0x60, 0x00, 0x01, valI64}
	case secImport:
		return m.appendCheckImport(appendU32(nil, 1))
	case secGlobal:
		return m.appendFuel(appendU32(nil, 1))
	case secExport:
		return m.appendExports(appendU32(nil, uint32(1+len(m.res.Globals))))
	}
	panic("instrument: no new section " + strconv.Itoa(int(id)))
}

func (m *module) appendCheckImport(b []byte) []byte {
	b = appendName(b, CheckModule)
	b = appendName(b, CheckName)
	return appendU32(append(b, kindFunc), m.checkType)
}

func (m *module) appendFuel(b []byte) []byte {
	b = append(b, valI64, 0x01, opI64Const)
	b = appendS64(b, Budget)
	return append(b, opEnd)
}

func (m *module) appendExports(b []byte) []byte {
	b = appendName(b, FuelExport)
	b = appendU32(append(b, kindGlobal), m.fuel)
	for _, g := range m.res.Globals {
		b = appendName(b, g.Export)
		b = appendU32(append(b, kindGlobal), g.Index)
	}
	return b
}

func (m *module) imports(payload []byte) ([]byte, error) {
	r := &reader{b: payload}
	n, _ := r.u32()
	out := appendU32(nil, n+1)
	out = append(out, payload[r.off:]...)
	return m.appendCheckImport(out), nil
}

func (m *module) globalSection(payload []byte) ([]byte, error) {
	r := &reader{b: payload}
	n, _ := r.u32()
	out := appendU32(nil, n+1)
	for range n {
		start := r.off
		r.off += 2 // value type, mutability (checked by scan)
		out = append(out, payload[start:r.off]...)
		var err error
		if out, err = m.constExpr(out, r); err != nil {
			return nil, err
		}
	}
	return m.appendFuel(out), nil
}

func (m *module) exports(payload []byte) ([]byte, error) {
	r := &reader{b: payload}
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	out := appendU32(nil, n+1+uint32(len(m.res.Globals)))
	for range n {
		name, err := r.name()
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(name, ReservedPrefix) {
			return nil, fail("it exports %q; names starting with %q are reserved for Pixie", name, ReservedPrefix)
		}
		kind, err := r.byte()
		if err != nil {
			return nil, err
		}
		idx, err := r.u32()
		if err != nil {
			return nil, err
		}
		switch kind {
		case kindFunc:
			if idx, err = m.shift(idx); err != nil {
				return nil, err
			}
		case kindGlobal:
			if idx >= m.globals {
				return nil, fail("global %d does not exist", idx)
			}
		case kindTable, kindMemory:
		default:
			return nil, fail("unknown export kind %d", kind)
		}
		out = appendName(out, name)
		out = appendU32(append(out, kind), idx)
	}
	if !r.done() {
		return nil, fail("trailing bytes in the export section")
	}
	return m.appendExports(out), nil
}

func (m *module) start(payload []byte) ([]byte, error) {
	r := &reader{b: payload}
	idx, err := r.u32()
	if err != nil {
		return nil, err
	}
	if !r.done() {
		return nil, fail("trailing bytes in the start section")
	}
	if idx, err = m.shift(idx); err != nil {
		return nil, err
	}
	return appendU32(nil, idx), nil
}

// elements renumbers the function indices of element segments.
func (m *module) elements(payload []byte) ([]byte, error) {
	r := &reader{b: payload}
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	out := appendU32(nil, n)
	for range n {
		flags, err := r.u32()
		if err != nil {
			return nil, err
		}
		if flags > 7 {
			return nil, fail("unknown element segment flags %d", flags)
		}
		out = appendU32(out, flags)
		if flags&2 != 0 && flags&1 == 0 { // active with a table index
			t, err := r.u32()
			if err != nil {
				return nil, err
			}
			out = appendU32(out, t)
		}
		if flags&1 == 0 { // active: offset
			if out, err = m.constExpr(out, r); err != nil {
				return nil, err
			}
		}
		if flags&3 != 0 { // element kind or reference type
			c, err := r.byte()
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		cnt, err := r.u32()
		if err != nil {
			return nil, err
		}
		out = appendU32(out, cnt)
		for range cnt {
			if flags&4 == 0 { // function indices
				idx, err := r.u32()
				if err != nil {
					return nil, err
				}
				if idx, err = m.shift(idx); err != nil {
					return nil, err
				}
				out = appendU32(out, idx)
			} else if out, err = m.constExpr(out, r); err != nil {
				return nil, err
			}
		}
	}
	if !r.done() {
		return nil, fail("trailing bytes in the element section")
	}
	return out, nil
}

// skipConst reads a constant expression, checking its indices.
func (m *module) skipConst(r *reader) error {
	_, err := m.constExpr(nil, r)
	return err
}

// constExpr copies a constant expression to out, renumbering ref.func and checking that
// global.get names a global that exists (when the globals are known).
func (m *module) constExpr(out []byte, r *reader) ([]byte, error) {
	for {
		start := r.off
		op, err := r.byte()
		if err != nil {
			return nil, err
		}
		switch op {
		case opEnd:
			return append(out, op), nil
		case opRefFunc:
			idx, err := r.u32()
			if err != nil {
				return nil, err
			}
			if m.ready {
				if idx, err = m.shift(idx); err != nil {
					return nil, err
				}
			}
			out = appendU32(append(out, op), idx)
			continue
		case opGlobalGet:
			idx, err := r.u32()
			if err != nil {
				return nil, err
			}
			if m.ready {
				if idx >= m.globals {
					return nil, fail("global %d does not exist", idx)
				}
			}
		default:
			if err := r.immediates(op); err != nil {
				return nil, err
			}
		}
		out = append(out, r.b[start:r.off]...)
	}
}

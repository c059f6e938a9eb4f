package instrument

// The data section: checked, and its segments joined where that cannot change what an instance
// starts with.
//
// Go's linker cuts a module's data at every run of more than eight zero bytes, so a Go guest
// has tens of thousands of data segments (39,020 for block-risky-commands, for 0.97 MB of
// data). wazero keeps each one as a struct in the compiled module and gives every instance a
// slice header per segment: about 3 MB of heap per module and 0.9 MB per instance, and a loop
// over all of them at every instantiation. Joining neighbours across short zero gaps leaves a
// handful of segments (a dozen for a Go guest) for a few hundred kilobytes of zeros.
//
// Joining is exact when nothing can tell the difference:
//
//   - every segment is active in the module's own memory (not imported: another module could
//     see the order of writes), at a constant offset, and lies within the memory's initial
//     size, so that instantiation applies every one of them and none traps;
//   - nothing names a segment by its index: no memory.init or data.drop in the code (the code
//     section comes before the data section), no data count section, no data segment names;
//   - a joined run is in ascending order without overlaps, and no earlier segment writes into
//     the gaps it fills with zeros (segments apply in order, so a later one may cover a gap).
//
// Otherwise the section is copied as it is.

// mergeGap is the longest run of zeros a joined segment carries between two segments.
const mergeGap = 256

// maxRuns bounds the joined runs an earlier gap is checked against (the check is linear in
// them); past it the section is copied as it is.
const maxRuns = 256

// dataSegment is an active segment at a constant offset in memory 0.
type dataSegment struct {
	offset uint32
	init   []byte
}

// data checks the data section and returns its payload, with segments joined when data.go's
// conditions hold.
func (m *module) data(payload []byte) ([]byte, error) {
	r := &reader{b: payload}
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	joinable := m.memDefined && !m.segIndexed && m.codeDone
	var segs []dataSegment
	limit := uint64(m.memPages) << 16
	for range n {
		flags, err := r.u32()
		if err != nil {
			return nil, err
		}
		var offset uint32
		constant := false
		switch flags {
		case 0, 2:
			mem := uint32(0)
			if flags == 2 {
				if mem, err = r.u32(); err != nil {
					return nil, err
				}
			}
			start := r.off
			if err := m.skipConst(r); err != nil {
				return nil, err
			}
			if v, ok := i32Const(payload[start:r.off]); ok && mem == 0 {
				offset, constant = uint32(v), true
			}
		case 1:
		default:
			return nil, fail("unknown data segment flags %d", flags)
		}
		size, err := r.u32()
		if err != nil {
			return nil, err
		}
		init, err := r.bytes(int(size))
		if err != nil {
			return nil, err
		}
		if !constant || uint64(offset)+uint64(size) > limit {
			joinable = false
		}
		if joinable {
			segs = append(segs, dataSegment{offset: offset, init: init})
		}
	}
	if !r.done() {
		return nil, fail("trailing bytes in the data section")
	}
	if !joinable || len(segs) < 2 {
		return payload, nil
	}
	if joined := joinSegments(segs); joined != nil {
		return joined, nil
	}
	return payload, nil
}

// i32Const returns v when expr is exactly `i32.const v; end`.
func i32Const(expr []byte) (int32, bool) {
	if len(expr) < 2 || expr[0] != opI32Const || expr[len(expr)-1] != opEnd {
		return 0, false
	}
	r := &reader{b: expr[1 : len(expr)-1]}
	v, err := r.sleb(32)
	if err != nil || !r.done() {
		return 0, false
	}
	return int32(v), true
}

// joinSegments returns the payload of a data section with segs joined (see the top of the
// file), or nil when there are too many runs to check.
func joinSegments(segs []dataSegment) []byte {
	type run struct {
		start, end uint64
		parts      []dataSegment
	}
	var runs []run
	cur := run{start: uint64(segs[0].offset), end: uint64(segs[0].offset) + uint64(len(segs[0].init)), parts: segs[:1]}
	// written reports whether an earlier run covers [a, b); a run's span includes its gaps, so
	// this may refuse a join that was safe, never allow one that is not.
	written := func(a, b uint64) bool {
		for _, r := range runs {
			if r.start < b && a < r.end {
				return true
			}
		}
		return false
	}
	for k := 1; k < len(segs); k++ {
		s := segs[k]
		start := uint64(s.offset)
		if start >= cur.end && start-cur.end <= mergeGap && !written(cur.end, start) {
			cur.parts = segs[k-len(cur.parts) : k+1]
			cur.end = start + uint64(len(s.init))
			continue
		}
		runs = append(runs, cur)
		if len(runs) > maxRuns {
			return nil
		}
		cur = run{start: start, end: start + uint64(len(s.init)), parts: segs[k : k+1]}
	}
	runs = append(runs, cur)
	out := appendU32(nil, uint32(len(runs)))
	for _, r := range runs {
		out = append(out, 0, opI32Const)
		out = appendS64(out, int64(int32(uint32(r.start))))
		out = append(out, opEnd)
		out = appendU32(out, uint32(r.end-r.start))
		at := r.start
		for _, p := range r.parts {
			for ; at < uint64(p.offset); at++ {
				out = append(out, 0)
			}
			out = append(out, p.init...)
			at += uint64(len(p.init))
		}
	}
	return out
}

// namesData reports whether a name section has data segment names (subsection 9), which
// name segments by index.
func namesData(payload []byte) bool {
	r := &reader{b: payload}
	if _, err := r.name(); err != nil {
		return false
	}
	for !r.done() {
		id, err := r.byte()
		if err != nil {
			return false
		}
		size, err := r.u32()
		if err != nil {
			return false
		}
		if id == 9 {
			return true
		}
		if _, err := r.bytes(int(size)); err != nil {
			return false
		}
	}
	return false
}

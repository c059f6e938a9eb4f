package instrument

// names returns the payload of the "name" custom section with function indices renumbered and
// a name for the check import, or nil when it cannot be read (wazero refuses a malformed name
// section too).
func (m *module) names(payload []byte) []byte {
	r := &reader{b: payload}
	if _, err := r.name(); err != nil {
		return nil
	}
	out := append([]byte(nil), payload[:r.off]...)
	for !r.done() {
		id, err := r.byte()
		if err != nil {
			return nil
		}
		size, err := r.u32()
		if err != nil {
			return nil
		}
		sub, err := r.bytes(int(size))
		if err != nil {
			return nil
		}
		switch id {
		case 1: // function names: a name map keyed by function index
			sub = m.renameMap(sub, true)
		case 2, 3: // local names, label names: maps keyed by function index
			sub = m.renameIndirect(sub)
		}
		if sub == nil {
			return nil
		}
		out = append(out, id)
		out = appendU32(out, uint32(len(sub)))
		out = append(out, sub...)
	}
	return out
}

// renameMap renumbers a name map's function indices; withCheck adds the check import's name at
// its place.
func (m *module) renameMap(sub []byte, withCheck bool) []byte {
	r := &reader{b: sub}
	n, err := r.u32()
	if err != nil {
		return nil
	}
	count := n
	if withCheck {
		count++
	}
	out := appendU32(nil, count)
	added := !withCheck
	for range n {
		idx, err := r.u32()
		if err != nil {
			return nil
		}
		name, err := r.name()
		if err != nil {
			return nil
		}
		if !added && idx >= m.checkFunc {
			out = appendName(appendU32(out, m.checkFunc), CheckModule+"."+CheckName)
			added = true
		}
		if idx >= m.funcImports {
			idx++
		}
		out = appendName(appendU32(out, idx), name)
	}
	if !added {
		out = appendName(appendU32(out, m.checkFunc), CheckModule+"."+CheckName)
	}
	if !r.done() {
		return nil
	}
	return out
}

// renameIndirect renumbers an indirect name map (function index → name map).
func (m *module) renameIndirect(sub []byte) []byte {
	r := &reader{b: sub}
	n, err := r.u32()
	if err != nil {
		return nil
	}
	out := appendU32(nil, n)
	for range n {
		idx, err := r.u32()
		if err != nil {
			return nil
		}
		if idx >= m.funcImports {
			idx++
		}
		out = appendU32(out, idx)
		start := r.off
		k, err := r.u32()
		if err != nil {
			return nil
		}
		for range k {
			if _, err := r.u32(); err != nil {
				return nil
			}
			if _, err := r.name(); err != nil {
				return nil
			}
		}
		out = append(out, sub[start:r.off]...)
	}
	if !r.done() {
		return nil
	}
	return out
}

//go:build wasip1

package sdk

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/extism/go-pdk"

	"github.com/pixie-dev/pixie/sdk/abi"
)

// Host functions (docs/abi.md). Each takes and returns an Extism memory offset.

//go:wasmimport extism:host/user pixie_ask
func pixieAsk(req uint64) uint64

//go:wasmimport extism:host/user pixie_judge
func pixieJudge(req uint64) uint64

//go:wasmimport extism:host/user pixie_log
func pixieLog(req uint64)

//go:wasmimport extism:host/user pet_context
func petContext() uint64

//go:wasmimport extism:host/user pixie_context
func pixieContext() uint64

// pixieInit is the optional export (abi.EntryInit) the host calls once when it pre-initialises
// an instance, so that the Go runtime is initialised (and the SDK warmed up, see warm) before
// the instance waits in the pool.
//
//lint:ignore U1000 the host calls it: staticcheck does not see //go:wasmexport as a use
//go:wasmexport pixie_init
func pixieInit() int32 {
	warm()
	wasmHost.warm()
	return 0
}

var wasmHost = &pdkHost{}

func platformHost() host { return wasmHost }

// pdkHost talks to Pixie through go-pdk and the pixie_* host functions, keeping Extism's
// kernel calls (alloc, free, length, load_u8, store_u8, input_*, output_set, config_get's
// allocations: each one a few microseconds in the Go host) to about three per run: the
// context comes in one pixie_context block, and every block is read and written with the
// cheap load_u64/store_u64, never byte by byte (docs/abi.md, "Cost").
type pdkHost struct {
	// ctx is the run's context, fetched on first use. An instance serves one run, so it is
	// fetched once; warm clears what it fetched during pixie_init.
	ctx *runContext
	// output is the block of the last output set (0: none in this call).
	output uint64
}

type runContext struct {
	target string
	vars   []abi.Var // keys increasing
}

// lookup finds key in vars: a handful of variables, searched in order (a map would cost more
// to build than all the lookups of a run).
func (c *runContext) lookup(key string) (string, bool) {
	for _, v := range c.vars {
		if v.Key == key {
			return v.Value, true
		}
	}
	return "", false
}

// context returns the run's context, fetching it with pixie_context on first use: one host
// call, with no kernel call in the guest (the block carries its size in its first 8 bytes and
// is padded to 8, so load_u64 reads all of it). The block is not freed: the instance is closed
// after its one run, taking its memory along, and free would be one more kernel call.
func (h *pdkHost) context() *runContext {
	if h.ctx != nil {
		return h.ctx
	}
	off := pixieContext()
	var head [8]byte
	m := pdk.NewMemory(off, 8)
	m.Load(head[:])
	n, err := abi.ContextSize(head[:])
	if err != nil {
		panic("sdk: pixie_context: " + err.Error())
	}
	b := make([]byte, n)
	copy(b, head[:])
	rest := pdk.NewMemory(off+8, uint64(n-8))
	rest.Load(b[8:]) // n is a multiple of 8: load_u64 only
	target, vars, err := abi.DecodeContextVars(b)
	if err != nil {
		panic("sdk: pixie_context: " + err.Error())
	}
	h.ctx = &runContext{target: target, vars: vars}
	return h.ctx
}

func (h *pdkHost) input() []byte { return []byte(h.context().target) }

// config answers from the context. The context carries every variable of the run (the host's
// Extism config is the same map), so a missing PIXIE_* variable is simply unset; any other key
// is looked up in the Extism config as well, in case a host sets config beyond the context.
func (h *pdkHost) config(key string) (string, bool) {
	if v, ok := h.context().lookup(key); ok {
		return v, true
	}
	if strings.HasPrefix(key, "PIXIE_") {
		return "", false
	}
	return pdk.GetConfig(key)
}

// setOutput writes b into a block allocated with its length rounded up to 8, with store_u64
// alone, and sets the output to its first len(b) bytes: two kernel calls (alloc, output_set).
// Empty output needs none: Extism resets the output at the start of every call.
func (h *pdkHost) setOutput(b []byte) {
	if len(b) == 0 {
		if h.output != 0 { // an earlier output of this call: clear it
			pdk.OutputMemory(pdk.NewMemory(h.output, 0))
		}
		return
	}
	mem := allocPadded(b, 0)
	pdk.OutputMemory(pdk.NewMemory(mem.Offset(), uint64(len(b))))
	h.output = mem.Offset()
}

func (*pdkHost) setError(message string) { pdk.SetErrorString(message) }

// warm runs the context fetch (pixie_context answers an empty context outside a run) and the
// output path once during pixie_init, so that their first-use costs are not paid by the run,
// then forgets both: the run fetches its own context, and Extism resets the output (and the
// kernel's memory) when the run's call starts.
func (h *pdkHost) warm() {
	h.context()
	h.setOutput([]byte("warm"))
	h.setOutput(nil)
	h.ctx, h.output = nil, 0
}

// allocPadded allocates a block of len(b) rounded up to 8 and fills it with b and pad bytes
// using store_u64 alone: one kernel call (alloc).
func allocPadded(b []byte, pad byte) pdk.Memory {
	n := (len(b) + 7) &^ 7
	if n != len(b) {
		p := make([]byte, n)
		copy(p, b)
		for i := len(b); i < n; i++ {
			p[i] = pad
		}
		b = p
	}
	mem := pdk.Allocate(n)
	mem.Store(b)
	return mem
}

// call sends a JSON request padded with spaces (JSON whitespace) to a multiple of 8 bytes,
// so that it is stored without store_u8; the host pads its answer the same way. Request and
// answer blocks are freed: a run may make many calls with large requests.
func (*pdkHost) call(fn string, req []byte) []byte {
	mem := allocPadded(req, ' ')
	defer mem.Free()
	var off uint64
	switch fn {
	case abi.FnAsk:
		off = pixieAsk(mem.Offset())
	case abi.FnJudge:
		off = pixieJudge(mem.Offset())
	default:
		panic("sdk: unknown host function " + fn)
	}
	return readFree(off)
}

func (*pdkHost) log(level, message string) {
	b, err := json.Marshal(abi.LogRequest{Level: level, Message: message})
	if err != nil {
		return
	}
	mem := allocPadded(b, ' ')
	defer mem.Free()
	pixieLog(mem.Offset())
}

// petContext returns the snapshot JSON without the spaces the host pads it with (trailing
// whitespace never belongs to a JSON value).
func (*pdkHost) petContext() []byte { return bytes.TrimRight(readFree(petContext()), " ") }

// readFree reads and frees the block at off: its length (one kernel call), its bytes (with
// load_u64 only when the host padded it to 8), and free.
func readFree(off uint64) []byte {
	if off == 0 {
		return nil
	}
	mem := pdk.FindMemory(off)
	b := mem.ReadBytes()
	mem.Free()
	return b
}

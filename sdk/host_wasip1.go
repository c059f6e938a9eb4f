//go:build wasip1

package sdk

import (
	"github.com/extism/go-pdk"

	"github.com/pixie-dev/pixie/internal/abi"
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

// pixieInit is the optional export (abi.EntryInit) the host calls once when it pre-initialises
// an instance, so that the Go runtime is initialised (and the SDK warmed up, see warm) before
// the instance waits in the pool.
//
//go:wasmexport pixie_init
func pixieInit() int32 {
	warm()
	return 0
}

var wasmHost host = pdkHost{}

func platformHost() host { return wasmHost }

type pdkHost struct{}

func (pdkHost) input() []byte                    { return pdk.Input() }
func (pdkHost) config(key string) (string, bool) { return pdk.GetConfig(key) }
func (pdkHost) setOutput(b []byte)               { pdk.Output(b) }
func (pdkHost) setError(message string)          { pdk.SetErrorString(message) }

func (pdkHost) call(fn string, req []byte) []byte {
	mem := pdk.AllocateBytes(req)
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

func (pdkHost) log(level, message string) {
	b, err := jsonMarshal(abi.LogRequest{Level: level, Message: message})
	if err != nil {
		return
	}
	mem := pdk.AllocateBytes(b)
	defer mem.Free()
	pixieLog(mem.Offset())
}

func (pdkHost) petContext() []byte { return readFree(petContext()) }

func readFree(off uint64) []byte {
	if off == 0 {
		return nil
	}
	mem := pdk.FindMemory(off)
	b := mem.ReadBytes()
	mem.Free()
	return b
}

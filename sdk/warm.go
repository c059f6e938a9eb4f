//go:build wasip1

package sdk

import (
	"encoding/json"

	"github.com/pixie-dev/pixie/sdk/abi"
)

// warm builds what the SDK would otherwise build on a run's first use of it: encoding/json's
// codecs for the ABI's types, which it makes by reflection the first time a type is encoded or
// decoded (about a millisecond in a guest). An instance serves one run, so every run would pay
// it; pixie_init pays it instead, while the instance is prepared for the pool. Rules warm their
// own lazily built state the same way, in init (docs/guests.md).
func warm() {
	for _, v := range []any{&abi.GateOutput{}, &abi.AskRequest{}, &abi.AskResponse{}, &abi.JudgeRequest{},
		&abi.JudgeResponse{}, &abi.LogRequest{}, &abi.HostResult{}} {
		if b, err := json.Marshal(v); err == nil {
			_ = json.Unmarshal(b, v)
		}
	}
	_ = Judgment{Type: "bool"}.JSON()
	primeAllocator()
}

// primeSizes are the Go allocator's size classes up to 1 KiB, the sizes a rule's run
// allocates most.
var primeSizes = [...]int{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256,
	288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024}

// primeSink keeps the compiler from dropping primeAllocator's allocations.
var primeSink []any

// primeAllocator allocates one object of each size class in primeSizes, with and without
// pointers, and drops them. The Go runtime then holds a span with free slots for each, so the
// run's first allocations take the allocator's fast path instead of fetching spans through
// the heap's metadata, which is cold in the CPU's caches in a fresh instance (about 40 µs of
// a block-risky-commands run, measured; docs/guests.md). The memory is the instance's, and
// goes with it.
func primeAllocator() {
	for _, n := range primeSizes {
		primeSink = append(primeSink, make([]byte, n), make([]*byte, n/8))
	}
	primeSink = nil
}

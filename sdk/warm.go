//go:build wasip1

package sdk

import (
	"encoding/json"

	"github.com/pixie-dev/pixie/internal/abi"
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
}

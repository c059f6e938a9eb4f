//go:build wasip1

// Command fault-calls asks CALLS times and fails with the first helper error.
package main

import (
	"fmt"
	"strconv"

	"github.com/pixie-dev/pixie/sdk"
)

func main() {}

//go:wasmexport gate
func gate() int32 {
	return sdk.Run(func() int32 {
		calls := 21
		if s, ok := sdk.Config("CALLS"); ok {
			calls, _ = strconv.Atoi(s)
		}
		for i := range calls {
			if _, err := sdk.Ask("say ok", strconv.Itoa(i)); err != nil {
				return sdk.Fail(fmt.Errorf("call %d: %w", i+1, err))
			}
		}
		return sdk.Continue(strconv.Itoa(calls) + " calls answered")
	})
}

//go:build wasip1

// Command fault-badjson exits 11 with output that is not gate output JSON.
package main

import "github.com/pixie-dev/pixie/sdk"

func main() {}

//go:wasmexport gate
func gate() int32 {
	return sdk.Run(func() int32 {
		sdk.Continue("verdict: stop")
		return sdk.ExitConclude
	})
}

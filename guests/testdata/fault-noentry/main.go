//go:build wasip1

// Command fault-noentry exports run but not gate.
package main

import "github.com/pixie-dev/pixie/sdk"

func main() {}

//go:wasmexport run
func run() int32 { return sdk.Run(func() int32 { return sdk.Skip() }) }

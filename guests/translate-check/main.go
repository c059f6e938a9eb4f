//go:build wasip1

package main

import "github.com/pixie-dev/pixie/sdk"

//go:wasmexport gate
func gate() int32 { return sdk.Run(rule) }

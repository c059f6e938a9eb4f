//go:build wasip1

package main

import "github.com/pixie-dev/pixie/sdk"

//go:wasmexport run
func run() int32 { return sdk.Run(skill) }

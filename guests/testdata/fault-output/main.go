//go:build wasip1

// Command fault-output writes SIZE bytes of output.
package main

import (
	"strconv"
	"strings"

	"github.com/pixie-dev/pixie/sdk"
)

func main() {}

//go:wasmexport gate
func gate() int32 {
	return sdk.Run(func() int32 {
		size := 300000
		if s, ok := sdk.Config("SIZE"); ok {
			size, _ = strconv.Atoi(s)
		}
		return sdk.Continue(strings.Repeat("x", size))
	})
}

//go:build wasip1

// Command fault-logspam logs 10 KB lines as fast as it can, forever: the host keeps the first
// lines of a run (hostfuncs' MaxLogLines, each cut at MaxLogLine) and drops the rest, and the
// gate's time limit ends the run.
package main

import (
	"strings"

	"github.com/pixie-dev/pixie/sdk"
)

func main() {}

//go:wasmexport gate
func gate() int32 {
	return sdk.Run(func() int32 {
		line := strings.Repeat("spam ", 2000)
		for i := 0; ; i++ {
			sdk.Logf("info", "%d %s", i, line)
		}
	})
}
